"""``lock_limit`` and ``lock_window`` through real prefork workers, judged from what the bodies recorded.

Given two workers and storms of calls over several keys, the bodies record their intervals
(and when their execution began asking for its place); the tests count, per key, how many
ran at once and how many started within a window.
"""

from __future__ import annotations

import os
import re
import signal
import time
from typing import List

import pytest

from tests.integration.helpers import by_key, lock_keys, most_at_once, records, settle
from tests.support.servers import wait_older_than
from tests.support.waits import wait_for

APP = "tests.integration.proj_limits"


@pytest.fixture
def limits_proj(proj):
    import tests.integration.proj_limits as module

    return module


def test_a_storm_over_10_keys_never_runs_more_than_3_of_a_key_and_reaches_3(limits_proj, start_worker,
                                                                            events_redis, lock_redis):
    # Given two prefork workers of four processes each
    for _ in range(2):
        start_worker(concurrency=4, app=APP)
    # When 10 keys get 5 calls each, each key's calls back to back
    calls = [(f"k{k}", n) for k in range(10) for n in range(5)]
    results = [limits_proj.limited.delay(key, seq=n) for key, n in calls]
    settle(results, 120)
    # then every call ran (the duplicates were re-queued until a place freed)
    intervals = records(events_redis)
    assert sorted((e["key"] for e in intervals)) == sorted(key for key, _ in calls)
    # and no key ever had more than 3 bodies running at once, and some key had 3
    most = {key: most_at_once(entries) for key, entries in by_key(intervals).items()}
    assert max(most.values()) == 3, most
    # and a holder that began asking after another holder of its key had finished has a larger fence
    for entries in by_key(intervals).values():
        assert all(a["fence"] < b["fence"] for a in entries for b in entries if a["end"] <= b["asked"])
        assert len({e["fence"] for e in entries}) == len(entries)
    # and every place is given back: nothing left but bookkeeping
    wait_for(lambda: not lock_keys(lock_redis), 10, what="every places key to go")


def _violations(entries: List[dict], limit: int, window: float) -> List[List[dict]]:
    """Sets of more than ``limit`` calls whose places were granted within ``window`` seconds: a place
    is granted between ``asked`` and ``start``, so limit + 1 calls whose latest start is less than
    ``window`` after their earliest ask were granted closer together than the window allows."""
    ordered = sorted(entries, key=lambda e: e["start"])
    found = []
    for last in range(len(ordered)):
        inside = [e for e in ordered[:last + 1] if ordered[last]["start"] - e["asked"] < window]
        if len(inside) > limit:
            found.append(inside)
    return found


def test_a_window_of_2s_never_starts_more_than_5_of_a_key_and_starts_5_in_some(limits_proj, start_worker,
                                                                                 events_redis):
    for _ in range(2):
        start_worker(concurrency=4, app=APP)
    # When 3 keys get 12 near-instant calls each (lock_retry_delay is 60 s: only the window's
    # end brings a re-queued call back in time)
    calls = [(f"w{k}", n) for k in range(3) for n in range(12)]
    results = [limits_proj.windowed.delay(key, seq=n) for key, n in calls]
    settle(results, 60)
    intervals = records(events_redis)
    assert len(intervals) == len(calls)
    for key, entries in by_key(intervals).items():
        # then no more than 5 of a key were granted in any 2 s span
        assert _violations(entries, 5, 2.0) == [], key
        # and 5 started in some 2 s span
        starts = sorted(e["start"] for e in entries)
        assert any(b - a < 2.0 for a, b in zip(starts, starts[4:])), (key, starts)
        # and the re-queued calls came back just after a window's end, not lock_retry_delay later
        assert max(starts) - min(starts) < 12, (key, starts)


def test_a_killed_child_frees_its_place_at_once(limits_proj, start_worker, events_redis, lock_redis):
    worker = start_worker(concurrency=2, app=APP)
    # Given two long runs holding both places of a key
    first = [limits_proj.limited_long.delay("kk", seq=n) for n in range(2)]
    wait_for(lambda: len(worker.children()) == 2 and _held(lock_redis) == 2, 20, what="both places taken")
    # When one pool child is killed
    os.kill(worker.children()[0], signal.SIGKILL)
    # then its place is given back by the worker's main process, long before its ttl (30 s)
    wait_for(lambda: _held(lock_redis) == 1, 5, what="the killed child's place to free")
    for result in first:
        result.revoke(terminate=True)


