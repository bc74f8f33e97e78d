"""Tasks that share one lock (``lock_name``) must agree on what the lock is.

Two tasks with the same ``lock_name`` and equal key values hold one lock: one room of
places, one window, one enqueue lock. If one said ``lock_limit=2`` and the other ``1``,
which limit the room keeps would depend on who asked last; if one took its lock at
enqueue (``lock_scope="queued"``) and the other at run time, the two would look for
each other under different keys. So the options that shape the lock itself must be
equal, and a disagreement is refused with both tasks named: at definition when both
are bound to one app, at the latest when a worker that has both starts. A key is the
name and the key values in order (no parameter names), so tasks sharing a name also
give the same number of key values, and a shared lock's block on that name gives that
many too.
"""

from __future__ import annotations

from typing import Dict, Iterable, Optional, Tuple, Union

from ..exceptions import ConfigurationError
from .options import LockOptions

__all__ = ["SHAPING", "Sharer", "refuse_disagreeing", "refuse_other_arity"]

#: A task sharing a lock: its name, its options and, when known, how many key values its calls give.
Sharer = Union[Tuple[str, LockOptions], Tuple[str, LockOptions, Optional[int]]]

#: The options every task sharing a lock name must agree on: (option, attribute of LockOptions).
SHAPING = (("lock_limit", "limit"), ("lock_window", "window"), ("lock_scope", "scope"))


def refuse_disagreeing(tasks: Iterable[Sharer]) -> None:
    """Raise :class:`ConfigurationError` naming the first two tasks that share a lock name and
    disagree on one of :data:`SHAPING` or on the number of key values (``tasks``: each task's name,
    resolved options and, when known, how many key values its calls give)."""
    first: Dict[str, Tuple[str, LockOptions, Optional[int]]] = {}
    for task, options, *counted in tasks:
        arity = counted[0] if counted else None
        name = options.key_name(task)
        seen = first.setdefault(name, (task, options, arity))
        if seen[0] == task:
            continue
        other, theirs, their_arity = seen
        if arity is not None and their_arity is not None and arity != their_arity:
            raise ConfigurationError(
                f"tasks {other!r} and {task!r} share lock_name={name!r} but their keys have {their_arity} and "
                f"{arity} values: a key is the lock's name and its values in order, so tasks sharing a lock "
                "must give the same number of key values (set lock_key on one of them)", task=task)
        for option, attribute in SHAPING:
            mine, its = getattr(options, attribute), getattr(theirs, attribute)
            if mine != its:
                raise ConfigurationError(
                    f"tasks {other!r} and {task!r} share lock_name={name!r} but disagree on {option} "
                    f"({its!r} and {mine!r}): tasks sharing a lock must give it the same {option}",
                    task=task)


def refuse_other_arity(where: str, name: str, count: int, tasks: Iterable[Sharer]) -> None:
    """Raise :class:`ConfigurationError` when a shared lock's block gives ``count`` key values for
    ``name`` and a task whose lock is under that name gives another number."""
    for task, options, *counted in tasks:
        arity = counted[0] if counted else None
        if options.key_name(task) == name and arity is not None and arity != count:
            raise ConfigurationError(
                f"{where}: hold() gives {count} key value(s) but task {task!r} shares lock_name={name!r} with "
                f"{arity}: a key is the lock's name and its values in order, so both must give as many",
                task=name)
