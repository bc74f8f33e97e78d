"""Celery signal receivers, connected once when the package is imported.

Receivers are module-level functions connected with ``weak=False`` and a
``dispatch_uid``, so importing the package twice (or reloading it in tests)
never connects them twice and garbage collection never disconnects them.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app
from celery import signals as celery_signals

from .runtime import peek_runtime, runtime_for

__all__ = ["connect_receivers"]

logger = logging.getLogger("celery_singleton_lock")


def _release_held(app: Any, why: str) -> None:
    runtime = peek_runtime(app)
    if runtime is None:
        return
    try:
        count = runtime.renewer.release_all()
    except Exception as exc:
        logger.warning("singleton lock: releasing held locks at %s failed (%r); they expire within "
                       "their TTL", why, exc)
        return
    if count:
        logger.info("singleton lock: released %d held lock(s) at %s", count, why)
    runtime.renewer.close(timeout=1.0)


def on_worker_shutdown(sender: Any = None, **kwargs: Any) -> None:
    """Main process, end of shutdown: free what in-flight executions still hold."""
    from celery.worker import state

    from .request import LockedRequest

    for request in list(state.active_requests):
        if isinstance(request, LockedRequest):
            request.release_for_child("worker shutdown")
    _release_held(getattr(sender, "app", None) or current_app, "worker shutdown")


def on_worker_process_shutdown(sender: Any = None, **kwargs: Any) -> None:
    """A pool process is exiting: whatever it still holds goes now rather than at TTL."""
    _release_held(current_app, "pool process exit")


def on_task_revoked(sender: Any = None, request: Any = None, terminated: bool = False, **kwargs: Any) -> None:
    """Main process: a message revoked before it started frees the enqueue lock it carried.

    A terminated execution is released by its request once the pool reports the child gone.
    """
    from .guard import BACKEND_ERRORS, ENQUEUE_TOKEN_HEADER
    from .task import LockedTask

    if terminated or not isinstance(sender, LockedTask) or request is None:
        return
    token = request.get(ENQUEUE_TOKEN_HEADER) if hasattr(request, "get") else None
    if not token:
        return
    options = sender.singleton_lock()[0]
    try:
        runtime = runtime_for(sender.app)
        digest = sender.lock_digest(request.args or (), request.kwargs or {})
        key = (runtime.layout.queued if options.scope == "queued" else runtime.layout.lock)(sender.name, digest)
        released = runtime.store.release(key, token)
    except BACKEND_ERRORS as exc:
        logger.warning("singleton lock: %s[%s] revoked: releasing its enqueue lock failed (%r); it expires "
                       "within lock_queue_ttl", sender.name, getattr(request, "id", "?"), exc)
        return
    if released:
        logger.info("singleton lock: %s[%s] revoked before start: released enqueue lock %s",
                    sender.name, getattr(request, "id", "?"), key)


def connect_receivers() -> None:
    celery_signals.task_revoked.connect(on_task_revoked, weak=False,
                                        dispatch_uid="celery_singleton_lock.task_revoked")
    celery_signals.worker_shutdown.connect(on_worker_shutdown, weak=False,
                                           dispatch_uid="celery_singleton_lock.worker_shutdown")
    celery_signals.worker_process_shutdown.connect(on_worker_process_shutdown, weak=False,
                                                   dispatch_uid="celery_singleton_lock.worker_process_shutdown")
