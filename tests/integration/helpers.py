"""Reading what the task bodies recorded, and judging it."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Dict, List

import redis

from celery_singleton_lock.store import record
from tests.support.suite_redis import lock_prefix
from tests.support.waits import wait_for


def records(events: redis.Redis, kind: str = "intervals") -> List[dict]:
    return [json.loads(item) for item in events.lrange(kind, 0, -1)]


def overlaps(intervals: List[dict]) -> List[tuple]:
    """Pairs of executions with equal keys whose intervals intersect."""
    by_key: Dict[str, List[dict]] = defaultdict(list)
    for entry in intervals:
        by_key[json.dumps(entry["key"])].append(entry)
    found = []
    for entries in by_key.values():
        entries.sort(key=lambda e: e["start"])
        for before, after in zip(entries, entries[1:]):
            if after["start"] < before["end"]:
                found.append((before, after))
    return found


def lock_keys(lock_redis: redis.Redis) -> List[str]:
    """Lock keys under the test prefix, bookkeeping (fencing counters, completion sets) left out."""
    return [k for k in lock_redis.scan_iter(f"{lock_prefix()}:*") if not k.endswith((":fence", ":done"))]


def lock_field(lock_redis: redis.Redis, key: str, field: str) -> Any:
    """One field of a held lock (``token``, ``task_id``, ``state``...), as the library encodes it;
    ``None`` when the key is free."""
    value = lock_redis.get(key)
    return None if value is None else record.decode(value)[field]


def wait_started(events: redis.Redis, count: int = 1, timeout: float = 20.0) -> List[dict]:
    return wait_for(lambda: (lambda r: r if len(r) >= count else None)(records(events, "started")),
                    timeout, what=f"{count} task start(s)")


def wait_unlocked(lock_redis: redis.Redis, timeout: float) -> None:
    wait_for(lambda: not lock_keys(lock_redis), timeout, interval=0.01, what="every lock key to be gone")


def wait_accepted(app, task_id: str, timeout: float = 10.0) -> int:
    """Wait until a worker's main process knows which pool process runs ``task_id``; its pid."""
    def accepted():
        for tasks in (app.control.inspect(timeout=0.5).active() or {}).values():
            for task in tasks:
                if task["id"] == task_id and task.get("worker_pid"):
                    return task["worker_pid"]
        return None

    return wait_for(accepted, timeout, interval=0.1, what=f"task {task_id} to be accepted by the pool")


def restore_overdue(app, visibility_timeout: float = 2.0) -> None:
    """Put messages whose visibility timeout has passed back in their queue, as a starting worker does.

    kombu's Redis transport sweeps for them when a worker starts and then periodically: every
    ``unacked_restore_interval`` from kombu 5.7, about every 100 s before it. Tests that need a
    redelivery sweep themselves, so they see one on every kombu (with the workers' visibility
    timeout: the sweep restores what waited longer than its own channel's).
    """
    with app.connection_for_read(transport_options={"visibility_timeout": visibility_timeout}) as connection:
        connection.default_channel.qos.restore_visible(num=100)


def drop_runtime(app: Any) -> None:
    """Close and forget the app's lock runtime, so the next use builds one from its settings."""
    runtime = app.__dict__.pop("_singleton_lock_runtime", None)
    if runtime is not None:
        runtime.close()


def by_key(intervals: List[dict]) -> Dict[str, List[dict]]:
    """The recorded intervals grouped by the key their body names."""
    grouped: Dict[str, List[dict]] = defaultdict(list)
    for entry in intervals:
        grouped[str(entry["key"])].append(entry)
    return grouped


def most_at_once(entries: List[dict]) -> int:
    """The most intervals that were running at one instant."""
    edges = sorted([(e["start"], 1) for e in entries] + [(e["end"], -1) for e in entries])
    most = running = 0
    for _, step in edges:  # an end before a start at the same instant: sorted -1 first
        running += step
        most = max(most, running)
    return most


def settle(results: List[Any], timeout: float) -> None:
    """Wait until every call's result is ready, and raise what any of them raised."""
    wait_for(lambda: all(r.ready() for r in results), timeout, interval=0.2, what="every call to finish")
    for result in results:
        result.get(timeout=5)
