"""What a call is: when two calls are the same, the key they share, and what their message carries.

- ``arguments.py``, ``encoding.py``: binding to the signature, the canonical encoding and its digest.
- ``limits.py``: a call's ``lock_limit`` and ``lock_window``, and so its keys.
- ``describe.py``: the call in a few words, for ``celery locks`` and the signals.
- ``headers.py``: the message headers the library writes and reads.

May import: ``exceptions``, ``store``, ``config``.
"""
