"""What the demo's limited and windowed tasks promise, checked against what their bodies recorded.

``demo.limited`` (``lock_limit=2``) promises at most two runs of one account at once;
``demo.windowed`` (``lock_window``) at most one start of one account in any span of its
window. Both are judged from the intervals the bodies wrote, never from what the library
believes, and the report says what was expected beside what was seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List

from .record import by_key, crowding

__all__ = ["LIMITED", "WINDOWED", "Promise", "PROMISES", "Verdict", "judge", "limit_of", "most_at_once",
           "most_starts_within"]


@dataclass(frozen=True)
class Promise:
    """At most ``limit`` runs of one key at once, or (with a ``window``) at most ``limit`` starts
    of one key in any ``window`` seconds."""

    task: str
    limit: int
    window: float = 0.0

    @property
    def expected(self) -> str:
        if self.window:
            return f"at most {self.limit} start(s) of an account in any {self.window:g}s"
        return f"at most {self.limit} runs of an account at once"


LIMITED = Promise("demo.limited", 2)
WINDOWED = Promise("demo.windowed", 1, 4.0)
PROMISES = (LIMITED, WINDOWED)


def limit_of(task: str) -> int:
    """How many runs of one key may overlap: the task's ``lock_limit`` (1 for the singleton tasks)."""
    return next((p.limit for p in PROMISES if p.task == task and not p.window), 1)


def most_at_once(intervals: Iterable[Dict[str, Any]]) -> int:
    """The most runs of one key that were running at the same instant."""
    return max((running + 1 for _, running in crowding(intervals)), default=0)


def most_starts_within(intervals: Iterable[Dict[str, Any]], window: float) -> int:
    """The most starts of one key in any span of ``window`` seconds."""
    most = 0
    for entries in by_key(intervals).values():
        starts = [e["start"] for e in entries]
        for i, start in enumerate(starts):
            most = max(most, sum(1 for s in starts[i:] if s - start < window))
    return most


@dataclass(frozen=True)
class Verdict:
    promise: Promise
    ran: int
    seen: int

    @property
    def kept(self) -> bool:
        return self.seen <= self.promise.limit

    def line(self) -> str:
        what = "start(s) in one window" if self.promise.window else "at once"
        return (f"{self.promise.task}: expected {self.promise.expected}; saw at most {self.seen} {what} "
                f"over {self.ran} run(s): " + ("as promised" if self.kept else "THE LIMIT WAS BROKEN"))


def judge(intervals: List[Dict[str, Any]]) -> List[Verdict]:
    """Each promise against the intervals of its task."""
    verdicts = []
    for promise in PROMISES:
        mine = [i for i in intervals if i["task"] == promise.task]
        seen = most_starts_within(mine, promise.window) if promise.window else most_at_once(mine)
        verdicts.append(Verdict(promise, len(mine), seen))
    return verdicts
