"""The library's Prometheus metrics, scraped from a real worker's port after a storm of known composition.

Given a worker serving ``singleton_lock_metrics_port`` (prefork with ``--max-tasks-per-child=2``,
so pool processes are replaced mid-storm; threads; solo), and locks held by the test process
itself (eager runs in threads), when the worker meets M skipped, J raised and K waiting
duplicates and N plain runs, then the scraped counters equal exactly those numbers, the
held gauge is back at zero, and (prefork) a revoke-terminate, a killed pool process and one killed
at its hard time limit each show up once under their exit.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest

from tests.integration.helpers import lock_keys, records, wait_started
from tests.support.scrape import free_port, scrape
from tests.support.waits import wait_for

APP = "tests.integration.proj_metrics"
M_SKIPPED, J_RAISED, K_WAITED, N_PLAIN = 3, 2, 2, 4


def _hold(task, key, duration):
    """Hold ``task``'s lock on ``key`` from this process (an eager run in a thread)."""
    thread = threading.Thread(target=task.apply, kwargs=dict(args=(key,), kwargs={"duration": duration}))
    thread.start()
    return thread


def _started(events_redis, key):
    return any(entry.get("key") == key for entry in records(events_redis, "started"))


def _storm(proj, events_redis):
    holders = [_hold(proj.sync, "m-skip", 6.0), _hold(proj.policy_raise, "m-raise", 6.0)]
    wait_for(lambda: _started(events_redis, "m-skip") and _started(events_redis, "m-raise"), 10,
             what="the test process to hold the skip and raise locks")
    dups = [proj.sync.delay("m-skip", duration=0) for _ in range(M_SKIPPED)]
    dups += [proj.policy_raise.delay("m-raise", duration=0) for _ in range(J_RAISED)]
    outcomes = [r.get(timeout=30, propagate=False) for r in dups]
    assert outcomes[:M_SKIPPED] == [None] * M_SKIPPED
    assert all(type(o).__name__ == "LockedError" for o in outcomes[M_SKIPPED:]), outcomes
    # Each waiter meets a lock the test process releases while the waiter waits (in turn, for solo):
    # held long enough that a pool process replaced under --max-tasks-per-child on a loaded machine
    # still starts its waiter before the release, and short of the waiters' lock_wait_timeout (10 s).
    holders += [_hold(proj.policy_wait, f"m-wait{i}", 4.0 + 2.0 * i) for i in range(K_WAITED)]
    wait_for(lambda: all(_started(events_redis, f"m-wait{i}") for i in range(K_WAITED)), 10,
             what="the test process to hold the wait locks")
    waiters = [proj.policy_wait.delay(f"m-wait{i}", duration=0.05) for i in range(K_WAITED)]
    assert all(r.get(timeout=30)["key"] == f"m-wait{i}" for i, r in enumerate(waiters))
    plain = [proj.storm.delay(f"m-plain{i}", duration=0.05) for i in range(N_PLAIN)]
    assert [r.get(timeout=30)["key"] for r in plain] == [f"m-plain{i}" for i in range(N_PLAIN)]
    for thread in holders:
        thread.join(15)


def _assert_storm_counted(port):
    runs = K_WAITED + N_PLAIN
    def settled():
        # A scrape reads each type's file on its own, so a release can show in one and not yet in another
        s = scrape(port)
        return s if (s.value("singleton_lock_released_total") >= runs
                     and s.value("singleton_lock_held_seconds_count") >= runs
                     and s.value("singleton_lock_held") == 0) else None

    got = wait_for(settled, 10, what="every release to be counted")
    assert got.by("singleton_lock_duplicates_total", "outcome") == {
        "skipped": M_SKIPPED, "raised": J_RAISED, "waited": K_WAITED}
    assert got.value("singleton_lock_duplicates_total", at="run") == M_SKIPPED + J_RAISED + K_WAITED
    assert got.value("singleton_lock_acquired_total") == runs
    assert got.by("singleton_lock_released_total", "exit") == {"success": runs}
    assert got.value("singleton_lock_acquire_seconds_count") == runs
    assert got.value("singleton_lock_held_seconds_count") == runs
    assert got.by("singleton_lock_wait_seconds_count", "result") == {"acquired": K_WAITED}
    assert got.value("singleton_lock_wait_seconds_sum") > 0.5 * K_WAITED
    assert got.value("singleton_lock_held") == 0
    assert got.value("singleton_lock_lost_total") == 0
    assert got.value("singleton_lock_store_errors_total") == 0
    assert got.by("singleton_lock_acquired_total", "task") == {
        "tests.integration.proj.policy_wait": K_WAITED, "tests.integration.proj.storm": N_PLAIN}


