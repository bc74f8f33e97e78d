"""The worker's lifecycle: what its main process does around the executions.

- ``receivers.py``: Celery signal receivers (start probe, revoke, shutdown).
- ``request.py``: the worker-side request: the per-delivery token, releases for a child that died.
- ``start_check.py``: the worker-start check of the lock store.
- ``pool_watch.py``: the main process's watch over every pool process, for its shared holds.

May import: everything below it (``exceptions``, ``signals``, ``store``, ``config``, ``metrics``,
``calls``, ``runtime``, ``run``, ``shared``) and ``task``.
"""
