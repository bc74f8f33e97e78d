"""Keep held locks alive: one renewal thread per process, one round trip per period.

Locks get short TTLs (30 s by default) so a dead holder frees them quickly; a
live holder's :class:`Renewer` extends them. Every wake-up renews *all* held
leases in a single script call, so after the first period the leases line up
and the cost is one round trip per period whatever their number.

The thread is started by the first :meth:`Renewer.hold` in a process (after a
fork the child starts its own; nothing is inherited), lingers briefly when
idle so a busy worker does not start one per task, and exits on its own. A
renewal error is logged and retried; a lease is declared lost only when Redis
says its token is gone, or when its TTL has surely run out since the last
confirmed renewal. The loop never raises, so it cannot take a worker down.

It also reads the answers to the releases this process sent without waiting
(:class:`~.backend.PostsReleases`) when no later call to the store has read them.

The same thread withdraws asks whose answer never came (:meth:`Renewer.release_later`):
a paused store runs such an ask when it resumes, and the lock it takes must not
outlive the caller's decision that it was not granted.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Any, Callable, List, Optional, Set

from .backend import LockBackend
from .errors import error_text
from .lease import Lease

__all__ = ["Renewer"]

logger = logging.getLogger("celery_singleton_lock.heartbeat")

Clock = Callable[[], float]
LostCallback = Callable[["Lease", str], None]


class _Withdrawal:
    """A lock an unanswered ask may have taken: released by token once the store answers."""

    __slots__ = ("key", "token", "state", "until", "answers")

    def __init__(self, key: str, token: str, state: str, until: float) -> None:
        self.key = key
        self.token = token
        self.state = state
        self.until = until
        self.answers = 0


class Renewer:
    """Renews every lease held by this process from one background thread."""

    #: How long an idle thread waits for a new lease before exiting.
    idle_linger = 1.0
    #: How often, while leases are held, the thread asks whether the store restarted (its
    #: :meth:`~.backend.LockBackend.epoch` changed): held locks it lost are then taken back at
    #: once, within the wait that a restarted server imposes on new grants.
    restart_check = 1.0

    def __init__(self, store: LockBackend, *, on_lost: Optional[LostCallback] = None,
                 clock: Clock = time.monotonic, name: str = "singleton-lock-heartbeat") -> None:
        self._store = store
        self._on_lost = on_lost
        self._clock = clock
        self._name = name
        self._reset()
        #: Number of renewal round trips made by this process (diagnostics and benchmarks).
        self.round_trips = 0
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: (ref() is not None) and ref()._reset())  # type: ignore

    def _reset(self) -> None:
        # A fork copies the parent's leases and maybe a held lock, but not its thread:
        # the child starts from nothing.
        # hold() and drop() run on every task: they take the lock itself, not the condition's
        # wrapper around it.
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._leases: Set[Lease] = set()
        self._thread: Optional[threading.Thread] = None
        self._wake_at = float("inf")
        self._closed = False
        self._epoch: Optional[str] = None
        self._epoch_due = 0.0
        self._withdrawals: List[_Withdrawal] = []
        self._withdraw_due = 0.0

    # -- the holder's side ---------------------------------------------------------------------
    def hold(self, lease: Lease) -> None:
        """Start renewing ``lease`` (starts the thread in this process when needed)."""
        with self._lock:
            self._closed = False
            self._leases.add(lease)
            self._wake(lease.next_due)

    def release_later(self, key: str, token: str, within: float, state: str = "running") -> None:
        """Release ``key`` by ``token`` (in ``state``) once the store answers again, from the renewal thread.

        For an ask that failed without an answer: it may still run (a paused store reads it
        when it resumes). Released on two answered tries a period apart, so a release that
        overtakes the late ask does not leave its lock behind; given up after ``within``
        seconds, by when the lock expired anyway.
        """
        with self._cond:
            self._closed = False
            now = self._clock()
            self._withdrawals.append(_Withdrawal(key, token, state, now + within))
            if len(self._withdrawals) == 1:
                self._withdraw_due = now + self.restart_check
            self._wake(self._withdraw_due)

    def _wake(self, due: float) -> None:
        """Start the thread in this process, or wake it if it sleeps past ``due`` (condition held)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        elif due < self._wake_at:
            self._cond.notify()

    def drop(self, lease: Lease) -> None:
        """Stop renewing ``lease``; call before releasing it in Redis.

        The thread is not woken (a busy worker would wake it once per task): it finds at its
        next tick that it holds nothing, and lingers from then on.
        """
        with self._lock:
            lease.released = True
            self._leases.discard(lease)

    def release_all(self) -> List[Lease]:
        """Release every held lease (worker shutdown); returns those that were still ours."""
        self._settle()
        with self._cond:
            leases = list(self._leases)
            for lease in leases:
                lease.released = True
            self._leases.clear()
            self._cond.notify()
        if not leases:
            return []
        answers = self._store.release_many([(lease.key, lease.token) for lease in leases])
        return [lease for lease, released in zip(leases, answers) if released]

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread now (it is restarted by the next :meth:`hold`)."""
        with self._cond:
            self._closed = True
            thread = self._thread
            self._cond.notify()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    # -- the thread ----------------------------------------------------------------------------
    def _settle(self) -> None:
        """Read the answers to releases this process posted and no later call has read (see
        :class:`~.backend.PostsReleases`): at every tick, so none waits past a heartbeat period."""
        settle = getattr(self._store, "settle_posted", None)
        if settle is None:
            return
        try:
            settle()
        except Exception:  # the loop must not die; the answers' own handlers log what failed
            logger.exception("singleton lock: reading the answers to released locks failed")

    def _run(self) -> None:
        idle_since: Optional[float] = None
        while True:
            self._settle()
            with self._cond:
                if self._closed:
                    self._thread = None
                    return
                now = self._clock()
                if not self._leases and not self._withdrawals:
                    idle_since = now if idle_since is None else idle_since
                    remaining = self.idle_linger - (now - idle_since)
                    if remaining <= 0:
                        self._thread = None
                        return
                    self._wake_at = now + remaining
                    self._cond.wait(remaining)
                    continue
            with self._cond:
                now = self._clock()
                if not self._leases and not self._withdrawals:
                    continue
                idle_since = None
                never = float("inf")
                due = min((lease.next_due for lease in self._leases), default=never)
                epoch_due = self._epoch_due if self._leases else never
                withdraw_due = self._withdraw_due if self._withdrawals else never
                check = due > now and epoch_due <= now
                withdraw = due > now and not check and withdraw_due <= now
                if due > now and not check and not withdraw:
                    self._wake_at = min(due, epoch_due, withdraw_due)
                    self._cond.wait(self._wake_at - now)
                    continue
                batch = list(self._leases)
                withdrawals = list(self._withdrawals)
                self._wake_at = never
            if withdraw:
                self._withdraw(withdrawals)
                continue
            if check:
                if self._restarted():
                    with self._cond:
                        for lease in batch:
                            lease.next_due = min(lease.next_due, self._clock())
                continue
            try:
                self._renew(batch)
            except Exception:  # never let the loop die: log and go on
                logger.exception("singleton-lock heartbeat: unexpected error while renewing")
                with self._cond:
                    for lease in batch:
                        lease.next_due = max(lease.next_due, self._clock() + lease.heartbeat / 2)

    def _withdraw(self, withdrawals: List[_Withdrawal]) -> None:
        self._withdraw_due = self._clock() + self.restart_check
        try:
            self._store.release_many([(item.key, item.token, item.state) for item in withdrawals])
            answered = 1
        except Exception as exc:
            logger.debug("singleton-lock heartbeat: withdrawing %d ask(s) failed, retrying: %s", len(withdrawals),
                         error_text(exc))
            answered = 0
        now = self._clock()
        with self._cond:
            for item in withdrawals:
                item.answers += answered
            self._withdrawals = [item for item in self._withdrawals if item.answers < 2 and item.until > now]

    def _restarted(self) -> bool:
        """Whether the store's epoch changed since the last look (errors count as "cannot tell")."""
        self._epoch_due = self._clock() + self.restart_check
        try:
            epoch = self._store.epoch()
        except Exception:
            return False
        previous, self._epoch = self._epoch, epoch
        return previous is not None and epoch is not None and epoch != previous

    def _renew(self, batch: List[Lease]) -> None:
        started = self._clock()
        for lease in [lease for lease in batch if lease.ran_out(started)]:
            # Past its TTL: another holder may have it now. Never renewed again.
            self._lose(lease, lease.ran_out_reason())
            batch.remove(lease)
        if not batch:
            return
        try:
            self.round_trips += 1
            results = self._store.renew([lease.renewal for lease in batch])
        except Exception as exc:
            logger.warning("singleton-lock heartbeat: renewing %d lock(s) failed, retrying: %s", len(batch),
                           error_text(exc))
            retry_at = self._clock()
            for lease in batch:
                lease.unreached = error_text(exc)
                if lease.ran_out(retry_at):
                    self._lose(lease, lease.ran_out_reason())
                else:
                    lease.next_due = retry_at + min(lease.heartbeat / 2, 1.0)
            return
        for lease, ok in zip(batch, results):
            if ok:
                lease.confirmed_at = started
                lease.next_due = started + lease.heartbeat
                lease.unreached = None
            else:
                self._lose(lease, "Redis no longer holds its token (expired or taken over)")

    def _lose(self, lease: Lease, reason: str) -> None:
        with self._cond:
            if lease.released or lease not in self._leases:
                return  # released while the renewal was in flight: not a loss
            self._leases.discard(lease)
            lease.lost.set()
        if self._on_lost is not None:
            try:
                self._on_lost(lease, reason)
            except Exception:
                logger.exception("singleton-lock heartbeat: lost-lock callback failed")
