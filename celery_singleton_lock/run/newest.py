"""The run side of "latest call wins": a call runs only if no newer call of its key was made, once.

``on_locked="replace"`` and ``lock_debounce`` publish every call, each with its
generation (:mod:`.supersede`); Celery cannot take a published message back, so
the worker decides. Before asking for the lock, a message looks (:func:`before_run`):
a newer call superseded it (it ends as :class:`~.decisions.Superseded`, SUCCESS
``None``, one log line naming the newer call, ``lock_conflict`` with action
``"replace"``), or its run was claimed already by another delivery of the same
message (a broker redelivery after the visibility timeout: it stores nothing). A message
reserved after the newest call on record, which only a published call can carry, is made the
newest there and then (its publisher was killed before it could record it, or has not yet).
Once the lock is its own, it claims the run (:func:`claim_run`), atomically, so a
call superseded in between, or a second delivery, still does not run.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from ..calls import headers
from .. import signals
from .attempt import Attempt
from .decisions import Decision, Ignored, Requeue, Superseded
from .outcome import store_superseded
from ..exceptions import ConfigurationError
from ..store import STORE_ERRORS, Claim, GenerationStore

__all__ = ["generation_of", "before_run", "claim_run"]

logger = logging.getLogger("celery_singleton_lock")

#: Seconds a publish may take, from its call's reservation until its message can reach a worker.
PUBLISH_GRACE = 1.0


def generation_of(request: Any) -> Optional[int]:
    """The generation a message carries (``None``: published without one, or not one the store
    can have handed out: see :func:`~..calls.headers.generation`)."""
    return headers.generation(request)


def _generations(attempt: Attempt) -> GenerationStore:
    store = attempt.runtime.store.generations
    if store is None:
        name = attempt.task.name
        raise ConfigurationError(f"task {name}: on_locked=\"replace\" and lock_debounce need a lock store that "
                                 "keeps one history of a key's calls; a quorum of independent masters keeps one "
                                 "per master", task=name)
    return store


def before_run(attempt: Attempt) -> Optional[Decision]:
    """How a superseded or already claimed message ends, before it asks for the lock; ``None``: ask."""
    if not attempt.options.latest_wins:
        return None
    gen = generation_of(attempt.request)
    if gen is None:
        return None
    try:
        verdict = _generations(attempt).peek(attempt.keys.generation, gen, _hold_ms(attempt))
        if verdict.outcome == "lost":
            verdict = _claim(attempt, gen)  # no run is claimed: it becomes the newest of a new burst
        elif verdict.outcome == "run" and not verdict.recorded:
            _recorded(attempt, gen)
    except STORE_ERRORS:
        return None  # the lock's ask meets the outage; the claim decides once it is ours
    return _refusal(attempt, verdict)


def _recorded(attempt: Attempt, gen: int) -> None:
    """Make this call its key's newest now, if its publisher has not (or was killed before it could):
    its message in hand proves it was published. Else the call before, still the newest on record
    and perhaps holding the key's lock (a ``queued_or_running`` enqueue lock) that this one waits
    for, would run first once its wait for this publish is up. The call it displaces is answered
    as its publisher would have answered it."""
    task = attempt.task
    previous = _generations(attempt).supersede(attempt.keys.generation, gen, attempt.request.id or "",
                                               _ttl_ms(attempt))
    if not previous or previous == attempt.request.id:
        return
    try:
        store_superseded(task, previous, attempt.request.id or "", attempt.keys.lock)
    except Exception as exc:  # no result backend, or one that cannot answer for another call
        logger.debug("singleton lock: %s: the superseded call %s is answered when its message reaches a "
                     "worker (%s)", task.name, previous, exc)


def claim_run(attempt: Attempt) -> Optional[Decision]:
    """Claim the run for the message whose lock this is now; how it ends instead, if it may not run.
    Store errors propagate (the caller lets go of the lock and follows ``on_lock_error``)."""
    if not attempt.options.latest_wins:
        return None
    gen = generation_of(attempt.request)
    if gen is None:
        return None
    return _refusal(attempt, _claim(attempt, gen))


def _claim(attempt: Attempt, gen: int) -> Claim:
    return _generations(attempt).claim(attempt.keys.generation, gen, attempt.request.id or "", _ttl_ms(attempt),
                                       _hold_ms(attempt))


def _ttl_ms(attempt: Attempt) -> int:
    """How long the key's calls are kept when this message writes them: as long as a call may wait."""
    options = attempt.options
    return int((options.queue_ttl + (options.debounce or 0.0)) * 1000)


def _hold_ms(attempt: Attempt) -> int:
    """How long after a newer call's reservation its message may still be on its way to a worker:
    the quiet period it is published with (no longer than lock_debounce), and :data:`PUBLISH_GRACE`."""
    return int(((attempt.options.debounce or 0.0) + PUBLISH_GRACE) * 1000)


def _refusal(attempt: Attempt, verdict: Claim) -> Optional[Decision]:
    task, task_id, key = attempt.task, attempt.request.id, attempt.keys.lock
    if verdict.outcome == "run":
        return None
    if verdict.outcome == "lost":
        # The store forgot the key's calls (restarted empty, or this message outlived lock_queue_ttl):
        # other calls of the burst may be on their way; the newest of them runs after a quiet period.
        quiet = attempt.options.debounce
        logger.warning("singleton lock: %s[%s]: the lock store forgot the newest call of key %s; this call "
                       "is the newest now and runs unless a newer one arrives within %s", task.name, task_id,
                       key, f"{quiet:g}s" if quiet else "lock_retry_delay")
        return Requeue(None, counted=False, countdown=quiet)
    if verdict.outcome == "pending":
        # A newer call reserved its generation a moment ago: its message may be out although its
        # publisher has not said so (or was killed before it could). Running now could run both.
        wait = verdict.wait_ms / 1000.0
        logger.info("singleton lock: %s[%s]: a newer call of key %s is being published; this call looks again "
                    "in %.1fs (it runs then unless that call was published)", task.name, task_id, key, wait)
        return Requeue(None, counted=False, countdown=wait)
    attempt.give_up_queue_slot()
    if verdict.outcome == "ran":
        logger.info("singleton lock: %s[%s]: another delivery of this call claimed its run of key %s; "
                    "storing nothing", task.name, task_id, key)
        return Ignored()
    logger.info("singleton lock: %s[%s] was superseded by %s (replace): key %s runs the newest call only",
                task.name, task_id, verdict.by or "?", key)
    signals.lock_conflict.send(sender=task, key=key, task_id=task_id, holder=verdict.by, action="replace",
                               at="run")
    return Superseded(verdict.by)
