"""The run-time lock through real prefork workers: exclusion, renewal, release on every exit path.

Given real workers on a real Redis, when tasks run, then what the bodies recorded
(intervals in Redis) and what Redis holds show the contract.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from tests.integration.helpers import (lock_field, lock_keys, overlaps, records, restore_overdue, wait_accepted, wait_started,
                                      wait_unlocked)
from tests.support.suite_redis import broker_key
from tests.support.waits import wait_for


def test_duplicate_storm_never_overlaps(proj, start_worker, events_redis, lock_redis):
    start_worker(concurrency=2)
    start_worker(concurrency=2)
    results = [proj.storm.delay(f"set-{i % 6}", duration=0.3) for i in range(60)]

    outcomes = [r.get(timeout=90) for r in results]

    assert all(r.ready() for r in results)
    intervals = records(events_redis)
    assert overlaps(intervals) == []
    assert {e["key"] for e in intervals} == {f"set-{i}" for i in range(6)}
    assert len([o for o in outcomes if o is None]) == 60 - len(intervals)  # skipped ones end SUCCESS/None
    wait_unlocked(lock_redis, 2)


def test_spellings_of_one_call_are_one_lock(proj, start_worker, events_redis):
    start_worker(concurrency=4)
    first = proj.account.delay(7)  # a 1.5 s body
    wait_started(events_redis, 1)
    dups = [proj.account.delay(account_id=7), proj.account.delay(7, False), proj.account.apply_async((7,), {"full": False})]
    other = proj.account.delay(7, True)  # a different call

    assert [d.get(timeout=20) for d in dups] == [None, None, None]
    assert first.get(timeout=20)["key"] == [7, False]
    assert other.get(timeout=20)["key"] == [7, True]


def test_a_mixins_call_still_wraps_the_guarded_body(proj, start_worker, events_redis):
    start_worker(pool="threads", concurrency=2)
    first = proj.around.delay("m", duration=1.0)
    wait_started(events_redis, 1)
    dup = proj.around.delay("m")

    outcome = first.get(timeout=20)
    assert dup.get(timeout=20) is None
    assert outcome["id"] == first.id and outcome["fence"] is not None  # the body saw its request and its lock
    around = [json.loads(e) for e in events_redis.lrange("around", 0, -1)]
    assert [(e["id"], e["phase"]) for e in around] == [(first.id, "enter"), (first.id, "exit")]


def test_lock_key_names_decide_and_other_accounts_run_concurrently(proj, start_worker, events_redis):
    start_worker(concurrency=4)
    a = proj.sync.delay(1, payload="a", duration=1.5)
    wait_started(events_redis, 1)
    dup = proj.sync.delay(1, payload="b")
    b = proj.sync.delay(2, payload="a", duration=1.5)

    assert dup.get(timeout=20) is None
    a.get(timeout=20), b.get(timeout=20)
    by_account = {e["key"]: e for e in records(events_redis)}
    assert set(by_account) == {1, 2}
    assert by_account[2]["start"] < by_account[1]["end"]  # accounts 1 and 2 overlapped in time


def test_heartbeat_keeps_a_short_ttl_lock_for_a_long_body(proj, start_worker, events_redis, lock_redis):
    start_worker(concurrency=2)
    holder = proj.short_ttl.delay("k", duration=7)  # lock_ttl=2
    wait_started(events_redis, 1)
    time.sleep(4)  # the scenario itself: the duplicate is sent 4 s in, twice the lock_ttl
    duplicate = proj.short_ttl.delay("k", duration=0.1)

    assert duplicate.get(timeout=20) is None
    assert holder.get(timeout=20)["key"] == "k"
    assert len(records(events_redis)) == 1
    wait_unlocked(lock_redis, 1)


def _key_gone_within(lock_redis, seconds: float, since: float) -> float:
    wait_unlocked(lock_redis, seconds + 0.5)
    elapsed = time.monotonic() - since
    print(f"[measured] lock freed {elapsed * 1000:.0f} ms after the event")  # shown with pytest -s
    assert elapsed <= seconds, f"lock still held {elapsed:.2f}s after the event"
    return elapsed


def test_released_at_once_after_an_exception(proj, start_worker, lock_redis):
    start_worker()
    result = proj.failing.delay("x")
    with pytest.raises(ValueError):
        result.get(timeout=20)
    _key_gone_within(lock_redis, 1.0, time.monotonic())


def test_released_during_a_retry_countdown(proj, start_worker, events_redis, lock_redis):
    start_worker()
    result = proj.retrying.delay("x")  # retries with countdown=30
    wait_for(lambda: result.state == "RETRY", 20, what="RETRY state")
    _key_gone_within(lock_redis, 1.0, time.monotonic())
    result.revoke()


@pytest.mark.parametrize("task", ["retry_now", "qor_retry_now"])
def test_a_retry_that_starts_before_its_first_attempt_has_left_runs_after_it(proj, start_worker, events_redis,
                                                                           task):
    start_worker(concurrency=2)  # the retry reaches the other child while the first attempt cleans up
    result = getattr(proj, task).delay("r", cleanup=0.5)

    assert result.get(timeout=20) == 1  # the retry ran: it is no redelivery of the running attempt
    intervals = sorted(records(events_redis), key=lambda e: e["start"])
    assert [e["retries"] for e in intervals] == [0, 1] and overlaps(intervals) == []


def test_released_after_revoke_terminate(proj, start_worker, events_redis, lock_redis):
    start_worker()
    result = proj.long_running.delay("x")  # 30 s body, lock_ttl=30
    wait_started(events_redis, 1)
    assert lock_keys(lock_redis)
    since = time.monotonic()
    result.revoke(terminate=True)
    _key_gone_within(lock_redis, 1.0, since)


def test_released_after_a_hard_time_limit(proj, start_worker, events_redis, lock_redis):
    start_worker()
    proj.hard_limited.delay("x")  # time_limit=1.5, 30 s body, lock_ttl=30
    wait_started(events_redis, 1)
    since = time.monotonic()
    _key_gone_within(lock_redis, 1.5 + 1.0, since)


def test_released_after_a_soft_time_limit(proj, start_worker, events_redis, lock_redis):
    start_worker()
    result = proj.soft_limited.delay("x")
    wait_started(events_redis, 1)
    with pytest.raises(Exception):
        result.get(timeout=20)
    _key_gone_within(lock_redis, 1.0, time.monotonic())


def test_released_by_the_parent_when_the_child_is_killed(proj, start_worker, events_redis, lock_redis):
    start_worker()
    result = proj.long_running.delay("x")
    wait_started(events_redis, 1)
    child = wait_accepted(proj.app, result.id)  # the main process knows which child runs it
    since = time.monotonic()
    os.kill(child, signal.SIGKILL)
    _key_gone_within(lock_redis, 1.0, since)


def test_a_killed_worker_frees_its_locks_within_the_ttl(proj, start_worker, events_redis, lock_redis):
    # quick_ttl: lock_ttl=3, lock_heartbeat=1
    doomed = start_worker(env={"CSL_QUEUE": "doomed"}, extra_args=["-Q", "doomed"])
    fresh = start_worker(extra_args=["-Q", "fresh"])
    proj.quick_ttl.apply_async(("k",), {"duration": 30}, queue="doomed")
    wait_started(events_redis, 1)
    killed_at = time.monotonic()
    os.killpg(doomed.pid, signal.SIGKILL)  # the whole worker, children included

    def duplicate_ran():
        result = proj.quick_ttl.apply_async(("k",), {"duration": 0}, queue="fresh")
        return result.get(timeout=20) is not None

    wait_for(duplicate_ran, 3 + 1 + 2, interval=0.2, what="the duplicate to run on the fresh worker")
    elapsed = time.monotonic() - killed_at
    print(f"[measured] whole worker SIGKILLed: a duplicate ran {elapsed * 1000:.0f} ms later (lock_ttl=3 s)")
    assert elapsed <= 3 + 1 + 0.5  # lock_ttl + one heartbeat (+ round-trip slack)
    assert fresh.process.poll() is None


def test_a_paused_holder_cannot_delete_the_next_holders_lock(proj, start_worker, events_redis, lock_redis):
    paused = start_worker(concurrency=1, extra_args=["-Q", "paused"])
    other = start_worker(concurrency=1, extra_args=["-Q", "other"])
    first = proj.quick_ttl.apply_async(("k",), {"duration": 1.0}, queue="paused")  # lock_ttl=3
    child = wait_started(events_redis, 1)[0]["pid"]
    os.kill(child, signal.SIGSTOP)
    try:
        wait_unlocked(lock_redis, 3 + 1 + 1)  # expired: its heartbeat is frozen
        second = proj.quick_ttl.apply_async(("k",), {"duration": 4.0}, queue="other")
        wait_started(events_redis, 2)
        [key] = lock_keys(lock_redis)
        assert lock_field(lock_redis, key, "task_id") == second.id
    finally:
        os.kill(child, signal.SIGCONT)

    first.get(timeout=20)  # the old holder finished and tried to release
    assert lock_field(lock_redis, key, "task_id") == second.id  # ...but the new holder's lock is intact
    wait_for(lambda: "singleton lock LOST" in paused.log(), 10, what="the loss reported at ERROR")
    assert "ERROR" in [line for line in paused.log().splitlines() if "LOST" in line][0]
    second.get(timeout=20)
    wait_unlocked(lock_redis, 1)
    assert other.process.poll() is None


def test_on_locked_retry_runs_after_the_holder(proj, start_worker, events_redis):
    start_worker(concurrency=2)
    first = proj.policy_retry.delay("k")  # 1.5 s body, lock_retry_delay=0.5
    wait_started(events_redis, 1)
    second = proj.policy_retry.delay("k")
    wait_for(lambda: second.state == "RETRY", 10, what="the duplicate to be retried")

    assert first.get(timeout=20) and second.get(timeout=30)
    intervals = records(events_redis)
    assert len(intervals) == 2 and overlaps(intervals) == []


def test_lock_retries_are_bounded_by_lock_retry_max_not_max_retries(proj, start_worker, events_redis):
    from celery_singleton_lock import LockedError

    start_worker(concurrency=2)
    holder = proj.policy_retry_bounded.delay("k", duration=4)  # lock_retry_max=2, max_retries=0
    wait_started(events_redis, 1)
    dup = proj.policy_retry_bounded.delay("k")

    with pytest.raises(LockedError) as info:
        dup.get(timeout=20)
    assert "gave up after 2 lock retries" in str(info.value)
    assert holder.get(timeout=20)


def test_on_locked_wait_runs_right_after_release(proj, start_worker, events_redis):
    start_worker(concurrency=2)
    first = proj.policy_wait.delay("k", duration=1.0)
    wait_started(events_redis, 1)
    second = proj.policy_wait.delay("k", duration=0.1)

    first.get(timeout=20), second.get(timeout=20)
    a, b = sorted(records(events_redis), key=lambda e: e["start"])
    assert b["start"] >= a["end"]
    assert b["start"] - a["end"] < 0.5  # woken by the release, not by a polling interval


def test_on_locked_raise_fails_with_locked_error(proj, start_worker, events_redis):
    from celery_singleton_lock import LockedError

    worker = start_worker(concurrency=2)
    first = proj.policy_raise.delay("k")
    wait_started(events_redis, 1)
    second = proj.policy_raise.delay("k")

    with pytest.raises(LockedError) as info:
        second.get(timeout=20)
    assert second.state == "FAILURE"
    assert first.id in str(info.value)
    assert first.get(timeout=20)
    # An expected outcome (Task.throws): one INFO line, no ERROR with a traceback.
    wait_for(lambda: f"[{second.id}] raised expected: LockedError" in worker.log(), 10, what="the duplicate's log line")
    assert f"[{second.id}] raised unexpected" not in worker.log()


def test_redis_stopped_at_acquire(proj, start_worker, events_redis, redis_server):
    from celery_singleton_lock import LockBackendError

    start_worker(concurrency=2, env={"CSL_LOCK_URL": redis_server.url})
    assert proj.error_run.delay("warm-up").get(timeout=20)  # the lock Redis works...
    redis_server.stop()  # ...and now it is gone

    retried = proj.error_retry.delay("a")
    ran = proj.error_run.delay("b")
    raised = proj.error_raise.delay("c")

    assert ran.get(timeout=30)["key"] == "b"  # on_lock_error="run": ran unguarded
    with pytest.raises(LockBackendError):
        raised.get(timeout=30)
    with pytest.raises(LockBackendError):
        retried.get(timeout=30)  # retried once (lock_retry_max=1), then gave up
    started = {e["key"] for e in records(events_redis, "started")}
    assert started == {"warm-up", "b"}  # the guarded ones never ran unguarded


def test_a_redelivered_message_does_not_run_beside_the_first_delivery(proj, start_worker, events_redis):
    env = {"CSL_VISIBILITY_TIMEOUT": "2", "CSL_ACKS_LATE": "1"}
    workers = [start_worker(concurrency=1, env=env) for _ in range(2)]
    result = proj.quick_ttl.delay("k", duration=9)  # outlives the visibility timeout several times

    def redelivered():
        restore_overdue(proj.app)
        return [w for w in workers if f"{result.id}] is a duplicate (ignore)" in w.log()]

    wait_for(redelivered, 30, interval=0.5, what="the broker to redeliver the message while it runs")
    assert result.get(timeout=40)["key"] == "k"
    intervals = records(events_redis)
    assert overlaps(intervals) == []
    assert len(intervals) == 1


@pytest.mark.parametrize("workers", [1, 2])
def test_a_message_redelivered_while_it_runs_never_runs_again(proj, start_worker, events_redis, broker_redis,
                                                             workers):
    # The broker hands the message out again every 2 s while its first delivery runs for 7 s (the
    # heartbeat renews every 10 s); with one worker the copies come after that delivery finished.
    env = {"CSL_VISIBILITY_TIMEOUT": "2", "CSL_ACKS_LATE": "1"}
    for _ in range(workers):
        start_worker(concurrency=1, env=env)
    result = proj.long_running.delay("k", duration=7)

    wait_for(lambda: restore_overdue(proj.app) or result.ready(), 40, interval=0.5, what="the first delivery")
    assert result.get(timeout=1)["key"] == "k"
    wait_for(lambda: restore_overdue(proj.app) or broker_redis.hlen(broker_key("unacked")) == 0
             and broker_redis.llen(broker_key("celery")) == 0,
             40, interval=0.5, what="every copy of the message handled")
    starts = [s for s in records(events_redis, "started") if s["id"] == result.id]
    assert len(starts) == 1, starts
    assert result.get(timeout=1)["pid"] == starts[0]["pid"]  # the first delivery's result stands


def test_a_redelivery_runs_when_the_first_delivery_died_holding_the_lock(proj, start_worker, events_redis):
    env = {"CSL_VISIBILITY_TIMEOUT": "2", "CSL_ACKS_LATE": "1"}
    doomed = start_worker(concurrency=1, env=env)
    result = proj.quick_ttl.delay("k", duration=4)  # lock_ttl=3, lock_heartbeat=1
    first = wait_started(events_redis, 1)[0]
    os.killpg(doomed.pid, signal.SIGKILL)  # dies holding the lock, message unacked
    killed_at = time.time()
    start_worker(concurrency=1, env=env)

    wait_for(lambda: restore_overdue(proj.app) or result.ready(), 40, interval=0.5, what="the redelivered copy")
    assert result.get(timeout=1)["key"] == "k"  # the redelivered copy ran: the task was not lost
    starts = records(events_redis, "started")
    assert [s["id"] for s in starts] == [result.id, result.id]
    assert starts[1]["pid"] != first["pid"]
    assert starts[1]["start"] >= killed_at  # after the dead holder's lock ran out, never beside it