def _held(lock_redis) -> int:
    keys = lock_keys(lock_redis)
    return sum(1 for key in keys for field, value in lock_redis.hgetall(key).items()
               if not field.startswith("~") and not value.startswith("released "))


def _sent(beat) -> int:
    return beat.log().count("Sending due task tick")


@pytest.mark.parametrize("duration", [0.0, 3.0], ids=["instant-body", "body-longer-than-the-period"])
def test_two_beats_a_tick_apart_run_the_job_once_per_tick(limits_proj, start_worker, events_redis, duration):
    # Given a worker and two beat processes with the same 2 s interval schedule (separate schedule
    # files), the second started 0.7 s after the first, both publishing the recipe's job
    start_worker(concurrency=4, app=APP)
    env = {"CSL_TICK_DURATION": str(duration)}
    first = start_worker.beat(env=env, app=APP)
    time.sleep(0.7)  # the offset under test, not a wait for anything
    second = start_worker.beat(env=env, app=APP)
    # When both have published for a while (each tick twice)
    wait_for(lambda: _sent(second) >= 6, 30, interval=0.2, what="six ticks of the second beat")
    first.stop()
    second.stop()
    ticks = max(_sent(first), _sent(second))  # a tick either beat published (the second may send one more as they stop)
    wait_for(lambda: all(e["end"] for e in records(events_redis)), 10, what="the last run to end")
    starts = sorted(e["start"] for e in records(events_redis))
    # then no tick ran twice: runs are a period apart (less the beats' jitter), never two per tick
    assert all(b - a > 0.9 * limits_proj.PERIOD for a, b in zip(starts, starts[1:])), starts
    if duration < limits_proj.PERIOD:
        # and every tick ran once (the last may still have been on its way). The beats' real offset
        # is 0.7 s plus the second's start-up, so it can land just past the window: then the first
        # beat's first tick runs and the second beat leads every tick after it, one run more than
        # either beat's count, still a period apart.
        assert ticks - 1 <= len(starts) <= ticks + 1, (ticks, starts)
    else:
        # and a run that outlasts the period skips the ticks it covers: one run per tick it starts in
        assert len(starts) >= ticks // 2 - 1, (ticks, starts)


def test_queued_or_running_counts_calls_from_publish_to_end(limits_proj, start_worker, events_redis, lock_redis):
    # Given no worker yet, when five calls of one key are published under lock_limit=2
    results = [limits_proj.qor_limited.delay("q", seq=n) for n in range(5)]
    # then two are published, and the other three answer with a holder's result, publishing nothing
    published = {r.id for r in results[:2]}
    assert all(r.id in published for r in results[2:])
    start_worker(concurrency=4, app=APP)
    settle(results[:2], 30)
    assert len(records(events_redis)) == 2
    wait_for(lambda: not lock_keys(lock_redis), 10, what="every places key to go")


def test_queued_lets_up_to_the_limit_wait_beside_up_to_the_limit_running(limits_proj, start_worker, events_redis):
    # Given no worker yet, when four calls of one key are published under lock_limit=2
    first = [limits_proj.queued_limited.delay("k", seq=n) for n in range(4)]
    # then two wait in the queue; the others were skipped at enqueue
    assert len({r.id for r in first}) == 2
    # When a worker runs the two, and four more are published while they run
    start_worker(concurrency=4, app=APP)
    wait_for(lambda: len(records(events_redis, "intervals")) == 0 and _places_running(limits_proj), 20,
             what="both to run")
    second = [limits_proj.queued_limited.delay("k", seq=n) for n in range(4, 8)]
    # then two more queue beside the two running, and every queued call runs in the end
    assert len({r.id for r in second}) == 2
    settle(first + second, 60)
    intervals = records(events_redis)
    assert len(intervals) == 4
    assert most_at_once(intervals) <= 2


def test_calls_whose_limit_function_answers_differently_share_one_count(limits_proj, start_worker,
                                                                         events_redis, lock_redis):
    start_worker(concurrency=4, app=APP)
    # Given three long calls of one key whose lock_limit function answers 3, all running
    first = [limits_proj.varied.delay("v", seq=n, limit=3) for n in range(3)]
    wait_for(lambda: _held(lock_redis) == 3, 20, what="three places taken")
    # When a call of the same key whose function answers 1 comes
    lone = limits_proj.varied.delay("v", seq=3, limit=1)
    # then it meets the three (one count for the key) and is refused, its body not run
    with pytest.raises(Exception, match="is held by task"):
        lone.get(timeout=20)
    settle(first, 30)
    intervals = records(events_redis)
    assert sorted(e["id"] for e in intervals) == sorted(r.id for r in first)
    assert most_at_once(intervals) == 3


