"""A lock store that restarts without its data while bodies run, through real prefork workers.

Given workers whose lock store is a private redis-server, and a body that writes to a
downstream store which refuses a fence older than the last it accepted, when the lock
store restarts empty in the middle of the body and duplicates arrive at once, then the
running holder keeps its lock (it takes it back at once), the duplicates wait for it, no two
runs of the key overlap, every write is accepted, and the next holder's fence is larger.
"""

from __future__ import annotations

import json
import time

import pytest
import redis

from celery_singleton_lock.store import Grant, Lease, Renewer, new_token, open_store
from tests.integration.topo import HOLDER

from tests.integration.helpers import lock_field, lock_keys, overlaps, records, wait_started
from tests.integration.topo import app_on, worker_env, workers
from tests.support.servers import RedisServer, wait_older_than
from tests.support.waits import wait_for
from tests.support.workers import Worker


@pytest.fixture
def lock_server():
    with RedisServer() as server:
        yield server


def test_a_restart_without_data_during_a_body_lets_no_duplicate_run_beside_it(lock_server, test_env, events_redis):
    import tests.integration.proj as proj

    events_redis.delete("fenced:last", "fenced:writes", "fenced:answers", "intervals", "started")
    with workers(test_env, worker_env(lock_server.url), "restart", count=1, concurrency=3), \
            app_on(proj, lock_server.url):
        first = proj.fenced.apply_async(("a",), {"duration": 3.0, "writes": 3}, queue="restart")
        wait_started(events_redis, 1)
        lock_server.stop()
        lock_server.start(settle=False)  # empty: the lock, the fencing counter, everything is gone
        duplicates = [proj.fenced.apply_async(("a",), {"duration": 0.6, "writes": 2}, queue="restart")
                      for _ in range(2)]
        # the lock its holder takes back names that holder again, so a duplicate's log says who runs
        store = redis.Redis.from_url(lock_server.url, decode_responses=True)
        wait_for(lambda: [lock_field(store, key, "task_id") for key in lock_keys(store)] == [first.id], 10,
                 interval=0.05, what="the taken-back lock to name its holder")
        store.close()
        for result in [first, *duplicates]:
            result.get(timeout=60)

    intervals = records(events_redis)
    writes = [json.loads(w) for w in events_redis.lrange("fenced:writes", 0, -1)]
    answers = [json.loads(a) for a in events_redis.lrange("fenced:answers", 0, -1)]
    assert len(intervals) == 3
    assert overlaps(intervals) == [], "a duplicate ran beside the holder whose lock the restart lost"
    assert all(a["accepted"] for a in answers), f"writes refused: {answers}"
    assert not any(w["lost"] for w in writes)
    by_start = sorted(intervals, key=lambda e: e["start"])
    fences = [e["fence"] for e in by_start]
    assert fences == sorted(fences) and len(set(fences)) == 3, "fences must grow from holder to holder"


class _Runtime:
    """What :func:`release_after_run` uses of a runtime: the store, the heartbeat, the loss report."""

    def __init__(self, store) -> None:
        self.store = store
        self.renewer = Renewer(store)
        self.lost = []

    def report_lost(self, lease, reason) -> None:
        self.lost.append(reason)


def test_a_lock_lost_to_a_restart_before_its_heartbeat_took_it_back_is_released_not_reported(lock_server):
    from celery_singleton_lock.run.exits import release_after_run

    store = open_store(lock_server.url)
    runtime = _Runtime(store)
    try:
        key, token = "csltest:restart:{0}:k", new_token()
        assert isinstance(store.acquire(key, token, 30_000, HOLDER), Grant)
        lease = Lease(key, token, ttl=30.0, heartbeat=10.0, confirmed_at=time.monotonic())
        lock_server.stop()
        lock_server.start(settle=False)  # empty, and younger than the wait for grants
        assert release_after_run(runtime, lease, None, "t") is True
        assert runtime.lost == [] and not lease.lost.is_set()
        assert store.holder(key) is None
        # Past the window a lock found gone may have had another holder: that is reported.
        lock_server.settle()
        other = new_token()
        assert isinstance(store.acquire(key, other, 30_000, HOLDER), Grant)
        store.release(key, other)
        late = Lease(key, token, ttl=30.0, heartbeat=10.0, confirmed_at=time.monotonic())
        assert release_after_run(runtime, late, None, "t") is False
        assert len(runtime.lost) == 1 and late.lost.is_set()
    finally:
        runtime.renewer.close()
        store.close()


def test_a_restart_without_data_keeps_a_window_from_admitting_a_start_until_a_window_has_passed(
        lock_server, test_env, events_redis):
    import tests.integration.proj_limits as proj

    events_redis.delete("intervals")
    url = lock_server.url
    # Given a lock store older than the window (6 s), and a worker on it
    with redis.Redis.from_url(url) as probe:
        wait_older_than(probe, 6)
    worker = Worker("tests.integration.proj_limits", dict(test_env, CSL_LOCK_URL=url),
                    name=f"wrestart-{new_token()[:6]}", concurrency=2, extra_args=["-Q", "wrestart"])
    try:
        worker.start()
        with app_on(proj, url):
            # and a key run once under its window
            assert proj.once_per_6s.apply_async(("r",), {"seq": 0}, queue="wrestart").get(timeout=30) == 0
            # When the lock store restarts without its data (the window's place is gone)
            lock_server.stop()
            lock_server.start(settle=False)
            # then a call within the window is still refused: late rather than twice
            assert proj.once_per_6s.apply_async(("r",), {"seq": 1}, queue="wrestart").get(timeout=30) is None
            # and once a window has passed since the restart, a call runs
            with redis.Redis.from_url(url) as probe:
                wait_older_than(probe, 6)  # a window since the restart
            assert proj.once_per_6s.apply_async(("r",), {"seq": 2}, queue="wrestart").get(timeout=30) == 2
    finally:
        worker.stop()
    starts = sorted(e["start"] for e in records(events_redis))
    assert len(starts) == 2 and starts[1] - starts[0] >= 6, starts