@pytest.mark.parametrize("pool, args", [("prefork", ["--max-tasks-per-child=2"]), ("threads", []), ("solo", []),
                                        ("gevent", [])])
def test_a_storm_of_known_composition_is_counted_exactly(proj, start_worker, events_redis, pool, args, monkeypatch):
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    port = free_port()
    start_worker(pool=pool, concurrency=1 if pool == "solo" else 2, app=APP,
                          env={"CSL_METRICS_PORT": f"127.0.0.1:{port}"}, extra_args=args)
    _storm(proj, events_redis)
    _assert_storm_counted(port)
    if pool == "prefork":
        assert len(set(e["pid"] for e in records(events_redis, "intervals") if e["pid"] != os.getpid())) > 2, \
            "pool processes were replaced during the storm"


def test_a_revoke_terminate_a_killed_child_and_a_hard_time_limit_each_show_up_once_under_their_exit(proj, start_worker, events_redis):
    port = free_port()
    start_worker(pool="prefork", concurrency=2, app=APP, env={"CSL_METRICS_PORT": f"127.0.0.1:{port}"})
    revoked = proj.long_running.delay("m-revoke")
    wait_started(events_redis, 1)
    wait_for(lambda: scrape(port).value("singleton_lock_held") == 1, 10, what="the held gauge to show the lock")
    revoked.revoke(terminate=True)
    wait_for(lambda: scrape(port).value("singleton_lock_released_total", exit="revoke") == 1, 10,
             what="the revoke to be counted")

    proj.long_running.delay("m-kill")
    started = wait_started(events_redis, 2)
    os.kill(started[-1]["pid"], signal.SIGKILL)
    got = wait_for(lambda: (lambda s: s if s.value("singleton_lock_released_total", exit="child_death") == 1
                            and s.value("singleton_lock_held") == 0 else None)(scrape(port)),
                   10, what="the killed child's release to be counted and its held lock to go")
    assert got.by("singleton_lock_released_total", "exit") == {"revoke": 1, "child_death": 1}

    proj.hard_limited.delay("m-limit")  # time_limit=1.5: the pool kills the process
    wait_started(events_redis, 3)
    got = wait_for(lambda: (lambda s: s if s.value("singleton_lock_released_total", exit="child_death") == 2
                            and s.value("singleton_lock_held") == 0 else None)(scrape(port)),
                   10, what="the release at the hard time limit to be counted")
    assert got.by("singleton_lock_released_total", "exit") == {"revoke": 1, "child_death": 2}
    assert got.value("singleton_lock_acquired_total") == 3
    assert got.value("singleton_lock_lost_total") == 0


@pytest.mark.parametrize("pool", ["prefork", "solo"])
def test_a_lock_found_gone_at_release_is_counted_lost_though_nothing_follows(proj, start_worker, events_redis,
                                                                              lock_redis, pool):
    # Given a worker with no receiver of lock_released or lock_lost (its release's answer is read
    # after the task), and a run whose lock another holder took over while it ran
    port = free_port()
    start_worker(pool=pool, concurrency=1, app=APP, env={"CSL_METRICS_PORT": f"127.0.0.1:{port}"})
    # (a process waits for its first release's answer: it learns there that the server has the script)
    assert proj.storm.delay("m-first", duration=0).get(timeout=30)["key"] == "m-first"
    result = proj.storm.delay("m-lost", duration=1.0)
    wait_started(events_redis, 2)
    (key,) = wait_for(lambda: lock_keys(lock_redis), 10, what="the run's lock")
    lock_redis.set(key, "intruder running - 100 30000 0 1/1@h h other", px=30_000)
    # When the run ends and no other task follows
    assert result.get(timeout=30)["key"] == "m-lost"
    # then its loss is counted (from the heartbeat's read of the answer), and the intruder's lock stays
    got = wait_for(lambda: (lambda s: s if s.value("singleton_lock_lost_total") == 1 else None)(scrape(port)),
                   10, what="the loss found at release to be counted")
    assert got.value("singleton_lock_held") == 0
    assert lock_redis.get(key).startswith("intruder ")
