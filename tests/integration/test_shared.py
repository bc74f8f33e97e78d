"""Shared locks through real prefork workers: ``lock_name`` across tasks, ``SharedLock`` in bodies.

Judged from what the bodies recorded in Redis (their intervals, and when each began asking for
its place) and from the lock Redis itself.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from typing import List

import pytest

from celery_singleton_lock import SharedLock
from celery_singleton_lock.runtime import runtime_for
from tests.integration.helpers import by_key, lock_keys, most_at_once, overlaps, records, settle, wait_accepted
from tests.support.waits import WaitTimeout, wait_for

APP = "tests.integration.proj_shared"


@pytest.fixture
def shared_proj(proj):
    import tests.integration.proj_shared as module

    return module


def _held(lock_redis, name: str) -> int:
    """Places held (not released) under the lock name ``name``."""
    return sum(1 for key in lock_keys(lock_redis) if f":{{{name}:" in key and key.endswith(":places")
               for field, value in lock_redis.hgetall(key).items()
               if not field.startswith("~") and not value.startswith("released "))


def test_two_tasks_sharing_a_lock_name_never_overlap_per_key_and_do_across_keys(shared_proj, start_worker,
                                                                             events_redis, lock_redis):
    # Given a prefork worker of four processes
    start_worker(concurrency=4, app=APP)
    # When sync_account and delete_account are called for three accounts, interleaved
    results = []
    for n in range(4):
        for account in (1, 2, 3):
            results.append(shared_proj.sync_account.delay(account))
            results.append(shared_proj.delete_account.delay(account, reason=f"r{n}"))
    settle(results, 120)
    intervals = records(events_redis)
    # then every call ran, and no two calls of one account overlapped, whichever task made them
    assert len(intervals) == len(results)
    assert overlaps(intervals) == []
    # and calls of different accounts did run at once
    assert most_at_once(intervals) >= 2
    # and both tasks ran under each account's one lock: their fences interleave in one sequence
    for entries in by_key(intervals).values():
        assert {e["task"].rsplit(".", 1)[-1] for e in entries} == {"sync_account", "delete_account"}
        assert len({e["fence"] for e in entries}) == len(entries)
    wait_for(lambda: not lock_keys(lock_redis), 10, what="every lock to go")


def test_one_name_and_value_is_one_lock_whatever_the_parameter_is_called_and_whoever_asks(
        shared_proj, start_worker, events_redis, lock_redis):
    # Given a prefork worker of four processes
    start_worker(concurrency=4, app=APP)
    # When, for three accounts, a task keyed by account_id, one keyed by id (both lock_name="account")
    # and a plain task holding SharedLock("account").hold(account_id) are called, interleaved
    results = []
    for _ in range(3):
        for account in (1, 2, 3):
            results.append(shared_proj.sync_account.delay(account, duration=0.2))
            results.append(shared_proj.close_account.delay(id=account, duration=0.2))
            results.append(shared_proj.audit_account.delay(account, duration=0.2))
    settle(results, 120)
    intervals = records(events_redis)
    # then every call ran, and no two calls of one account overlapped, whichever way they named it
    assert len(intervals) == len(results)
    assert overlaps(intervals) == []
    # and the three kinds of call took their fences from one sequence per account
    for entries in by_key(intervals).values():
        assert {e["task"].rsplit(".", 1)[-1] for e in entries} == {"sync_account", "close_account", "audit_account"}
        assert len({e["fence"] for e in entries}) == len(entries)
    assert most_at_once(intervals) >= 2


@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_a_shared_lock_of_2_in_three_plain_tasks_is_reached_and_never_exceeded(shared_proj, start_worker,
                                                                              events_redis, lock_redis, pool):
    # Given six pool processes (or threads of one process)
    start_worker(pool=pool, concurrency=6, app=APP)
    # When three plain tasks, 18 calls in all, each hold "payments-api" (limit 2, on_locked="wait")
    tasks = (shared_proj.charge_card, shared_proj.refund_card, shared_proj.capture_card)
    results = [task.delay() for task in tasks for _ in range(6)]
    settle(results, 120)
    intervals = records(events_redis)
    # then every call got through, never more than 2 at once, and 2 at once at some time
    assert len(intervals) == len(results)
    assert most_at_once(intervals) == 2
    # and fences strictly increase along the grants
    assert len({e["fence"] for e in intervals}) == len(intervals)
    wait_for(lambda: _held(lock_redis, "payments-api") == 0, 10, what="every place to be given back")


def test_a_pool_process_killed_inside_a_hold_gives_its_place_back_at_once(shared_proj, start_worker,
                                                                         events_redis, lock_redis):
    worker = start_worker(concurrency=2, app=APP)
    # Given two plain tasks holding both places of "long-held" (ttl 30 s)
    results = [shared_proj.hold_long.delay(duration=10) for _ in range(2)]
    wait_for(lambda: len(records(events_redis, "held")) == 2 and _held(lock_redis, "long-held") == 2, 20,
             what="both places taken")
    # When one pool process is SIGKILLed inside its block
    victim = records(events_redis, "held")[0]["pid"]
    os.kill(victim, signal.SIGKILL)
    # then the worker's main process gives its place back within a couple of seconds: not when its
    # body would have ended (10 s), nor at its ttl (30 s)
    wait_for(lambda: _held(lock_redis, "long-held") == 1, 3, what="the killed process's place to free")
    for result in results:
        result.revoke(terminate=True)


def _waiting(lock_redis, line: str) -> int:
    """How many wait in the line ``line`` (``<seq>|<token> <arrival> <lease end>|...``, see lua/_line.lua)."""
    return sum(1 for part in (lock_redis.get(line) or "").split("|") if " " in part)


def test_blocks_waiting_in_several_processes_are_served_first_come_first_served(shared_proj, start_worker,
                                                                                 events_redis, lock_redis):
    # Given six pool processes, and the test process holding the only place of "fair"
    start_worker(concurrency=6, app=APP)
    line = shared_proj.fair.keys(runtime_for(shared_proj.app), ()).lock + ":line"
    waiting = lambda: _waiting(lock_redis, line)  # noqa: E731
    calls = []
    with shared_proj.fair.hold():
        # When six plain tasks begin to wait for it, one after another (each in line before the next)
        for n in range(6):
            calls.append(shared_proj.wait_fairly.delay())
            wait_for(lambda: waiting() == n + 1, 30, what=f"waiter {n + 1} in line")
    settle(calls, 60)
    # Then they got the place in the order they began to wait, one at a time
    ids = [call.id for call in calls]
    intervals = records(events_redis)
    assert [ids.index(e["id"]) for e in sorted(intervals, key=lambda e: e["start"])] == list(range(6))
    assert overlaps(intervals) == []
    wait_for(lambda: not lock_redis.exists(line), 10, what="the line to go")


def test_a_pool_process_killed_while_waiting_in_line_leaves_it_at_once(shared_proj, start_worker, events_redis,
                                                                       lock_redis):
    # Given the test process holding the only place of "fair", and two plain tasks waiting for it in line
    start_worker(concurrency=2, app=APP)
    line = shared_proj.fair.keys(runtime_for(shared_proj.app), ()).lock + ":line"
    with shared_proj.fair.hold():
        first = shared_proj.wait_fairly.delay()
        wait_for(lambda: _waiting(lock_redis, line) == 1, 30, what="the first in line")
        second = shared_proj.wait_fairly.delay()
        wait_for(lambda: _waiting(lock_redis, line) == 2, 30, what="the second in line")
        # When the first one's pool process is SIGKILLed as it waits
        victim = wait_accepted(shared_proj.app, first.id)
        os.kill(victim, signal.SIGKILL)
        # Then the worker's main process takes it out of the line at once (its place in line would lapse
        # only 2-3 s later: it renews it every second for 3 s)
        wait_for(lambda: _waiting(lock_redis, line) == 1, 1.5, interval=0.02, what="the dead waiter to leave",
                 promise=True)
    # and the second gets the place when it is given back
    settle([second], 30)
    assert [e["id"] for e in records(events_redis)] == [second.id]


def test_calls_waiting_for_their_lock_are_served_first_come_first_served(shared_proj, start_worker, events_redis,
                                                                         lock_redis):
    # Given six pool processes, and the test process holding the lock of wait_in_turn (lock_key=(): its
    # name alone, which SharedLock(its name).hold() is too)
    start_worker(concurrency=6, app=APP)
    task = shared_proj.wait_in_turn
    held_by_test = SharedLock(task.name, app=shared_proj.app)
    line = held_by_test.keys(runtime_for(shared_proj.app), ()).lock + ":line"
    waiting = lambda: _waiting(lock_redis, line)  # noqa: E731
    calls = []
    with held_by_test.hold():
        # When six calls (on_locked="wait") begin to wait for it, one after another
        for n in range(6):
            calls.append(task.delay())
            wait_for(lambda: waiting() == n + 1, 30, what=f"call {n + 1} in line")
    settle(calls, 60)
    # Then they ran in the order they began to wait, one at a time
    ids = [call.id for call in calls]
    intervals = records(events_redis)
    assert [ids.index(e["id"]) for e in sorted(intervals, key=lambda e: e["start"])] == list(range(6))
    assert overlaps(intervals) == []


def test_pool_processes_killed_at_random_instants_of_short_blocks_leave_no_place_for_the_ttl(
        shared_proj, start_worker, events_redis, lock_redis):
    # Given four pool processes, each taking and giving back its own key's place every 3 ms (ttl 300 s)
    start_worker(concurrency=4, app=APP)
    runtime = runtime_for(shared_proj.app)
    running = [shared_proj.churn_holds.delay() for _ in range(4)]
    rng = random.Random(44)
    killed = []
    # When 200 of them are SIGKILLed, each at a random instant of its blocks (a new call replaces each)
    while len(killed) < 200:
        pid = int(wait_for(lambda: events_redis.spop("churning"), 30, interval=0.002, what="a churning process"))
        time.sleep(rng.uniform(0, 0.008))
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        running.append(shared_proj.churn_holds.delay())
    # Then the worker's main process gave every killed process's place back promptly: none waits for its ttl
    keys = {pid: shared_proj.churn.keys(runtime, (pid,)).lock for pid in killed}
    held = lambda: [pid for pid, key in keys.items() if lock_redis.exists(key)]  # noqa: E731
    try:
        wait_for(lambda: not held(), 5, interval=0.1, what="every killed process's place to be given back")
    except WaitTimeout:
        pass  # counted below
    kept = held()
    shared_proj.app.control.purge()
    for result in running:
        result.revoke(terminate=True)
    assert kept == [], f"{len(kept)} of {len(killed)} places kept by dead processes"


def test_retry_requeues_the_task_without_spending_its_retries_and_every_call_runs(shared_proj, start_worker,
                                                                                  events_redis, lock_redis):
    # Given four pool processes (lock retries come back after about 0.3 s)
    start_worker(concurrency=4, app=APP, env={"CSL_SHARED_RETRY_DELAY": "0.3"})
    # When six calls of a task with max_retries=0 meet "one-at-a-time" with on_locked="retry"
    results = [shared_proj.one_by_one.delay(n) for n in range(6)]
    settle(results, 120)
    intervals = records(events_redis)
    # then every call ran once, one at a time
    assert sorted(e["id"] for e in intervals) == sorted(r.id for r in results)
    assert most_at_once(intervals) == 1
    # and the ones that met the lock were re-queued (entered more than once), their retries unspent
    entered = records(events_redis, "entered")
    assert len(entered) > len(results)
    assert {e["retries"] for e in entered} == {0}
    wait_for(lambda: not lock_keys(lock_redis), 10, what="every lock to go")


def _violations(entries: List[dict], limit: int, window: float) -> List[List[dict]]:
    """Sets of more than ``limit`` grants inside one ``window``: each place is granted between its
    ``asked`` and ``start``, so limit + 1 calls that all asked within ``window`` before the latest
    start were granted closer together than the window allows."""
    ordered = sorted(entries, key=lambda e: e["start"])
    return [inside for last in range(len(ordered))
            if len(inside := [e for e in ordered[:last + 1] if ordered[last]["start"] - e["asked"] < window]) > limit]


def test_a_window_on_a_shared_lock_never_admits_more_than_limit_starts_in_a_window(shared_proj, start_worker,
                                                                                  events_redis):
    # Given four pool processes, and "partner": 3 starts per 1 s window, on_locked="wait"
    start_worker(concurrency=4, app=APP)
    results = [shared_proj.call_partner.delay(n) for n in range(12)]
    settle(results, 120)
    intervals = records(events_redis)
    assert len(intervals) == 12
    # then no more than 3 were granted in any 1 s span, and 3 started in some span
    assert _violations(intervals, 3, 1.0) == []
    starts = sorted(e["start"] for e in intervals)
    assert any(b - a < 1.0 for a, b in zip(starts, starts[2:]))


def test_a_hold_in_a_plain_process_works_and_is_released_on_exceptions(shared_proj, lock_redis):
    # Given this test process: no worker, the app's lock store settings
    lock = SharedLock("web-request", limit=2, on_locked="raise", app=shared_proj.app)
    # When a block holds a place and raises
    with pytest.raises(RuntimeError):
        with lock.hold("tenant-7") as held:
            assert held.fencing_token >= 1
            assert _held(lock_redis, "web-request") == 1
            with lock.hold("tenant-7"):  # the second place of the key
                assert _held(lock_redis, "web-request") == 2
            raise RuntimeError("the request failed")
    # then its place is given back at once
    assert _held(lock_redis, "web-request") == 0
    runtime_for(shared_proj.app).close()


def _celery_locks(*args: str) -> subprocess.CompletedProcess:
    """``celery locks ...`` as an operator runs it, on this module's app."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "celery", "-A", APP, "locks", *args],
                          capture_output=True, text=True, cwd=root, env=env, timeout=60)


