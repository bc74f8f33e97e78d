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
"""

from __future__ import annotations

from . import newest
from .attempt import Attempt
from .decisions import Decision, Requeue
from .release_wait import wait_unless
from ..store import Conflict

__all__ = ["LOOK_EVERY", "waits_in_worker", "wait_turn"]

#: How often (seconds) a waiting newest call looks whether a newer call superseded it.
LOOK_EVERY = 0.5


def waits_in_worker(attempt: Attempt) -> bool:
    """Whether this execution is a newest call (it carries a generation) that may wait for its turn."""
    return attempt.options.latest_wins and newest.generation_of(attempt.request) is not None \
        and not attempt.request.is_eager


def wait_turn(attempt: Attempt, holder: Conflict) -> Decision:
    """Wait for ``holder``'s release and take the lock (:class:`Run`); how this call ends instead
    when a newer call superseded it meanwhile; back to the queue, uncounted, past ``lock_queue_ttl``."""
    attempt.waits_turn(holder, "the running copy (it is the newest call), woken by its release")
    outcome = wait_unless(attempt, attempt.options.queue_ttl, lambda: newest.before_run(attempt), LOOK_EVERY)
    if isinstance(outcome, Conflict):
        return Requeue(outcome, counted=False)
    return outcome
