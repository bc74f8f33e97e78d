"""Waits and grants through a lock store that restarts, with real prefork workers and a real beat.

The broker is the session's Redis; each test's lock store is a redis-server of its own, which
the test restarts empty.

Given ``on_locked="wait"`` duplicates waiting behind 3 s bodies, when the lock store restarts,
then every message ends as ``on_lock_error`` says (re-queued and later run with ``retry``,
FAILURE with :class:`LockBackendError` with ``raise``): none ends with the store's own error,
none is lost, and no two runs of a key overlap.

Given a ``queued_or_running`` beat job, when its lock store has just started (a fresh store
grants nothing for its first seconds), then each tick still runs once, at once: the publish
waits for the store in place instead of treating it as an outage. So does a call published
from the test process (it goes out under its enqueue lock), and a starting worker's probe (no
"unreachable" warning).
"""

from __future__ import annotations

import json
import logging
import signal
import time
from collections import Counter
from typing import Dict, Iterator

import pytest
from celery import states

from celery_singleton_lock import LockBackendError
from tests.integration.helpers import drop_runtime, overlaps, records, wait_started
from tests.support.servers import RedisServer
from tests.support.waits import wait_for

APP = "tests.integration.proj_waits"


@pytest.fixture
def waits_proj(test_env: Dict[str, str], events_redis) -> Iterator[object]:
    import tests.integration.proj_waits as module

    events_redis.delete("intervals", "started", "published", "running")
    drop_runtime(module.app)
    yield module
    drop_runtime(module.app)


@pytest.fixture
def fresh_lock_server() -> Iterator[RedisServer]:
    """A lock store that has just started (younger than the wait for grants after a start)."""
    server = RedisServer().start(settle=False)
    try:
        yield server
    finally:
        server.__exit__(None, None, None)


def _lines(log: str, text: str) -> int:
    return sum(1 for line in log.splitlines() if text in line)


@pytest.mark.parametrize("task_name, on_lock_error", [("wait_retry", "retry"), ("wait_raise", "raise")])
def test_a_lock_store_restart_under_waiting_duplicates_loses_no_call(task_name, on_lock_error, waits_proj,
                                                                     start_worker, redis_server, events_redis):
    task = getattr(waits_proj, task_name)
    worker = start_worker(concurrency=6, env={"CSL_LOCK_URL": redis_server.url}, app=APP)
    keys = ("a", "b")
    holders = [task.apply_async((key,), {"duration": 3.0}) for key in keys]
    wait_started(events_redis, len(keys))
    duplicates = [task.apply_async((key,), {"duration": 3.0}) for key in keys for _ in range(2)]
    wait_for(lambda: _lines(worker.log(), "is a duplicate (wait)") >= len(duplicates), 20,
             what="every duplicate to wait")

    redis_server.stop()
    redis_server.start(settle=False)  # empty, and young: grants wait for its first seconds

    results = holders + duplicates
    for result in results:
        result.get(timeout=60, propagate=False)
    ended = {result.id: (result.state, result.result) for result in results}
    raw = {i: repr(r) for i, (state, r) in ended.items() if state == states.FAILURE
           and type(r).__module__.startswith("redis")}
    assert raw == {}, f"ended with the store's own error: {raw}"
    ran = Counter(entry["id"] for entry in records(events_redis))
    succeeded = {i for i, (state, _) in ended.items() if state == states.SUCCESS}
    failed = {i: r for i, (state, r) in ended.items() if state == states.FAILURE}
    assert set(ran) == succeeded and set(ran.values()) == {1}, "each call that succeeded ran once, no other"
    assert succeeded | set(failed) == set(ended), f"calls neither run nor failed: {ended}"
    assert overlaps(records(events_redis)) == [], "two runs of one key at once"
    log = worker.log()
    assert _lines(log, "Redis unavailable while waiting for lock") >= 1, "no wait met the restart"
    if on_lock_error == "retry":
        assert failed == {}, f"retry loses nothing: {failed}"
    else:
        assert failed and all(isinstance(error, LockBackendError) for error in failed.values()), failed
        assert set(failed) <= {d.id for d in duplicates}


