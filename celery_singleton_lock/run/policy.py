"""The duplicate policy as one table: what each ``on_locked`` does at run time and at enqueue time.

=========  ==============================================  =============================================
on_locked  a duplicate at run time                         a duplicate at enqueue time (``queued*``)
=========  ==============================================  =============================================
skip       SUCCESS with result ``None``, body not run      nothing published; the holder's result
raise      FAILURE with :class:`LockedError`               :class:`LockedError` to the caller
retry      re-queued after ``lock_retry_delay`` (a full    published without an enqueue lock; the
           window: to the turn it hands out), up to        worker re-queues it until the lock is free
           ``lock_retry_max`` times, then ``LockedError``
wait       waits up to ``lock_wait_timeout`` for the       as ``skip``: a copy already waits in the
           release, then FAILURE with ``LockedError``      queue behind the running one
replace    the newest call waits its turn: in the worker,  published without an enqueue lock: every
           woken when the running copy ends                call is, and the newest one runs
=========  ==============================================  =============================================

Under ``replace`` (and ``lock_debounce``) a call that a newer one superseded ends before it asks
for the lock, whoever holds it (:mod:`.newest`: :class:`~.decisions.Superseded`, SUCCESS ``None``).

Before a run-time duplicate gets here, :mod:`.turns` settles the holders that are
no duplicates' (a retry's predecessor, a redelivery, ``queued``'s waiting copy).
:func:`decide` is the whole run-time chain.
"""

from __future__ import annotations

import time
from typing import Dict, Union

from . import handover
from .attempt import Attempt
from .decisions import (Decision, EnqueueDecision, Fail, PublishUnlocked, Refuse, Requeue, Run, Skip,
                        SkipAtEnqueue)
from ..exceptions import LockedError
from ..calls.limits import TURN_WAIT_S, turn_wait
from ..store import Conflict, Grant
from .taken import holder_id, kept_by, places_taken
from .release_wait import wait_for_release
from .turns import TURNS

__all__ = ["ON_LOCKED", "decide", "SkipPolicy", "RaisePolicy", "RetryPolicy", "WaitPolicy", "ReplacePolicy"]


def _taken(conflict: object) -> str:
    """`` (k of N places taken)`` after a holder's name, for a key with places."""
    taken = places_taken(conflict) if isinstance(conflict, Conflict) else None
    return f" ({taken})" if taken else ""


def _held_by(attempt: Attempt, conflict: Conflict) -> LockedError:
    name = attempt.task.name
    return LockedError(f"task {name}[{attempt.request.id}]: lock {attempt.key} is held by "
                       f"{kept_by(conflict)}{_taken(conflict)}", task=name, key=attempt.key,
                       holder=holder_id(conflict))


def _refused_at_enqueue(task_name: str, key: str, conflict: Conflict) -> LockedError:
    taken = places_taken(conflict)
    return LockedError(f"task {task_name}: lock {key} is held by {kept_by(conflict)} "
                       f"({conflict.state or 'unknown state'}{'; ' + taken if taken else ''}); nothing was published",
                       task=task_name, key=key, holder=holder_id(conflict))


def _drop(attempt: Attempt, conflict: Conflict, action: str) -> None:
    """A duplicate that will not run: say so, and free the queue slot it may hold."""
    attempt.conflict(conflict, action)
    attempt.give_up_queue_slot()


class SkipPolicy:
    name = "skip"

    def at_run(self, attempt: Attempt, conflict: Conflict) -> Decision:
        _drop(attempt, conflict, self.name)
        return Skip()

    def at_enqueue(self, task_name: str, key: str, conflict: Conflict) -> EnqueueDecision:
        return SkipAtEnqueue()


class RaisePolicy:
    name = "raise"

    def at_run(self, attempt: Attempt, conflict: Conflict) -> Decision:
        _drop(attempt, conflict, self.name)
        return Fail(_held_by(attempt, conflict))

    def at_enqueue(self, task_name: str, key: str, conflict: Conflict) -> EnqueueDecision:
        return Refuse(_refused_at_enqueue(task_name, key, conflict))


class RetryPolicy:
    name = "retry"

    def at_run(self, attempt: Attempt, conflict: Conflict) -> Decision:
        # A turn a moment away (a full window's, see store/places.py) is waited for in place: a call
        # that then runs was never re-queued, so it is said and counted as a duplicate only when it is.
        waited = 0.0
        wait = turn_wait(conflict)
        while wait is not None and waited + wait <= 2 * TURN_WAIT_S:
            attempt.waits_turn(conflict, f"the places of a full window, in place (its turn comes in {wait:.2f}s)")
            time.sleep(wait)
            waited += wait
            outcome, started = attempt.acquire()
            if isinstance(outcome, Grant):
                return Run(outcome, started)
            conflict, wait = outcome, turn_wait(outcome)
        attempt.conflict(conflict, self.name)
        return Requeue(conflict)  # a queued copy keeps its queue slot

    def at_enqueue(self, task_name: str, key: str, conflict: Conflict) -> EnqueueDecision:
        return PublishUnlocked()


class WaitPolicy:
    name = "wait"

    def at_run(self, attempt: Attempt, conflict: Conflict) -> Decision:
        attempt.conflict(conflict, self.name)
        began = time.monotonic()
        outcome = wait_for_release(attempt)
        attempt.waited(outcome, began)
        if isinstance(outcome, Run):
            return outcome
        attempt.give_up_queue_slot()
        name = attempt.task.name
        return Fail(LockedError(
            f"task {name}[{attempt.request.id}]: waited {attempt.options.wait_timeout:g}s for lock {attempt.key} "
            f"held by {kept_by(outcome)}{_taken(outcome)}", task=name, key=attempt.key, holder=holder_id(outcome)))

    def at_enqueue(self, task_name: str, key: str, conflict: Conflict) -> EnqueueDecision:
        return SkipAtEnqueue()


class ReplacePolicy:
    name = "replace"

    def at_run(self, attempt: Attempt, conflict: Conflict) -> Decision:
        # Superseded calls ended before they asked for the lock: this one is the newest.
        if handover.waits_in_worker(attempt):
            return handover.wait_turn(attempt, conflict)  # it starts as soon as the running copy ends
        attempt.waits_turn(conflict, "the running copy (it is the newest call)")
        return Requeue(conflict, counted=False)

    def at_enqueue(self, task_name: str, key: str, conflict: Conflict) -> EnqueueDecision:
        return PublishUnlocked(duplicate=False)


Policy = Union[SkipPolicy, RaisePolicy, RetryPolicy, WaitPolicy, ReplacePolicy]

#: ``on_locked`` value -> its policy.
ON_LOCKED: Dict[str, Policy] = {policy.name: policy for policy in (SkipPolicy(), RaisePolicy(), RetryPolicy(),
                                                                      WaitPolicy(), ReplacePolicy())}


def decide(attempt: Attempt, conflict: Conflict) -> Decision:
    """What an execution that found its lock held does: the turns first, then ``on_locked``."""
    for turn in TURNS:
        if turn.applies(attempt, conflict):
            verdict = turn.decide(attempt, conflict)
            if not isinstance(verdict, Conflict):
                return verdict
            conflict = verdict  # someone else holds it now: judge them as anyone
    return ON_LOCKED[attempt.options.on_locked].at_run(attempt, conflict)
