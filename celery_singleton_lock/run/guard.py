"""A run's key as older commits named it, held beside its own lock through a rolling deploy.

Commits before the keys by name and values made a task lock's digest of the bound arguments by
parameter name (or of a ``lock_key`` function's string as it was); since, it is made of the key
values in order. An older and a newer worker would look for one call under two keys, and both
could run it. With ``singleton_lock_guard_old_keys`` a newer worker's run holds the older key
too: under the same token, taken once its own lock is granted, renewed by the same heartbeat,
let go of just before it (and by the worker's main process when the pool process dies, see
:func:`~.exits.release_for_child`). An older worker finds that key held and treats its copy as
the duplicate it is; a newer copy that finds it held (an older worker runs the call) is one too.

Such a duplicate does what its ``on_locked`` says where that is immediate (``skip``, ``raise``).
``retry``, ``wait`` and ``replace`` are re-queued until the older run ends: their line and their
hand-over live on the new key, which older workers never touch, and a wait on the older key would
need that machinery twice for a setting that lives for one deploy.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Optional

from .attempt import Attempt
from .decisions import Decision, Fail, Requeue, Skip
from ..exceptions import LockedError
from ..runtime.listing import OLDER_KEY_OF
from ..store import STORE_ERRORS, Conflict, Holder, Lease, error_text
from .taken import holder_id, kept_by

__all__ = ["take", "refusal", "lease", "let_go"]

logger = logging.getLogger("celery_singleton_lock")


def take(attempt: Attempt) -> Optional[Conflict]:
    """Take the older key under the run's token: ``None`` once held (or with nothing to hold),
    else who holds it. Raises the store's errors, as the run lock's ask does."""
    if not attempt.guard:
        return None
    outcome = attempt.runtime.store.acquire(attempt.guard, attempt.token, int(attempt.options.ttl * 1000),
                                            _holder(attempt), limit=attempt.limit)
    return outcome if isinstance(outcome, Conflict) else None


def _holder(attempt: Attempt) -> Holder:
    """The run's holder, described as the older key of its lock: ``celery locks`` and the web view show
    it as the run's second key, not a second run."""
    return dataclasses.replace(attempt.holder, describe=OLDER_KEY_OF + attempt.key)


def refusal(attempt: Attempt, conflict: Conflict) -> Decision:
    """What a call whose older key an older worker's run holds does (its run lock is given back)."""
    policy = attempt.options.on_locked
    # retry, wait and replace are all re-queued here: said as what happens to them
    attempt.conflict(conflict, policy if policy in ("skip", "raise") else "retry", key=attempt.guard)
    if policy in ("skip", "raise"):
        attempt.give_up_queue_slot()
        if policy == "skip":
            return Skip()
        name = attempt.task.name
        return Fail(LockedError(f"task {name}[{attempt.request.id}]: lock {attempt.guard}, the key of this call "
                                f"as older commits name it, is held by {kept_by(conflict)}",
                                task=name, key=attempt.guard, holder=holder_id(conflict)))
    return Requeue(conflict, counted=policy == "retry")


def lease(attempt: Attempt, started: float, context: Any) -> Optional[Lease]:
    """The older key's lease, renewed beside the run lock's and reported as its run (``context``);
    ``None`` when the run holds none."""
    if not attempt.guard:
        return None
    options = attempt.options
    held = Lease(attempt.guard, attempt.token, options.ttl, options.heartbeat, confirmed_at=started,
                 context=context, holder=_holder(attempt))
    attempt.runtime.renewer.hold(held)
    return held


def let_go(attempt: Attempt, held: Optional[Lease] = None) -> None:
    """Give the older key back (a no-op when the run holds none), its lease ``held`` if it has one."""
    if not attempt.guard:
        return
    runtime = attempt.runtime
    if held is not None:
        runtime.renewer.drop(held)
    try:
        runtime.store.release(attempt.guard, attempt.token)
    except STORE_ERRORS as exc:
        logger.warning("singleton lock: giving back %s, the key older commits name, failed (%s); it expires "
                       "within lock_ttl", attempt.guard, error_text(exc))
