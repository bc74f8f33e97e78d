"""The worker-side request of a ``LockedTask``: the main process's share of the work.

In the prefork pool the lock is taken and released by the child that runs the
body. When the child cannot release (revoke with ``terminate=True``, a hard time
limit, the child killed), the main process learns of it through this request's
callbacks and releases by token. The token is chosen here, in the main process,
and handed to the child in the request, so both sides name the same execution
and a release can never touch another delivery's lock.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from billiard.exceptions import Terminated, TimeLimitExceeded, WorkerLostError
from celery.worker.request import Request

from . import signals
from .guard import BACKEND_ERRORS, ENQUEUE_TOKEN_HEADER, TOKEN_HEADER, enqueue_digest
from .runtime import runtime_for
from .store.client import new_token
from .store.errors import error_text

__all__ = ["LockedRequest", "release_enqueue_lock"]

logger = logging.getLogger("celery_singleton_lock")

#: Exceptions the pool reports when the child died or was killed mid-task.
_CHILD_GONE = (Terminated, TimeLimitExceeded, WorkerLostError, SystemExit, KeyboardInterrupt)


def release_enqueue_lock(task: Any, task_id: Any, fields: Any, why: str) -> bool:
    """Release the enqueue lock a message names, by the token it carries (no-op without one).

    ``fields`` is the message's request (its headers, ``args`` and ``kwargs``; anything with
    ``get``). The lock is the one the message's headers name, not one derived again here.
    """
    token = fields.get(ENQUEUE_TOKEN_HEADER)
    if not token:
        return False
    try:
        runtime = runtime_for(task.app)
        digest = enqueue_digest(fields, lambda: task.lock_digest(fields.get("args") or (),
                                                                 fields.get("kwargs") or {}))
        key = runtime.layout.enqueue(task.name, digest, task.singleton_lock()[0].scope)
        released = runtime.store.release(key, token)
    except Exception as exc:
        logger.warning("singleton lock: %s[%s]: releasing enqueue lock (%s) failed (%s); it expires within "
                       "lock_queue_ttl", task.name, task_id, why, error_text(exc))
        return False
    if released:
        logger.info("singleton lock: %s[%s]: released enqueue lock %s (%s)", task.name, task_id, key, why)
    return released


class LockedRequest(Request):
    """Adds the execution token, and releases for a child that died holding the lock."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.request_dict[TOKEN_HEADER] = new_token()

    def on_accepted(self, pid: int, time_accepted: float) -> None:
        super().on_accepted(pid, time_accepted)
        if pid and pid != os.getpid():  # maybe a pool child runs it: watch for its death
            # Until the child accepts its next task: Celery's worker answers a success through
            # a request subclass of its own whose on_success never reaches this class.
            runtime_for(self.task.app).child_watch.watch(pid, self)

    def _unwatch(self) -> None:
        pid = getattr(self, "worker_pid", None)
        if pid and pid != os.getpid():
            runtime_for(self.task.app).child_watch.forget(pid, self)

    def on_timeout(self, soft: bool, timeout: float) -> None:
        super().on_timeout(soft, timeout)
        if not soft:
            self._unwatch()
            self.release_for_child("hard time limit")

    def on_failure(self, exc_info: Any, send_failed_event: bool = True, return_ok: bool = False) -> Any:
        self._unwatch()
        try:
            return super().on_failure(exc_info, send_failed_event=send_failed_event, return_ok=return_ok)
        finally:
            exc = getattr(exc_info, "exception", None)
            exc = getattr(exc, "exc", exc)  # ExceptionWithTraceback
            if isinstance(exc, _CHILD_GONE):
                self.release_for_child(type(exc).__name__)

    def release_enqueue_lock(self, why: str) -> bool:
        """Release the enqueue lock this message carries, if it is still the queue's."""
        return release_enqueue_lock(self.task, self.id, self.request_dict, why)

    def release_for_child(self, why: str) -> bool:
        """Release what the child held under this request's tokens (harmless if it held nothing)."""
        task = self.task
        try:
            runtime = runtime_for(task.app)
            digest = task.lock_digest(self.args, self.kwargs)
            key = runtime.layout.lock(task.name, digest)
            items = [(key, self.request_dict[TOKEN_HEADER])]
            enqueue_token = self.request_dict.get(ENQUEUE_TOKEN_HEADER)
            if enqueue_token:  # the child may have died before adopting the enqueue lock
                scope = task.singleton_lock()[0].scope
                queued = enqueue_digest(self.request_dict, lambda: digest)
                items.append((runtime.layout.enqueue(task.name, queued, scope), enqueue_token))
            released = any(runtime.store.release_many(items))
        except BACKEND_ERRORS as exc:
            logger.warning("singleton lock: %s[%s]: release after %s failed (%s); the lock expires within "
                           "its TTL", task.name, self.id, why, error_text(exc))
            return False
        except Exception:
            logger.exception("singleton lock: %s[%s]: release after %s failed", task.name, self.id, why)
            return False
        if released:
            logger.info("singleton lock: %s[%s]: released %s from the worker's main process after %s",
                        task.name, self.id, key, why)
            signals.lock_released.send(sender=task, key=key, task_id=self.id, released=True)
        return released
