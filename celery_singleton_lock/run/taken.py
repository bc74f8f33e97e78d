"""How many of a key's places a duplicate found taken, in the words every report of it uses.

A singleton lock has one holder, and its reports name it alone. A key with a limit or a window
(:mod:`.store.places`) is refused while its places are taken: the log line, the
:class:`~.exceptions.LockedError` and ``lock_conflict`` say ``k of N places taken``, so an
operator reading any of them knows the refusal came from the limit, not from one holder.
"""

from __future__ import annotations

from typing import Optional

from ..store import Conflict

__all__ = ["places_taken"]


def places_taken(conflict: Optional[Conflict]) -> Optional[str]:
    """``"k of N places taken"`` for a refusal of a key with places; ``None`` for a singleton lock."""
    if conflict is None or (conflict.limit == 1 and conflict.window_ms is None and conflict.holder_token is None):
        return None
    return f"{conflict.held} of {conflict.limit} places taken"
