"""Tasks that share one lock (``lock_name``) must agree on what the lock is.

Two tasks with the same ``lock_name`` and equal key values hold one lock: one room of
places, one window, one enqueue lock. If one said ``lock_limit=2`` and the other ``1``,
which limit the room keeps would depend on who asked last; if one took its lock at
enqueue (``lock_scope="queued"``) and the other at run time, the two would look for
each other under different keys. So the options that shape the lock itself must be
equal, and a disagreement is refused with both tasks named: at definition when both
are bound to one app, at the latest when a worker that has both starts.
"""

from __future__ import annotations

from typing import Dict, Iterable, Tuple

from ..exceptions import ConfigurationError
from .options import LockOptions

__all__ = ["SHAPING", "refuse_disagreeing"]

#: The options every task sharing a lock name must agree on: (option, attribute of LockOptions).
SHAPING = (("lock_limit", "limit"), ("lock_window", "window"), ("lock_scope", "scope"))


def refuse_disagreeing(tasks: Iterable[Tuple[str, LockOptions]]) -> None:
    """Raise :class:`ConfigurationError` naming the first two tasks that share a lock name and
    disagree on one of :data:`SHAPING` (``tasks``: each task's name and resolved options)."""
    first: Dict[str, Tuple[str, LockOptions]] = {}
    for task, options in tasks:
        name = options.key_name(task)
        seen = first.setdefault(name, (task, options))
        if seen[0] == task:
            continue
        other, theirs = seen
        for option, attribute in SHAPING:
            mine, its = getattr(options, attribute), getattr(theirs, attribute)
            if mine != its:
                raise ConfigurationError(
                    f"tasks {other!r} and {task!r} share lock_name={name!r} but disagree on {option} "
                    f"({its!r} and {mine!r}): tasks sharing a lock must give it the same {option}",
                    task=task)
