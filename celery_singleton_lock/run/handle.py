"""The lock as a running task sees it: ``self.lock`` in a bound task."""

from __future__ import annotations

import time
from typing import Callable, Optional

from ..exceptions import ConfigurationError, LockBackendError, LockLostError
from ..store import STORE_ERRORS, Lease, error_text, permanent_problem

__all__ = ["ExecutionLock"]


class ExecutionLock:
    """The lock held by one execution of a task.

    One object per execution (never shared between the threads or greenlets of a
    pool). Pass :attr:`fencing_token` to the systems the task writes to, so they
    can refuse a write from a holder that lost the lock while paused.
    """

    __slots__ = ("key", "token", "task_name", "task_id", "hand_over_ms", "description", "_lease", "_fence",
                 "_ask_fence")

    def __init__(self, key: str, token: str, ask_fence: Callable[[], Optional[int]], task_name: str,
                 task_id: str, lease: Lease, description: Optional[str] = None) -> None:
        self.key = key
        #: The call behind the lock (``account_id=42``), when the app describes its calls.
        self.description = description
        self.token = token
        self._ask_fence = ask_fence
        self._fence: Optional[int] = None
        self.task_name = task_name
        self.task_id = task_id
        #: Set when ``self.retry()`` published a retry that takes the lock over (queued_or_running):
        #: how long the lock waits for it in the queue. The hand-over happens as the execution ends.
        self.hand_over_ms: Optional[int] = None
        self._lease = lease

    @property
    def fencing_token(self) -> int:
        """A number larger than every fencing token an earlier holder of this lock was handed.

        Asked of the store on first read, while this execution still holds the lock (tasks
        that never read it pay nothing for it), then kept. Raises :class:`LockLostError`
        when the lock is no longer this execution's: its writes must not be accepted;
        :class:`LockBackendError` when the store does not answer (read it again later, or let
        the task fail: no fence, no fenced write); :class:`ConfigurationError` when it refuses.
        """
        if self._fence is None:
            try:
                fence = self._ask_fence()
            except STORE_ERRORS as exc:
                raise self._unanswered(exc) from exc
            if fence is None:  # the heartbeat reports the loss (log, signal) at its next renewal
                raise self._lost_error()
            self._fence = fence
        return self._fence

    @property
    def lease(self) -> Lease:
        """The heartbeat's record of this lock (library internals)."""
        return self._lease

    @property
    def lost(self) -> bool:
        """Whether the lock may be another execution's now: the heartbeat found the token gone,
        or the lock's TTL passed since its last confirmed renewal (a pause longer than
        ``lock_ttl``), which this process knows before its heartbeat runs again."""
        lease = self._lease
        return lease.lost.is_set() or lease.ran_out(time.monotonic())

    def check(self) -> None:
        """Raise :class:`LockLostError` if the lock was lost; call before irreversible work."""
        if self.lost:
            raise self._lost_error()

    def _unanswered(self, exc: BaseException) -> Exception:
        problem = permanent_problem(exc, "fence")
        if problem is not None:
            return ConfigurationError(f"task {self.task_name}[{self.task_id}]: the lock store refused the fencing "
                                      f"token of {self.key}: {problem}", task=self.task_name, key=self.key)
        return LockBackendError(f"task {self.task_name}[{self.task_id}]: cannot reach Redis for the fencing token "
                                f"of {self.key}: {error_text(exc)}", task=self.task_name, key=self.key)

    @property
    def who(self) -> str:
        """How a report of this lock names its holder."""
        return f"task {self.task_name}[{self.task_id}]"

    @property
    def unguarded(self) -> str:
        """What a loss report says keeps running, and how the code learns of the loss."""
        return "the body keeps running unguarded (check self.lock.lost or self.lock.check())"

    def _lost_error(self) -> LockLostError:
        return LockLostError(
            f"task {self.task_name}[{self.task_id}] lost its lock {self.key}: another execution may be running",
            task=self.task_name, key=self.key)

    def __repr__(self) -> str:
        fence = "not asked" if self._fence is None else self._fence
        return f"<ExecutionLock {self.key} fencing_token={fence} lost={self.lost}>"
