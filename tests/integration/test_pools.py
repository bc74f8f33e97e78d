"""The same guarantees in every execution pool, and on worker shutdown."""

from __future__ import annotations

import importlib.util
import signal
import time

import pytest

from tests.integration.helpers import lock_keys, overlaps, records, wait_started, wait_unlocked

POOLS = ["prefork", "threads", "solo"] + [p for p in ("gevent", "eventlet") if importlib.util.find_spec(p)]


@pytest.mark.parametrize("pool", POOLS)
def test_duplicates_never_overlap_in_any_pool(proj, start_worker, events_redis, lock_redis, pool):
    start_worker(pool=pool, concurrency=1 if pool == "solo" else 4)
    results = [proj.storm.delay(f"set-{i % 3}", duration=0.3) for i in range(18)]

    [r.get(timeout=60) for r in results]

    intervals = records(events_redis)
    assert overlaps(intervals) == []
    assert {e["key"] for e in intervals} == {"set-0", "set-1", "set-2"}
    assert pool == "solo" or any(  # concurrent pools did run different keys side by side
        a["start"] < b["end"] and b["start"] < a["end"] for a in intervals for b in intervals if a["key"] != b["key"])
    wait_unlocked(lock_redis, 2)


@pytest.mark.parametrize("pool", ["threads", "gevent"] if importlib.util.find_spec("gevent") else ["threads"])
def test_the_lock_object_is_per_execution_in_shared_memory_pools(proj, start_worker, events_redis, pool):
    start_worker(pool=pool, concurrency=4)
    results = [proj.storm.delay(f"k{i}", duration=0.5) for i in range(4)]

    outcomes = [r.get(timeout=30) for r in results]

    assert len({o["fence"] for o in outcomes}) == 4  # each execution saw its own lock
    assert len({e["pid"] for e in records(events_redis)}) == 1


def test_cold_shutdown_releases_what_the_children_held(proj, start_worker, events_redis, lock_redis):
    worker = start_worker(concurrency=2)
    proj.long_running.delay("a")
    proj.long_running.delay("b")
    wait_started(events_redis, 2)
    assert len(lock_keys(lock_redis)) == 2

    since = time.monotonic()
    worker.signal(signal.SIGQUIT)  # cold shutdown: children are terminated mid-task
    wait_unlocked(lock_redis, 5)
    assert time.monotonic() - since <= 3.0  # released by the worker, not by the 30 s TTL


def test_warm_shutdown_lets_the_task_finish_and_release(proj, start_worker, events_redis, lock_redis):
    worker = start_worker(concurrency=1)
    result = proj.storm.delay("k", duration=1.5)
    wait_started(events_redis, 1)

    worker.signal(signal.SIGTERM)
    worker.process.wait(20)

    assert result.get(timeout=5)["key"] == "k"
    assert lock_keys(lock_redis) == []
