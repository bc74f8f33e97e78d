"""What ``celery locks`` prints beyond one lock's row: per-task counts, and the refreshing view.

``locks list --watch`` redraws the table and the counts every few seconds, as ``top`` does,
until Ctrl-C, which ends it with status 0.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Callable, Dict, Sequence, Set

from ..runtime.listing import older_key_of
from ..store import MIN_PREFIX, LockRecord

__all__ = ["task_counts", "watch", "short_prefix"]

#: Clear the screen and put the cursor at its top (as ``clear`` does).
_CLEAR = "\x1b[H\x1b[2J"


def task_counts(records: Sequence[LockRecord]) -> str:
    """One line per task: how many locks (keys) it holds, how many executions hold them running or
    queued (a key with places counts each holder), how many places only a window keeps (released),
    and how many holders are stale or lost. A run's older key (``singleton_lock_guard_old_keys``) is
    the same run: not counted again."""
    tally: Dict[str, Counter] = {}
    keys: Dict[str, Set[str]] = {}
    for record in records:
        if older_key_of(record):
            continue
        counts = tally.setdefault(record.task, Counter())
        keys.setdefault(record.task, set()).add(record.key)
        counts[record.state] += 1
        counts["stale"] += record.stale
        counts["lost"] += record.lost
    header = ("TASK", "LOCKS", "RUNNING", "QUEUED", "WINDOW-KEPT", "STALE", "LOST")
    rows = [(task, str(len(keys[task])),
             *(str(c[name]) for name in ("running", "queued", "released", "stale", "lost")))
            for task, c in sorted(tally.items())]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in [header, *rows])


def watch(render: Callable[[], str], interval: float, echo: Callable[[str], None],
          sleep: Callable[[float], None] = time.sleep) -> None:
    """Print ``render()`` every ``interval`` seconds on a cleared screen, until Ctrl-C."""
    try:
        while True:
            echo(f"{_CLEAR}celery locks list, every {interval:g}s (Ctrl-C to stop)   "
                 f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n\n{render()}")
            sleep(interval)
    except KeyboardInterrupt:
        echo("")


def short_prefix(name: str) -> str:
    """The complaint about a digest prefix too short to name a lock, or ``""``."""
    stem = name[: -len(":queued")] if name.endswith(":queued") else name
    if stem and len(stem) < MIN_PREFIX and all(c in "0123456789abcdef" for c in stem):
        return (f"{name!r} is too short to name a lock: give at least {MIN_PREFIX} characters of its digest "
                "(as `locks list` prints it), or the full key")
    return ""
