"""Redlock across independent masters, through real prefork workers.

Given 3 or 5 redis-servers started here and workers whose singleton_lock_url
lists them, when duplicates storm in (with one master killed, or paused), then
no two runs of one key overlap; with a majority down, on_lock_error applies
within a bounded time; fences of 1,000 successive holders strictly increase.
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from celery_singleton_lock.store.connect import open_store
from tests.integration.helpers import records
from tests.integration.topo import app_on, storm, strictly_increasing, successive_fences, worker_env, workers
from tests.support.contract_places import TICK_MS
from tests.support.suite_redis import lock_prefix
from tests.support.topologies import Masters
from tests.support.waits import wait_for


@pytest.fixture(scope="module")
def five(test_env):
    masters = Masters(5).start()
    try:
        with workers(test_env, worker_env(masters.urls), "quorum5") as started:
            yield masters, started
    finally:
        masters.stop()


@pytest.fixture(scope="module")
def three(test_env):
    masters = Masters(3).start()
    try:
        with workers(test_env, worker_env(masters.urls), "quorum3", count=1, concurrency=3) as started:
            yield masters, started
    finally:
        masters.stop()


@pytest.fixture
def topo_proj(test_env):
    import tests.integration.proj as proj
    return proj


def _no_lock_left(masters: Masters, alive) -> bool:
    return all(not [k for k in masters.client(i).scan_iter(f"{lock_prefix()}:*") if not k.endswith(":fence")]
               for i in alive)


def test_storm_on_three_masters(three, topo_proj, events_redis):
    masters, _ = three
    with app_on(topo_proj, masters.urls) as proj:
        storm(proj, events_redis, "quorum3", tasks=30, keys=4)
    wait_for(lambda: _no_lock_left(masters, range(3)), 5, what="every lock released on every master")


def test_storm_on_five_masters(five, topo_proj, events_redis):
    masters, _ = five
    with app_on(topo_proj, masters.urls) as proj:
        storm(proj, events_redis, "quorum5")
    wait_for(lambda: _no_lock_left(masters, range(5)), 5, what="every lock released on every master")


def test_storm_on_five_masters_with_one_killed(five, topo_proj, events_redis):
    masters, _ = five
    masters.servers[0].process.kill()  # SIGKILL
    try:
        with app_on(topo_proj, masters.urls) as proj:
            storm(proj, events_redis, "quorum5")
        wait_for(lambda: _no_lock_left(masters, range(1, 5)), 5, what="every lock released on the live masters")
    finally:
        masters.restart(0)


def test_storm_on_five_masters_with_one_paused(five, topo_proj, events_redis):
    masters, _ = five
    paused = masters.servers[1].process.pid
    os.kill(paused, signal.SIGSTOP)
    try:
        with app_on(topo_proj, masters.urls) as proj:
            storm(proj, events_redis, "quorum5")
    finally:
        os.kill(paused, signal.SIGCONT)


def test_majority_down_applies_on_lock_error_within_bounded_time(three, topo_proj, events_redis):
    from celery_singleton_lock import LockBackendError

    masters, _ = three
    events_redis.delete("intervals", "started")
    masters.servers[0].process.kill()
    paused = masters.servers[1].process.pid
    os.kill(paused, signal.SIGSTOP)  # one killed, one paused: one of three answers
    try:
        with app_on(topo_proj, masters.urls) as proj:
            started = time.monotonic()
            raised = proj.error_raise.apply_async(("a",), queue="quorum3")
            ran = proj.error_run.apply_async(("b",), queue="quorum3")
            with pytest.raises(LockBackendError):
                raised.get(timeout=20)
            assert time.monotonic() - started < 5.0  # per-master timeouts, not a hang
            assert ran.get(timeout=20)["key"] == "b"  # on_lock_error="run": the user chose to run unguarded
            retried = proj.error_retry.apply_async(("c",), queue="quorum3")
            with pytest.raises(LockBackendError):
                retried.get(timeout=20)  # retried once (lock_retry_max=1), then gave up
        assert {e["key"] for e in records(events_redis, "started")} == {"b"}
    finally:
        os.kill(paused, signal.SIGCONT)
        masters.restart(0)


def test_fences_strictly_increase_across_1000_holders_while_masters_fail(five):
    masters, _ = five
    store = open_store(masters.urls, {})
    rng = random.Random(6)
    paused = []

    def between(i: int) -> None:
        if i % 50 == 25:  # a minority ran ahead: grants that never became a majority
            ahead = rng.choice([0, 1, 2, 4] if paused else range(5))
            masters.client(ahead).incrby("fq:{t}:fence", rng.randrange(1, 40))
        if i == 400:
            paused.append(masters.servers[3].process.pid)
            os.kill(paused[0], signal.SIGSTOP)
        if i == 700:
            os.kill(paused.pop(), signal.SIGCONT)

    try:
        fences = successive_fences(store, "fq:{t}:k", "fq:{t}:fence", 1000, between)
    finally:
        for pid in paused:
            os.kill(pid, signal.SIGCONT)
        store.close()
    assert len(fences) == 1000 and strictly_increasing(fences)


def test_enqueue_lock_and_self_retry_on_three_masters(three, topo_proj, events_redis):
    masters, _ = three
    with app_on(topo_proj, masters.urls) as proj:
        calls = [proj.qor_job.apply_async(("q",), {"duration": 0.5}, queue="quorum3") for _ in range(4)]
        assert len({c.id for c in calls}) == 1  # one message published, the rest joined it
        assert calls[0].get(timeout=30)["key"] == "q"

        retried = proj.qor_self_retry.apply_async(("r",), queue="quorum3")  # keeps the lock across retry
        wait_for(lambda: retried.state == "RETRY", 15, what="RETRY")
        assert proj.qor_self_retry.apply_async(("r",), queue="quorum3").id == retried.id
        assert retried.get(timeout=30) == 1

    def left(state: str = "") -> list:
        return [(i, k) for i in range(3) for k in masters.client(i).scan_iter(f"{lock_prefix()}:{{*qor_*}}:*")
                if not k.endswith(":fence") and f" {state}" in (masters.client(i).get(k) or "")]

    # The release is decided by a majority; a master that missed it (its answer came after the node
    # timeout on a loaded machine) drops its running copy at lock_ttl, and never keeps one for good.
    wait_for(lambda: len({i for i, _ in left()}) <= 1, 5, what="this test's locks released on a majority")
    wait_for(lambda: not left("running"), 35, interval=0.5,
             what="this test's running locks gone from every master within lock_ttl")
    # A master that missed an adopt keeps that message's enqueue lock until lock_queue_ttl: on a
    # minority it can refuse no grant, and it is never a running lock.
    for i, key in left():
        assert masters.client(i).pttl(key) <= 3600 * 1000, (i, key)


def test_a_majority_restarted_empty_between_two_holders_gives_the_second_a_larger_fence(test_env):
    from celery_singleton_lock.store import Grant, new_token
    from tests.integration.topo import HOLDER

    masters = Masters(3).start()
    store = open_store(masters.urls, {})
    try:
        first_token = new_token()
        assert isinstance(store.acquire("rq:{t}:k", first_token, 2000, HOLDER), Grant)
        first = store.fence("rq:{t}:k", "rq:{t}:fence", first_token)
        assert first and store.release("rq:{t}:k", first_token)
        masters.restart(0, settle=False)
        masters.restart(1, settle=False)  # a majority forgot the lock and its fencing counter

        def second():
            token = new_token()
            try:
                outcome = store.acquire("rq:{t}:k", token, 2000, HOLDER)
            except Exception:  # the restarted masters hold grants back a few seconds: no majority yet
                return None
            return token if isinstance(outcome, Grant) else None

        granted = wait_for(second, 10, interval=0.2, what="a grant once the restarted masters let grants through")
        assert store.fence("rq:{t}:k", "rq:{t}:fence", granted) > first
    finally:
        store.close()
        masters.stop()


def test_a_window_on_a_quorum_keeps_a_released_place_on_a_majority():
    from celery_singleton_lock.store import Conflict, Grant, KeyLayout, Limit, limited
    from tests.integration.topo import HOLDER

    masters = Masters(3).start()
    store = open_store(masters.urls, {})
    try:
        limit = Limit(1, 1_500)
        keys = limited(KeyLayout("cslqw").keys("throttled", "a1", "running"), limit)
        # Given a quorum of three masters and a key with a 1.5 s window, taken and released at once
        assert isinstance(store.acquire(keys.lock, "t1", 5_000, HOLDER, limit=limit), Grant)
        first = store.fence(keys.lock, keys.fence, "t1")
        assert store.release(keys.lock, "t1")
        # then the next call is refused until the window ends, told how long it still holds
        refused = store.acquire(keys.lock, "t2", 5_000, HOLDER, limit=limit)
        assert isinstance(refused, Conflict) and refused.window_ms is not None and refused.window_ms <= 1_500 + TICK_MS
        # and once it has ended, the next holder gets it with a larger fence
        wait_for(lambda: isinstance(store.acquire(keys.lock, "t2", 5_000, HOLDER, limit=limit), Grant), 5,
                 what="the window to end")
        assert store.fence(keys.lock, keys.fence, "t2") > first
        assert store.release(keys.lock, "t2")
        # and a limit above one is refused by the quorum itself too
        with pytest.raises(ValueError, match="cannot keep lock_limit > 1"):
            store.acquire(keys.lock, "t3", 5_000, HOLDER, limit=Limit(3))
    finally:
        store.close()
        masters.stop()