def test_a_young_lock_store_under_a_beat_job_runs_each_tick_once_and_on_time(waits_proj, start_worker,
                                                                            fresh_lock_server, events_redis):
    env = {"CSL_LOCK_URL": fresh_lock_server.url, "CSL_WAITS_BEAT": "1"}
    worker = start_worker(concurrency=2, env=env, app=APP)
    beat = start_worker.beat(env=env, app=APP)
    wait_for(lambda: len(records(events_redis)) >= 2 and not events_redis.scard("running"), 30,
             what="two ticks run")

    # Between two ticks, the lock store restarts empty; beat is held still across the moment the
    # store is down (a tick then would meet an outage, which is not what this test is about).
    beat.signal(signal.SIGSTOP)
    try:
        fresh_lock_server.stop()
        fresh_lock_server.start(settle=False)
    finally:
        beat.signal(signal.SIGCONT)
    before = len(records(events_redis))
    wait_for(lambda: len(records(events_redis)) >= before + 5, 30, what="five ticks after the restart")
    beat.stop()

    published = [json.loads(p) for p in events_redis.lrange("published", 0, -1)]
    ticks = {p["id"]: p["at"] for p in published if p["task"] == waits_proj.tick.name}
    wait_for(lambda: {e["id"] for e in records(events_redis)} >= set(ticks), 20, what="every tick published to run")
    runs = records(events_redis)
    assert Counter(e["id"] for e in runs) == Counter(set(ticks)), "each tick runs once"
    late = {e["id"]: round(e["start"] - ticks[e["id"]], 2) for e in runs if e["start"] - ticks[e["id"]] > 1.0}
    assert late == {}, f"runs that started more than a second after their publish: {late}"
    assert overlaps(runs) == []
    beat_log, worker_log = beat.log(), worker.log()
    assert _lines(beat_log, "a young lock store") >= 1, "no tick met the young store"
    for log in (beat_log, worker_log):
        assert _lines(log, "Redis unavailable") == 0 and _lines(log, "unreachable") == 0


def test_a_call_published_to_a_young_lock_store_waits_and_goes_out_under_its_lock(waits_proj, fresh_lock_server,
                                                                                  broker_redis, caplog):
    import redis

    from tests.integration.helpers import lock_keys
    from tests.integration.topo import app_on

    store = redis.Redis.from_url(fresh_lock_server.url, decode_responses=True)
    with app_on(waits_proj, fresh_lock_server.url), caplog.at_level(logging.INFO, logger="celery_singleton_lock"):
        first = waits_proj.tick.apply_async(("young",), queue="young-store")  # a queue no worker reads
        again = waits_proj.tick.apply_async(("young",), queue="young-store")
    broker_redis.delete("young-store")
    assert again.id == first.id, "the second call is a duplicate of the first, queued under its lock"
    assert len(lock_keys(store)) == 1
    assert "enqueue lock" in caplog.text and "a young lock store" in caplog.text
    assert "Redis unavailable" not in caplog.text
    store.close()


def test_a_worker_starting_on_a_young_lock_store_waits_for_it_and_does_not_call_it_unreachable(waits_proj,
                                                                                               fresh_lock_server,
                                                                                               caplog):
    from celery_singleton_lock.worker.start_check import check_lock_store
    from tests.integration.topo import app_on

    with app_on(waits_proj, fresh_lock_server.url), caplog.at_level(logging.INFO, logger="celery_singleton_lock"):
        started = time.monotonic()
        assert check_lock_store(waits_proj.app) is None  # no warning: the store is reachable
        waited = time.monotonic() - started
    assert "not granting yet at worker start" in caplog.text and "a young lock store" in caplog.text
    assert waited <= 3.5
