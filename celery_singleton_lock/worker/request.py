"""The worker-side request of a ``LockedTask``: the main process's share of the work.

In the prefork pool the lock is taken and released by the child that runs the
body. When the child cannot release (revoke with ``terminate=True``, a hard time
limit, the child killed), the main process learns of it through this request's
callbacks and releases by token. The token is chosen here, in the main process,
and handed to the child in the request, so both sides name the same execution
and a release can never touch another delivery's lock.
"""

from __future__ import annotations

import os
from typing import Any

from billiard.exceptions import Terminated, TimeLimitExceeded, WorkerLostError
from celery.worker.request import Request

from ..calls import headers
from ..run.exits import exit_for_child, release_enqueue_lock, release_for_child
from ..runtime.lock_runtime import runtime_for
from ..store import new_token

__all__ = ["LockedRequest"]

#: Exceptions the pool reports when the child died or was killed mid-task.
_CHILD_GONE = (Terminated, TimeLimitExceeded, WorkerLostError, SystemExit, KeyboardInterrupt)


class LockedRequest(Request):
    """Adds the execution token, and releases for a child that died holding the lock."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.request_dict[headers.TOKEN] = new_token()
        eventer = getattr(self, "_eventer", None)
        self.request_dict[headers.EVENTS] = bool(eventer is not None and eventer.enabled and self.task.send_events)

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
                self.release_for_child(type(exc).__name__, exc)

    def release_enqueue_lock(self, why: str) -> bool:
        """Release the enqueue lock this message carries, if it is still the queue's."""
        return release_enqueue_lock(self.task, self.id, self.request_dict, why)

    def release_for_child(self, why: str, error: Any = None, shutdown: bool = False) -> bool:
        """Release what the child held under this request's tokens (harmless if it held nothing);
        ``error`` is what the pool reported, if it did."""
        return release_for_child(self.task, self.id, self.request_dict, self.args, self.kwargs, why,
                                 exit_for_child(self.id, error, shutdown))
