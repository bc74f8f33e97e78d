"""How one lock reads on a terminal: durations, flags, its state (``k of N`` for a place), and
``locks show``'s block of fields, a released place saying when it was released if the store knows.
"""

from __future__ import annotations

from typing import List, Optional

from ..printable import printable
from ..runtime.listing import older_key_of
from ..store import LockRecord

__all__ = ["duration", "flags", "state", "show_lines"]


def duration(ms: Optional[int]) -> str:
    """A short human duration: 850ms, 12.4s, 4m05s, 2h03m, 3d04h."""
    if ms is None:
        return "?"
    if ms < 0:
        return "never" if ms == -1 else "?"
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def flags(record: LockRecord) -> str:
    names = [name for name, on in (("queued", record.state == "queued"), ("foreign", record.state == "foreign"),
                                   ("older-key", bool(older_key_of(record))),
                                   ("stale", record.stale), ("lost", record.lost)) if on]
    return ",".join(names) or "-"


def state(record: LockRecord) -> str:
    """The state, and for a place of a key with a limit or a window: ``k of N``, and the window left."""
    if record.limit is None:
        return record.state
    window = f", window {duration(record.window_ms)}" if record.window_ms else ""
    return f"{record.state} ({record.held} of {record.limit}{window})"


def _released(record: LockRecord) -> str:
    """When a place its window keeps was released, if the store knows (a singleton lock keeps no record)."""
    keeps = f"its window keeps the place {duration(record.window_ms)} more"
    if record.released_ms is None:
        return f"released ({keeps})"
    return f"released {duration(record.released_ms)} ago, {keeps}"


def _undescribed(record: LockRecord) -> str:
    """Why a lock has no description: the holder's app (not this command's) decides whether its calls
    are described, and a publisher never describes an enqueue lock."""
    if record.kind == "queued":
        return "- (an enqueue lock: its publisher does not describe the call)"
    return "- (not described: the process that took it had singleton_lock_describe off)"


def show_lines(record: LockRecord) -> List[str]:
    """``locks show``'s lines for one lock, or one place of a key."""
    shown = _released(record) if record.state == "released" else state(record)
    return [f"{label:>15}: {printable(value)}" for label, value in (
        ("key", record.key), ("task", record.task),
        *((("lock name", record.name),) if record.name and record.name != record.task else ()),
        ("digest", record.digest),
        ("call", record.describe or _undescribed(record)),
        ("state", shown),
        ("holder task id", record.task_id or ("-" if record.state == "foreign" else "- (a block outside a task)")), ("host", record.host or "?"), ("pid", record.pid or "?"),
        ("age", duration(record.age_ms) + " (by the holder's clock)"),
        ("lease", duration(record.ttl_ms)), ("ttl left", duration(record.pttl_ms)),
        ("heartbeat", duration(record.heartbeat_ms)),
        ("last renewal", duration(record.since_renewal_ms) + " ago" if record.since_renewal_ms is not None
         else "-"),
        ("flags", flags(record)), ("verdict", record.reason),
    )]
