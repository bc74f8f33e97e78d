"""Holders that are no duplicates: the copy whose turn comes after them, and its own redelivery.

Before ``on_locked`` treats a holder as a duplicate's, three cases are settled
here, in this order (:data:`TURNS`):

:class:`AfterPredecessor`
    a ``self.retry()`` message that started while the execution that sent it
    still finishes (a cleanup in ``finally``): it runs once that execution let go.
:class:`RedeliveryGuard`
    the holder is another delivery of this very message (visibility timeout,
    ``acks_late``): if that delivery is alive this copy stores nothing; if it died
    without releasing, this copy waits for its lock to run out and runs.
:class:`QueuedTurn`
    the one copy that ``queued`` lets wait behind a running one: back to the queue
    (keeping its slot, not counted by ``lock_retry_max``) until the running copy is done;
    the newest call of ``replace`` waits in the worker instead (:mod:`.handover`).

Each ``decide`` returns a :class:`~.decisions.Decision`, or the :class:`Conflict`
with whoever holds the lock now, for the next case (and finally ``on_locked``) to judge.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional, Sequence, Union

from . import handover
from .attempt import Attempt
from .decisions import Decision, Ignored, Requeue, Run
from .release_wait import pause_for_own_place, wait_for_release
from ..store import STORE_ERRORS, Conflict, Grant

__all__ = ["TURNS", "AfterPredecessor", "RedeliveryGuard", "QueuedTurn"]

logger = logging.getLogger("celery_singleton_lock")

Verdict = Union[Decision, Conflict]


class AfterPredecessor:
    """A retry waits up to ``lock_wait_timeout`` for the execution that re-queued it, then goes
    back to the queue, uncounted."""

    def applies(self, attempt: Attempt, conflict: Conflict) -> bool:
        return attempt.follows(conflict)

    def decide(self, attempt: Attempt, conflict: Conflict) -> Verdict:
        attempt.waits_turn(conflict, "the attempt that re-queued it")
        outcome = wait_for_release(attempt, until=lambda holder: not attempt.follows(holder))
        if isinstance(outcome, Conflict) and attempt.follows(outcome):
            return Requeue(outcome, counted=False)
        return outcome  # ours, or someone else took it instead (another delivery, another call)


class RedeliveryGuard:
    """The holder runs under this message's own task id."""

    def applies(self, attempt: Attempt, conflict: Conflict) -> bool:
        return bool(conflict.task_id) and conflict.task_id == attempt.request.id

    def decide(self, attempt: Attempt, conflict: Conflict) -> Verdict:
        if conflict.state == "queued":
            # The task re-queued itself (self.retry() under queued_or_running): this is a stale
            # copy of the message that retry replaced.
            attempt.conflict(conflict, "ignore")
            return Ignored()
        if attempt.notes_completions:
            # Have the holder note, as it releases, that it ran to the end: copies of this message
            # that the broker hands out after that (visibility timeout) then know not to run.
            try:
                attempt.runtime.store.mark_redelivered(attempt.key, attempt.request.id)
            except STORE_ERRORS:
                pass
        verdict = self._watch(attempt, conflict)
        if isinstance(verdict, Ignored):
            attempt.conflict(conflict, "ignore")
        return verdict

    @staticmethod
    def _watch(attempt: Attempt, conflict: Conflict) -> Verdict:
        """Ignored when the holder is alive (it releases, or renews within its heartbeat); the
        grant when its lock runs out unrenewed; the new holder when another call took it."""
        holder_heartbeat = (conflict.heartbeat_ms or attempt.options.heartbeat * 1000) / 1000.0
        first_seen, first_pttl = time.monotonic(), conflict.pttl_ms
        alive_deadline = first_seen + 1.5 * holder_heartbeat + 0.25  # a live holder renews before this
        outcome = conflict
        with attempt.runtime.store.release_events(attempt.key) as events:
            while True:
                timeout = max(outcome.pttl_ms, 1) / 1000.0 + 0.01
                now = time.monotonic()
                if now < alive_deadline:
                    timeout = min(timeout, alive_deadline - now)
                asked_at = time.monotonic()
                woke = events.wait(timeout)
                if woke and conflict.holder_token is None:
                    return Ignored()  # the other delivery finished and released: it ran, this copy must not
                if not woke:
                    pause_for_own_place(conflict, timeout, asked_at)
                asked, started = attempt.acquire()
                if woke and not (isinstance(asked, Conflict) and asked.holder_token == conflict.holder_token):
                    if isinstance(asked, Grant):
                        attempt.runtime.store.release(attempt.key, attempt.token)  # not this copy's to run
                    return Ignored()  # the other delivery let its place go: it ran
                if isinstance(asked, Grant):
                    logger.warning("singleton lock: %s[%s]: the earlier delivery's lock %s ran out without "
                                   "release; running this redelivery", attempt.task.name, attempt.request.id,
                                   attempt.key)
                    return Run(asked, started)
                if asked.task_id != attempt.request.id:
                    return asked  # the dead delivery's lock ran out and another call took it
                elapsed_ms = (time.monotonic() - first_seen) * 1000
                if asked.pttl_ms > first_pttl - elapsed_ms + 250:
                    return Ignored()  # renewed: the first delivery is alive
                outcome = asked


class QueuedTurn:
    """``queued``'s waiting copy: no duplicate, so ``on_locked`` does not drop it; with
    ``"wait"`` it first waits for the release, as long as ``lock_wait_timeout``."""

    def applies(self, attempt: Attempt, conflict: Conflict) -> bool:
        return attempt.holds_queue_slot

    def decide(self, attempt: Attempt, conflict: Conflict) -> Verdict:
        if handover.waits_in_worker(attempt):
            return handover.wait_turn(attempt, conflict)  # the newest call: it runs when the holder ends
        attempt.waits_turn(conflict, "the running copy")
        if attempt.options.on_locked == "wait":
            outcome = wait_for_release(attempt)
            if isinstance(outcome, Run):
                return outcome
            conflict = outcome
        return Requeue(conflict, counted=False)


#: The cases settled before ``on_locked``, in order.
TURNS: Sequence[Union[AfterPredecessor, RedeliveryGuard, QueuedTurn]] = (
    AfterPredecessor(), RedeliveryGuard(), QueuedTurn())
