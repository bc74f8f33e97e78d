"""Waiting in the worker for a lock's release, woken by the store's announcement.

Every wait that ends when the holder lets go (``on_locked="wait"``, a retry behind the
execution that sent it, the newest call behind the run it supersedes) is this one loop:
ask, and if refused, sleep until the release is announced or the holder's lease would
run out (a holder that dies announces nothing), then ask again.
"""

from __future__ import annotations

import time
from typing import Callable, Optional, Union, cast

from .attempt import Attempt
from .decisions import Decision, Run
from ..store import Conflict, Grant

__all__ = ["wait_for_release", "wait_unless", "pause_for_own_place"]


def wait_for_release(attempt: Attempt, until: Optional[Callable[[Conflict], bool]] = None) -> Union[Run, Conflict]:
    """Block until the lock is ours (:class:`Run`); the holder on ``lock_wait_timeout``, or as
    soon as ``until(holder)`` says to stop waiting."""
    return cast(Union[Run, Conflict], _wait(attempt, attempt.options.wait_timeout, until, None, None))


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
