"""Taking a place for a block, and what a block does when every place of its key is taken.

=========  ==================================================================================
on_locked  a block that meets a full key
=========  ==================================================================================
wait       blocks until a place frees, woken by the release (or the end of the soonest window,
           or of a dead holder's lease: no polling), for at most ``wait_timeout``; then
           :class:`LockedError`. Waiting blocks are served first come, first served
           (:mod:`~.store.line`)
raise      :class:`LockedError` at once
retry      inside a running Celery task: the task goes back to its queue for when a place
           should free (``Retry``; its ``max_retries`` is not spent); outside a task it is a
           :class:`ConfigurationError`, raised before anything is asked
=========  ==================================================================================

A store that neither grants nor refuses raises :class:`LockBackendError` (an outage: the
block did not run) or :class:`ConfigurationError` (the store refused: set up wrong). A
block that waits (``on_locked="wait"``) rides an outage that passes within its
``wait_timeout`` (a failover, a restart, a paused master): it asks again, a little later
each time, and only an outage that lasts past the timeout ends it with
:class:`LockBackendError`; a store set up wrong ends it at once.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, NoReturn, Tuple, Union

from .. import signals
from ..exceptions import ConfigurationError, LockBackendError, LockedError
from ..run.taken import holder_id, kept_by, places_taken
from ..store import (LINE_LEASE_MS, STORE_ERRORS, Conflict, Grant, LockBackend, RestartWait, error_text,
                     permanent_problem, wait_for_gate, wait_in_line)
from .requeue import requeue_running_task
from .tuning import Tuning

__all__ = ["Ask", "take"]

logger = logging.getLogger("celery_singleton_lock")

#: A waiting block's first pause after an outage answer, doubled up to the most (seconds): a
#: failover is over in about a second, and a store that is down is not asked in a busy loop.
RIDE_FIRST_DELAY = 0.05
RIDE_MAX_DELAY = 0.5


class Ask:
    """What one block asks the store: its key, token and holder, and who sends the signals."""

    __slots__ = ("lock", "store", "key", "token", "holder", "tuning", "task_id", "description")

    def __init__(self, lock: Any, store: LockBackend, key: str, token: str, holder: Any, tuning: Tuning,
                 description: Any) -> None:
        self.lock, self.store, self.key, self.token, self.holder = lock, store, key, token, holder
        self.tuning, self.task_id, self.description = tuning, holder.task_id or None, description

    def once(self, ride: bool = False) -> Tuple[Union[Grant, Conflict], float]:
        """One ask; a lock store that started a moment ago grants nothing yet, so the ask waits its window.
        With ``ride``, an outage is ridden for up to ``wait_timeout`` (see the module docstring)."""
        if ride:
            return self._riding(self._gated, time.monotonic() + self.tuning.wait_timeout, "acquire")
        return self._answered(self._gated, "acquire")

    def _gated(self) -> Tuple[Union[Grant, Conflict], float]:
        return wait_for_gate(self._ask, self._young)

    def _ask(self) -> Tuple[Union[Grant, Conflict], float]:
        started = time.monotonic()
        return self.store.acquire(self.key, self.token, int(self.tuning.ttl * 1000), self.holder,
                                  limit=self.lock.place_limit), started

    def _young(self, young: RestartWait) -> None:
        logger.info("singleton lock: %s waits for %s: %s", self.lock.where, self.key, young)

    def _answered(self, call: Callable[[], Any], step: str) -> Any:
        try:
            return call()
        except STORE_ERRORS as exc:
            self._unavailable(exc, step)

    def _riding(self, call: Callable[[], Any], deadline: float, step: str) -> Any:
        """``call()``, asked again through an outage until ``deadline``; then the outage is raised."""
        delay, told = RIDE_FIRST_DELAY, False
        while True:
            try:
                return call()
            except STORE_ERRORS as exc:
                remaining = deadline - time.monotonic()
                if permanent_problem(exc, step) is not None or remaining <= 0:
                    self._unavailable(exc, step)
                if not told:
                    logger.warning("singleton lock: %s: the lock store did not answer for %s (%s); asking again "
                                   "for up to %.1fs", self.lock.where, self.key, error_text(exc), remaining)
                    told = True
            time.sleep(min(delay, max(deadline - time.monotonic(), 0.0)))
            delay = min(delay * 2, RIDE_MAX_DELAY)

    def _unavailable(self, exc: BaseException, step: str) -> NoReturn:
        problem = permanent_problem(exc, step)
        signals.lock_store_error.send(sender=self.lock, key=self.key, task_id=self.task_id,
                                      kind="outage" if problem is None else "misconfiguration", error=exc)
        if problem is not None:
            raise ConfigurationError(f"{self.lock.where}: the lock store refused {self.key}: {problem}",
                                     task=self.lock.name, key=self.key) from exc
        raise LockBackendError(f"{self.lock.where}: cannot reach Redis to take {self.key}: {error_text(exc)}; "
                               "the block did not run", task=self.lock.name, key=self.key) from exc

    def wait(self) -> Tuple[Union[Grant, Conflict], float]:
        """Ask until granted, woken by releases, for at most ``wait_timeout``; the last answer. Where
        the store keeps a line (:mod:`~.store.line`), the block waits in it: first come, first served."""
        deadline = time.monotonic() + self.tuning.wait_timeout
        line = getattr(self.store, "line", None)
        if line is not None:
            return self._riding(lambda: self._in_line(line, deadline), deadline, "wait")

        def waiting() -> Tuple[Union[Grant, Conflict], float]:
            with self.store.release_events(self.key) as events:
                while True:
                    outcome, started = self._gated()
                    remaining = deadline - time.monotonic()
                    if isinstance(outcome, Grant) or remaining <= 0:
                        return outcome, started
                    # Also wake when the soonest place would end (a window, a dead holder's lease).
                    events.wait(min(remaining, max(outcome.pttl_ms, 1) / 1000.0 + 0.01))

        return self._riding(waiting, deadline, "wait")

    def _in_line(self, line: Any, deadline: float) -> Tuple[Union[Grant, Conflict], float]:
        """Ask in the key's line until granted or ``deadline``. A block that gets no place leaves the
        line; through an outage it keeps its place (its lease) while the wait asks again."""
        try:
            outcome = self._line_loop(line, deadline)
        except STORE_ERRORS:
            raise
        except BaseException:
            self._leave(line)
            raise
        if not isinstance(outcome[0], Grant):
            self._leave(line)
        return outcome

    def _line_loop(self, line: Any, deadline: float) -> Tuple[Union[Grant, Conflict], float]:
        return wait_in_line(self.store, self.key, self.token, lambda: self._ask_in_line(line), deadline, self._young)

    def _ask_in_line(self, line: Any) -> Tuple[Union[Grant, Conflict], float]:
        started = time.monotonic()
        return line.acquire(self.key, self.token, int(self.tuning.ttl * 1000), self.holder,
                            limit=self.lock.place_limit, lease_ms=LINE_LEASE_MS), started

    def _leave(self, line: Any) -> None:
        try:
            line.leave(self.key, self.token, self.lock.place_limit)
        except STORE_ERRORS as exc:  # its place in line ends with its lease
            logger.info("singleton lock: %s: leaving the line of %s failed (%s)", self.lock.where, self.key,
                        error_text(exc))


def take(ask: Ask, task: Any) -> float:
    """Take the block's place, or do what ``on_locked`` says; the monotonic time before the granted ask."""
    outcome, started = ask.once(ride=ask.lock.on_locked == "wait")
    if isinstance(outcome, Grant):
        return started
    lock, policy = ask.lock, ask.lock.on_locked
    if policy == "retry" and task is not None and task.request.is_eager:
        policy = "wait"  # an eager call has no queue to go back to
    _met(ask, outcome, policy)
    if policy == "retry":
        raise requeue_running_task(task, lock, outcome, ask.tuning.retry_delay)
    if policy == "raise":
        raise LockedError(f"{lock.where}: {ask.key} is held by {_holder(outcome)}", task=lock.name, key=ask.key,
                          holder=holder_id(outcome))
    began = time.monotonic()
    outcome, started = ask.wait()
    signals.lock_waited.send(sender=lock, key=ask.key, task_id=ask.task_id,
                             holder=None if isinstance(outcome, Grant) else outcome.task_id,
                             waited=time.monotonic() - began, acquired=isinstance(outcome, Grant),
                             description=ask.description)
    if isinstance(outcome, Grant):
        return started
    raise LockedError(f"{lock.where}: waited {ask.tuning.wait_timeout:g}s for {ask.key} held by {_holder(outcome)}",
                      task=lock.name, key=ask.key, holder=holder_id(outcome))


def _holder(conflict: Conflict) -> str:
    taken = places_taken(conflict)
    return kept_by(conflict) + (f" ({taken})" if taken else "")


def _met(ask: Ask, conflict: Conflict, action: str) -> None:
    """Log and signal a block that met a full key (``lock_conflict`` with ``at="hold"``)."""
    logger.info("singleton lock: %s: %s is full (%s): held by %s on %s pid %s", ask.lock.where, ask.key, action,
                _holder(conflict), conflict.host or "?", conflict.pid if conflict.pid is not None else "?")
    signals.lock_conflict.send(sender=ask.lock, key=ask.key, task_id=ask.task_id, holder=conflict.task_id,
                               action=action, at="hold", description=ask.description, places=places_taken(conflict))