def _locks(*args: str) -> list:
    """``celery locks list --json``."""
    proc = _celery_locks("list", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_celery_locks_names_the_task_that_made_each_call_and_finds_it_by_task_or_by_name(
        shared_proj, start_worker, events_redis, lock_redis):
    # Given sync_account(7) holding the "account" lock, and a plain task holding a "long-held" place
    start_worker(concurrency=2, app=APP)
    results = [shared_proj.sync_account.delay(7, duration=60), shared_proj.hold_long.delay(duration=60)]
    wait_for(lambda: len(lock_keys(lock_redis)) == 2, 20, what="both held")
    sync, hold = shared_proj.sync_account.name, shared_proj.hold_long.name
    # then the list names the task that made each call, and the name its key is under
    every = {(r["task"], r["name"]) for r in _locks()}
    assert every == {(sync, "account"), (hold, "long-held")}
    # and --task finds a call by the task that made it, or every call under a shared name
    assert [r["task"] for r in _locks("--task", sync)] == [sync]
    assert [r["task"] for r in _locks("--task", "account")] == [sync]
    assert [r["name"] for r in _locks("--task", "long-held")] == ["long-held"]
    assert _locks("--task", shared_proj.delete_account.name) == []
    # and a plain task's shared place is found by the task that holds it, whatever the name it is under
    assert [(r["task"], r["name"]) for r in _locks("--task", hold)] == [(hold, "long-held")]
    # and the table shows the name beside the task
    table = _celery_locks("list").stdout.splitlines()
    header = table[0].split()
    assert header[:2] == ["TASK", "NAME"]
    rows = {tuple(line.split()[:2]) for line in table[1:3]}
    assert rows == {(sync, "account"), (hold, "long-held")}
    # and show finds a lock by its name, or by the task holding it
    for named in ("long-held", hold, "account"):
        shown = _celery_locks("show", named)
        assert shown.returncode == 0, shown.stderr
        assert ("long-held" if named != "account" else "account") in shown.stdout
    for result in results:
        result.revoke(terminate=True)
