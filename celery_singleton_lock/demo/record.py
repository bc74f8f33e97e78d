"""What the demo's task bodies and signal receivers write to Redis, and reading it back.

The overlap count of the summary must come from what really ran, not from what
the lock library believes, so every task body records its own interval
(wall-clock start and end, pid, lock key) when it finishes. Duplicates are
recorded by a receiver of the library's ``lock_conflict`` signal, in whichever
process met them (a worker child at run time, beat or the producer at enqueue
time). Everything goes to lists and hashes under the demo's namespace.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, cast

import redis

from .config import DemoConfig

__all__ = ["Recorder", "Records", "overlaps", "crowding", "by_key"]


class Recorder:
    """Writes and reads the demo's records; safe to share across a fork (redis-py reconnects per pid)."""

    def __init__(self, config: DemoConfig) -> None:
        self.config = config
        self.client = redis.Redis.from_url(config.redis_url, decode_responses=True,
                                           socket_connect_timeout=2, socket_timeout=5)

    # -- writing (task bodies, signal receivers, the producer) --------------------------------
    def started(self, task: str, label: str, lock_key: Optional[str], task_id: str, pid: int) -> float:
        now = time.time()
        pipe = self.client.pipeline(transaction=False)
        if lock_key:
            pipe.hset(self.config.key("labels"), lock_key, label)
        pipe.rpush(self.config.key("events"), json.dumps(
            dict(kind="start", t=now, task=task, label=label, id=task_id, pid=pid)))
        pipe.execute()
        return now

    def finished(self, task: str, label: str, lock_key: Optional[str], task_id: str, pid: int,
                 start: float, fence: Optional[int]) -> None:
        entry = dict(kind="end", task=task, label=label, key=lock_key, id=task_id, pid=pid, start=start,
                     end=time.time(), fence=fence)
        pipe = self.client.pipeline(transaction=False)
        pipe.rpush(self.config.key("intervals"), json.dumps(entry))
        pipe.rpush(self.config.key("events"), json.dumps(dict(entry, t=entry["end"])))
        pipe.execute()

    def conflict(self, task: str, lock_key: str, action: str, at: str, task_id: Optional[str],
                 holder: Optional[str]) -> None:
        entry = dict(kind="conflict", t=time.time(), task=task, key=lock_key, action=action, at=at,
                     id=task_id, holder=holder)
        pipe = self.client.pipeline(transaction=False)
        pipe.hincrby(self.config.key("stats"), f"{task}|{action}", 1)
        pipe.rpush(self.config.key("events"), json.dumps(entry))
        pipe.execute()

    def count(self, task: str, what: str) -> None:
        self.client.hincrby(self.config.key("stats"), f"{task}|{what}", 1)

    # -- reading (the runner) ----------------------------------------------------------------
    def events_since(self, index: int) -> List[Dict[str, Any]]:
        return [json.loads(item) for item in self.client.lrange(self.config.key("events"), index, -1)]

    def read(self) -> "Records":
        pipe = self.client.pipeline(transaction=False)
        pipe.lrange(self.config.key("intervals"), 0, -1)
        pipe.lrange(self.config.key("events"), 0, -1)
        pipe.hgetall(self.config.key("stats"))
        pipe.hgetall(self.config.key("labels"))
        intervals, events, stats, labels = pipe.execute()
        counts: Dict[str, Dict[str, int]] = defaultdict(dict)
        for name, value in stats.items():
            task, what = name.split("|", 1)
            counts[task][what] = int(value)
        return Records(intervals=[json.loads(i) for i in intervals],
                       conflicts=[e for e in map(json.loads, events) if e["kind"] == "conflict"],
                       counts=dict(counts), labels=labels)

    def label(self, lock_key: str) -> Optional[str]:
        return cast(Optional[str], self.client.hget(self.config.key("labels"), lock_key))  # decode_responses


@dataclass
class Records:
    """Everything the bodies and receivers wrote, as the summary and the plot need it."""

    intervals: List[Dict[str, Any]] = field(default_factory=list)
    conflicts: List[Dict[str, Any]] = field(default_factory=list)
    counts: Dict[str, Dict[str, int]] = field(default_factory=dict)
    labels: Dict[str, str] = field(default_factory=dict)

    def label_of(self, lock_key: Optional[str], task: str) -> str:
        if lock_key and lock_key in self.labels:
            return self.labels[lock_key]
        digest = (lock_key or "").rsplit(":", 1)[-1]
        return f"{task.rsplit('.', 1)[-1]}:{digest[:6]}"


def by_key(intervals: Iterable[Dict[str, Any]]) -> Dict[str, List[Dict[str, Any]]]:
    """The executions of each lock key, in the order they started."""
    found: Dict[str, List[Dict[str, Any]]] = defaultdict(list)
    for entry in intervals:
        found[entry["key"] or entry["label"]].append(entry)
    for entries in found.values():
        entries.sort(key=lambda e: e["start"])
    return found


def crowding(intervals: Iterable[Dict[str, Any]]) -> Iterator[Tuple[Dict[str, Any], int]]:
    """Each execution, with how many earlier ones of its lock key still ran when it started."""
    for entries in by_key(intervals).values():
        for index, entry in enumerate(entries):
            yield entry, sum(1 for earlier in entries[:index] if earlier["end"] > entry["start"])


def overlaps(intervals: Iterable[Dict[str, Any]], limit: int = 1) -> List[Dict[str, Any]]:
    """Executions that started while ``limit`` or more others of their lock key still ran (for the
    singleton lock: each one that overlaps an earlier one)."""
    return [entry for entry, running in crowding(intervals) if running >= limit]
