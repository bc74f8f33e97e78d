"""Waiting in the worker for a lock's release, woken by the store's announcement.

Every wait that ends when the holder lets go (``on_locked="wait"``, a retry behind the
execution that sent it, the newest call behind the run it supersedes) is this one loop:
ask, and if refused, sleep until the release is announced or the holder's lease would
run out (a holder that dies announces nothing), then ask again.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional, Tuple, Union, cast

from .attempt import Attempt
from .decisions import Decision, Run
from ..store import LINE_LEASE_MS, STORE_ERRORS, Conflict, Grant, wait_in_line

__all__ = ["wait_for_release", "wait_unless", "pause_for_own_place"]


def wait_for_release(attempt: Attempt, until: Optional[Callable[[Conflict], bool]] = None) -> Union[Run, Conflict]:
    """Block until the lock is ours (:class:`Run`); the holder on ``lock_wait_timeout``, or as
    soon as ``until(holder)`` says to stop waiting. A call that waits for its key's lock itself
    (no enqueue lock to adopt, no holder to wait out) waits in the key's line, where the store
    keeps one (:mod:`~.store.line`): first come, first served."""
    line = getattr(attempt.runtime.store, "line", None)
    if until is None and line is not None and not attempt.enqueue_token:
        return _in_line(attempt, line, attempt.options.wait_timeout)
    return cast(Union[Run, Conflict], _wait(attempt, attempt.options.wait_timeout, until, None, None))


def _in_line(attempt: Attempt, line: Any, timeout: float) -> Union[Run, Conflict]:
    """Ask in the key's line until granted or ``timeout``; a call that gets no place leaves the line
    (after a store error it is left to its lease: the error follows ``on_lock_error`` as any ask's)."""
    try:
        outcome = _line_loop(attempt, line, time.monotonic() + timeout)
    except STORE_ERRORS:
        raise
    except BaseException:
        _leave(attempt, line)
        raise
    if not isinstance(outcome, Run):
        _leave(attempt, line)
    return outcome


def _line_loop(attempt: Attempt, line: Any, deadline: float) -> Union[Run, Conflict]:
    ttl_ms = int(attempt.options.ttl * 1000)

    def ask() -> Tuple[Union[Grant, Conflict], float]:
        started = time.monotonic()
        try:
            return line.acquire(attempt.keys.lock, attempt.token, ttl_ms, attempt.holder, limit=attempt.limit,
                                lease_ms=LINE_LEASE_MS), started
        finally:
            attempt.runtime.held_releases.write_now()  # as Attempt.acquire: a release held back goes now

    outcome, started = wait_in_line(attempt.runtime.store, attempt.keys.lock, attempt.token, ask, deadline,
                                    attempt._waits_for_young_store)
    return Run(outcome, started) if isinstance(outcome, Grant) else outcome


def _leave(attempt: Attempt, line: Any) -> None:
    try:
        line.leave(attempt.keys.lock, attempt.token, attempt.limit)
    except STORE_ERRORS:
        pass  # its place in line ends with its lease


def wait_unless(attempt: Attempt, timeout: float, between: Callable[[Conflict], Optional[Decision]],
                look_every: float) -> Union[Run, Conflict, Decision]:
    """As :func:`wait_for_release` for up to ``timeout`` seconds, unless ``between(holder)``, asked
    after every wake and at least every ``look_every`` seconds, decides how the wait ends instead."""
    return _wait(attempt, timeout, None, between, look_every)


def _wait(attempt: Attempt, timeout: float, until: Optional[Callable[[Conflict], bool]],
          between: Optional[Callable[[Conflict], Optional[Decision]]],
          look_every: Optional[float]) -> Union[Run, Conflict, Decision]:
    deadline = time.monotonic() + timeout
    with attempt.runtime.store.release_events(attempt.key) as events:
        while True:
            outcome, started = attempt.acquire()
            if isinstance(outcome, Grant):
                return Run(outcome, started)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (until is not None and until(outcome)):
                return outcome
            wait = min(remaining, max(outcome.pttl_ms, 1) / 1000.0 + 0.01)
            if look_every is not None:
                wait = min(wait, look_every)
            asked_at = time.monotonic()
            if not events.wait(wait) and outcome.task_id == attempt.request.id:
                pause_for_own_place(outcome, wait, asked_at)
            if between is not None:
                ended = between(outcome)
                if ended is not None:
                    return ended


def pause_for_own_place(holder: Conflict, timeout: float, asked_at: float) -> None:
    """Wait a little before asking again for a place another execution of this task id holds: a
    key's waiters are told of a release only while every place is taken, so ``wait`` returns at once."""
    if holder.holder_token is not None:
        time.sleep(max(min(timeout, 0.25) - (time.monotonic() - asked_at), 0))
