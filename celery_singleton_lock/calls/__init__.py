"""What a call is: when two calls are the same, the key they share, and what their message carries.

- ``arguments.py``, ``encoding.py``: binding to the signature, the canonical encoding and its digest.
- ``limits.py``: a call's ``lock_limit`` and ``lock_window``, and so its keys.
- ``describe.py``: the call in a few words, for ``celery locks`` and the signals.
- ``headers.py``: the message headers the library writes and reads.
- ``ticks.py``: a beat job's key by its schedule's tick (``tick_key``), the crontab recipe.

May import: ``exceptions``, ``store``, ``config``.
"""
