"""The newest call's turn: it starts as soon as the run it waits behind lets go of the lock.

Under ``on_locked="replace"`` (and ``lock_debounce``) the newest call of a key that
finds a copy of the key running is no duplicate: it is the one call left to run. Sent
back to the queue for ``lock_retry_delay`` it would start seconds after that run
ended; so it waits in the worker instead, woken by the store's release announcement
(:meth:`~.store.LockBackend.release_events`), and takes the lock at once. It waits
no longer than the run it waits behind (a holder that dies announces nothing, but
its lock runs out, and the wait wakes then too), and it looks every
:data:`LOOK_EVERY` seconds whether a newer call superseded it, so a superseded
waiter gives its worker slot back within that, ending as any superseded call does.
Past ``lock_queue_ttl`` of waiting it goes back to the queue as before.

A holder that has not started (an enqueue lock of ``queued_or_running``, taken at
publish by an older call) is no run to wait for: its message may never come (its
publisher was killed before the publish), and if it does, it is superseded. The newest
call takes that lock over (:func:`take_over`), by the token it read, so a holder that
adopted it meanwhile is waited for instead.
"""

from __future__ import annotations

import logging
import time
from typing import Optional

from . import newest
from .attempt import Attempt
from .decisions import Decision, Requeue, Run
from .release_wait import wait_unless
from ..store import Conflict, Grant, is_places

__all__ = ["LOOK_EVERY", "waits_in_worker", "wait_turn", "take_over"]

logger = logging.getLogger("celery_singleton_lock")

#: How often (seconds) a waiting newest call looks whether a newer call superseded it.
LOOK_EVERY = 0.5


def waits_in_worker(attempt: Attempt) -> bool:
    """Whether this execution is a newest call (it carries a generation) that may wait for its turn."""
    return attempt.options.latest_wins and newest.generation_of(attempt.request) is not None \
        and not attempt.request.is_eager


def wait_turn(attempt: Attempt, holder: Conflict) -> Decision:
    """Wait for ``holder``'s release and take the lock (:class:`Run`); how this call ends instead
    when a newer call superseded it meanwhile; back to the queue, uncounted, past ``lock_queue_ttl``."""
    if holder.state == "queued":
        taken = take_over(attempt)
        if taken is not None:
            return taken
    attempt.waits_turn(holder, "the running copy (it is the newest call), woken by its release")
    outcome = wait_unless(attempt, attempt.options.queue_ttl, lambda last: _look(attempt, last), LOOK_EVERY)
    if isinstance(outcome, Conflict):
        return Requeue(outcome, counted=False)
    return outcome


def _look(attempt: Attempt, holder: Conflict) -> Optional[Decision]:
    """After each wake: how the wait ends if a newer call superseded this one, or if the holder last
    met is an older call that has not started (its lock is taken over)."""
    ended = newest.before_run(attempt)
    if ended is None and holder.state == "queued":
        ended = take_over(attempt)
    return ended


def take_over(attempt: Attempt) -> Optional[Run]:
    """Take the run lock from an older call's enqueue lock (``queued_or_running``), as the newest call
    of the key: :class:`Run`, or ``None`` when the holder is not such a lock (or started meanwhile).
    The run is still claimed as the newest's before it starts, so a newer call's lock taken by a race
    is given back then. Store errors propagate (the wait's caller follows ``on_lock_error``)."""
    keys = attempt.keys
    if keys.queued != keys.lock or is_places(keys.lock):
        return None  # ``queued``: the enqueue lock is a key of its own, which no run waits behind
    store = attempt.runtime.store
    info = store.holder(keys.lock)
    if info is None or info.get("state") != "queued" or not info.get("token"):
        return None
    started = time.monotonic()
    outcome = store.adopt(keys.lock, keys.lock, info["token"], attempt.token, int(attempt.options.ttl * 1000),
                          attempt.holder)
    if not isinstance(outcome, Grant):
        return None
    logger.info("singleton lock: %s[%s]: took over %s from call %s, which had not started (its message is "
                "superseded by this newest call, or was never published)", attempt.task.name, attempt.request.id,
                keys.lock, info.get("task_id") or "?")
    return Run(outcome, started)
