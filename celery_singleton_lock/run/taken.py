"""How many of a key's places a duplicate found taken, in the words every report of it uses.

A singleton lock has one holder, and its reports name it alone. A key with a limit or a window
(:mod:`.store.places`) is refused while its places are taken: the log line, the
:class:`~.exceptions.LockedError` and ``lock_conflict`` say ``k of N places taken``, so an
operator reading any of them knows the refusal came from the limit, not from one holder.

Who keeps the place is said as it is: a task's run, a ``SharedLock`` block outside any task (it
has no task id), or nobody any more: a released place that its ``lock_window`` keeps until the
window ends, whose process may be long gone.
"""

from __future__ import annotations

from typing import Optional

from ..store import Conflict

__all__ = ["places_taken", "kept_by", "holder_id"]


def places_taken(conflict: Optional[Conflict]) -> Optional[str]:
    """``"k of N places taken"`` for a refusal of a key with places; ``None`` for a singleton lock."""
    if conflict is None or (conflict.limit == 1 and conflict.window_ms is None and conflict.holder_token is None):
        return None
    return f"{conflict.held} of {conflict.limit} places taken"


def kept_by(conflict: Conflict) -> str:
    """Who keeps the place a refusal met, in the words of a log line or an error."""
    if conflict.state == "released":
        run = f"task {conflict.task_id}'s run" if conflict.task_id else "a block's hold"
        return f"the window of {run}, which has ended (the place is kept until its lock_window ends)"
    if conflict.task_id:
        return f"task {conflict.task_id}"
    if conflict.state == "foreign":
        return "a value this library did not write"
    pid = conflict.pid if conflict.pid is not None else "?"
    return f"a block outside a task on {conflict.host or '?'} pid {pid}"


def holder_id(conflict: Optional[Conflict]) -> Optional[str]:
    """The holder's task id a refusal carries: ``None`` when no run keeps the place (a block outside
    a task, or a window whose run has ended)."""
    if conflict is None or conflict.state == "released":
        return None
    return conflict.task_id or None