def test_a_forced_clear_ends_a_window(limits_proj, start_worker, events_redis, lock_redis):
    from tests.integration.test_cli import run_cli

    _store_older_than(lock_redis, 20)
    start_worker(concurrency=2, app=APP)
    # Given a key run once under a window of 20 s, whose next call is refused
    assert limits_proj.once_per_20s.delay("c", seq=0).get(timeout=20) == 0
    assert limits_proj.once_per_20s.delay("c", seq=1).get(timeout=20) is None
    (key,) = lock_keys(lock_redis)
    # When an operator clears the key with --force
    forced = run_cli("clear", "--force", key)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    # then the window is over: the next call runs at once
    assert limits_proj.once_per_20s.delay("c", seq=2).get(timeout=20) == 2
    assert sorted(e["key"] for e in records(events_redis)) == ["c", "c"]


def test_a_refusal_by_a_window_logs_when_the_window_frees_not_the_lease(limits_proj, start_worker, lock_redis):
    worker = start_worker(concurrency=2, app=APP)
    # Given a key under a window of 2 s (lock_ttl 30 s) whose place a 1 s run holds
    first = limits_proj.twice_in_2s.delay("f", seq=0, duration=1.0)
    wait_for(lambda: _held(lock_redis) == 1, 20, what="the place taken")
    # When a second call comes meanwhile, it is refused
    assert limits_proj.twice_in_2s.delay("f", seq=1).get(timeout=20) is None
    assert first.get(timeout=20) == 0
    # then its log says the place frees when the window ends, within 2 s, not in the lease's 30 s
    wait_for(lambda: "is a duplicate (skip)" in worker.log(), 10, what="the refusal's log line")
    line = next(line for line in worker.log().splitlines() if "is a duplicate (skip)" in line)
    frees = re.search(r"the soonest frees in (\S+)s, when its window ends", line)
    assert frees and float(frees.group(1)) <= 2.0, line


def test_a_backlog_behind_a_window_is_re_queued_about_once_per_call(limits_proj, start_worker, events_redis):
    for _ in range(2):
        start_worker(concurrency=4, app=APP)
    # Given a key that starts 2 calls per 2 s window, when 16 calls come at once
    results = [limits_proj.two_per_2s.delay("b", seq=n) for n in range(16)]
    settle(results, 90)
    intervals = records(events_redis)
    # then every call ran, never more than 2 in a window
    assert len(intervals) == 16
    assert _violations(intervals, 2, 2.0) == []
    # and each waiting call came back about once, when a place was its (not at every window's end)
    requeues = sorted(e["requeues"] for e in intervals)
    assert sum(requeues) <= 1.5 * 14 and max(requeues) <= 3, requeues
    # and the calls ran as the windows allowed (8 windows of 2 s, lock_retry_delay being 60 s)
    starts = sorted(e["start"] for e in intervals)
    assert starts[-1] - starts[0] < 8 * 2.0 + 4, starts


def _places_running(limits_proj) -> bool:
    workers = limits_proj.app.control.inspect(timeout=0.5).active() or {}
    return sum(len(tasks) for tasks in workers.values()) == 2


def test_a_killed_worker_frees_its_places_within_lock_ttl(limits_proj, start_worker, lock_redis):
    worker = start_worker(concurrency=2, app=APP)
    # Given both places of a key held by a worker's long runs (lock_ttl 3 s)
    results = [limits_proj.limited_short_ttl.delay("kw", seq=n) for n in range(2)]
    wait_for(lambda: _held(lock_redis) == 2, 20, what="both places taken")
    # When the whole worker is killed (nobody is left to release)
    worker.kill()
    # then both places free once their leases run out, within lock_ttl
    wait_for(lambda: _held(lock_redis) == 0, 3 + 1, interval=0.05, promise=True,
             what="the dead worker's places to free")
    assert len(results) == 2


def _store_older_than(lock_redis, window: float) -> None:
    """Wait until the lock store is older than ``window``: a younger one grants no place of a key with that
    window (it cannot tell a fresh start from a restart that lost the places of the window before)."""
    wait_older_than(lock_redis, window)
