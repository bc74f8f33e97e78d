"""A call's limit: how many executions of its key may hold it at once, and how long each keeps its place.

``lock_limit`` and ``lock_window`` (:mod:`.options`) become one store
:class:`~.store.places.Limit` per call, worked out once, where the call's keys are
(:class:`~.attempt.Attempt` in the worker, the publisher for ``queued*`` scopes, the
worker's main process when it releases for a dead child). The limit changes the call's
keys (:func:`call_keys`): a key with more than one place or a window is a room of
places, and every later store call on it (renew, release, fence, events) goes there by
the key alone, so nothing past this module asks which kind of lock it holds.
``lock_limit=1`` with no window keeps the singleton lock's keys: today's exact path; a
``lock_limit`` function never does, so that all calls of a key count in one room.

What a limit changes for a duplicate is said here too: a window's end is known, and so is
a turn a full window hands out, so a re-queued duplicate aims at it (:func:`window_countdown`),
and one whose turn is a moment away waits for it in place (:func:`turn_wait`).
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from ..exceptions import ConfigurationError
from ..config.options import valid_limit
from ..store import MAX_LIMIT, QUORUM_LIMIT, Conflict, KeyLayout, Limit, LockKeys, keeps_one_place, limited

if TYPE_CHECKING:  # pragma: no cover
    from ..config.options import LockOptions
    from ..config.settings import AppSettings

__all__ = ["call_limit", "call_keys", "older_key", "refuse_unsupported", "window_countdown", "turn_wait", "TURN_WAIT_S"]


def call_limit(task_name: str, options: "LockOptions", args: Sequence[Any], kwargs: Mapping[str, Any]) -> Limit:
    """The limit of one call: ``lock_limit`` (called with the arguments as the body gets them,
    as a ``lock_key`` function is) and ``lock_window``. A ``lock_limit`` function puts every call
    of the task in its key's places, even one it answers 1 for: a call under the singleton lock
    and calls in the places would never see each other."""
    count = options.limit(*args, **kwargs) if callable(options.limit) else options.limit
    if not valid_limit(count):
        raise ConfigurationError(f"task {task_name!r}: the lock_limit function returned {count!r}, "
                                 f"expected an int from 1 to {MAX_LIMIT}", task=task_name)
    # A call that will come back (``retry``) is handed a turn by a full window: see store/places.py.
    return _limit(count, int(round(options.window * 1000)), callable(options.limit), options.on_locked == "retry")


@lru_cache(maxsize=1024)
def _limit(count: int, window_ms: int, room: bool, turns: bool) -> Limit:
    """One :class:`Limit` per value (it is immutable): every task's execution asks for one."""
    return Limit(count, window_ms, room=room, turns=turns)


def call_keys(keys: LockKeys, limit: Limit) -> LockKeys:
    """The call's keys under its limit: the singleton lock's, or its key's places."""
    return limited(keys, limit)


def older_key(layout: KeyLayout, name: str, older_digest: str, scope: str, limit: Limit, key: str) -> str:
    """The run lock's key as commits before the keys by name and values named it (``older_digest``:
    :meth:`~.arguments.ArgumentKey.old_digest`), ``""`` where it is ``key`` itself."""
    older = call_keys(layout.keys(name, older_digest, scope), limit).lock
    return "" if older == key else older


def refuse_unsupported(task_name: str, options: "LockOptions", settings: "AppSettings") -> None:
    """Refuse at definition a limit the lock store cannot keep: a quorum of masters holds one
    place per key at most (a ``lock_limit`` function might return more). Windows work everywhere."""
    if options.limit == 1 or not keeps_one_place(settings.url, settings.backend):
        return
    raise ConfigurationError(f"task {task_name!r}: lock_limit={options.limit!r} with a quorum lock store: "
                             f"{QUORUM_LIMIT}", task=task_name)


def window_countdown(conflict: Optional[Conflict]) -> Optional[float]:
    """When a re-queued duplicate should try again while every place is inside its window.

    A call handed a turn (see :mod:`.store.places`) comes back when it comes, just after (a
    turn is a known time: the window ends before it are); one whose turn has come already (a
    place of the turns before it was taken late) comes back just after the soonest window's end
    (a known time too: nobody can extend it, and no place frees before it), jittered over a
    tenth of the window so such calls do not all come back at once. ``None`` when a run past its
    window holds a place (it may end at any moment: then ``lock_retry_delay`` applies, as for a
    singleton lock)."""
    if conflict is None:
        return None
    if conflict.turn_ms is not None and conflict.turn_ms > 0:
        return conflict.turn_ms / 1000.0 + random.uniform(0.01, 0.05)
    if conflict.window_ms is None:
        return None
    window = conflict.window_ms / 1000.0
    return window + random.uniform(0.01, max(0.05, 0.1 * window))


def turn_wait(conflict: Conflict) -> Optional[float]:
    """How long a call refused with a turn waits in place before it asks again: until its turn,
    or (its turn come) until the soonest window's end, when that is within :data:`TURN_WAIT_S`
    (a re-queue would cost more than the wait); ``None``: re-queue instead."""
    if conflict.turn_ms is None:
        return None
    wait_ms = conflict.turn_ms if conflict.turn_ms > 0 else conflict.window_ms
    if wait_ms is None or wait_ms > TURN_WAIT_S * 1000:
        return None
    return wait_ms / 1000.0 + 0.005


#: The longest a call whose turn is near waits for it in place, holding its worker slot (no place).
TURN_WAIT_S = 1.0
