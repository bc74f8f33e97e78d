"""The publishing side: ``apply_async`` of a guarded task.

- ``publish.py``: the enqueue lock, then the message, or the duplicate's answer.
- ``supersede.py``: each call of ``replace`` / ``lock_debounce`` made its key's newest.
- ``refusals.py``: Celery's own errors for a call Celery would refuse.

May import: ``exceptions``, ``signals``, ``store``, ``config``, ``calls``, ``runtime``, ``run``.
"""
