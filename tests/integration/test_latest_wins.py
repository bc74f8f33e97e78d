"""The newest call of a key wins: ``lock_debounce`` (with and without ``lock_debounce_max``) and
``on_locked="replace"``, in real workers, judged from what the bodies recorded."""

from __future__ import annotations

import importlib
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from typing import List

import pytest

from celery_singleton_lock import superseded
from tests.integration.helpers import lock_field, lock_keys, overlaps, records, restore_overdue, wait_started
from tests.integration.topo import app_on
from tests.support.servers import RedisServer
from tests.support.waits import wait_for

APP = "tests.integration.proj_latest"


@pytest.fixture
def latest(proj):
    """The app's tasks where the newest call wins (imported once the environment names our servers)."""
    return importlib.import_module(APP)


def _burst(task, calls: int, seconds: float, key: str = "k") -> List[tuple]:
    """``calls`` calls of one key spread over ``seconds``: (when each was made, its AsyncResult)."""
    made = []
    start = time.monotonic()
    for n in range(calls):
        pause = start + n * seconds / (calls - 1) - time.monotonic()
        if pause > 0:
            time.sleep(pause)  # pacing the caller, not waiting for the worker
        made.append((time.time(), task.delay(key, n)))
    return made


def _all_ready(made: List[tuple], timeout: float) -> None:
    wait_for(lambda: all(result.ready() for _, result in made), timeout, interval=0.1,
             what="every call's result to be ready")


def _settled(events_redis, seconds: float) -> list:
    """The runs recorded, once none started for ``seconds`` (nothing is left to run)."""
    def quiet():
        runs = records(events_redis, "started")
        last_start = max((run["start"] for run in runs), default=0.0)
        return runs if runs and time.time() - last_start > seconds else None
    wait_for(quiet, 30, interval=0.1, what="the runs to settle")
    return records(events_redis)


def test_a_burst_of_100_debounced_calls_runs_once_with_the_last_arguments(latest, start_worker, events_redis):
    # Given a worker and a task debounced by 0.5 s
    start_worker(app=APP, concurrency=2)
    # When one key is called 100 times over 2 s
    made = _burst(latest.debounced, 100, 2.0)
    # Then every one of the 100 results gets ready
    _all_ready(made, 20)
    runs = _settled(events_redis, 1.5)
    # and the key ran exactly once, with the 100th call's arguments, 0.5 s after that call (within 1 s)
    assert [run["payload"] for run in runs] == [99], runs
    waited = runs[0]["start"] - made[-1][0]
    assert 0.5 <= waited <= 1.5, waited
    assert made[-1][1].get(timeout=5) == {"key": "k", "payload": 99}
    assert {result.get(timeout=5) for _, result in made[:-1]} == {None}


def test_a_burst_that_never_goes_quiet_runs_within_its_max_and_ends_with_the_last_arguments(
        latest, start_worker, events_redis):
    # Given a task debounced by 0.5 s with lock_debounce_max=1
    start_worker(app=APP, concurrency=2)
    # When one key is called 40 times over 2 s (never 0.5 s quiet; a pace a worker sharing two
    # cores with other test runs still skips superseded calls at, so the one due at the cap is
    # still the newest when that worker reaches it)
    made = _burst(latest.debounced_max, 40, 2.0)
    _all_ready(made, 30)
    runs = _settled(events_redis, 1.5)
    # Then a run started about 1 s after the first call, the last run carries the last call's
    # arguments, and runs of the key never overlapped
    assert runs, "nothing ran"
    assert min(run["start"] for run in runs) - made[0][0] <= 1.5, runs
    assert sorted(runs, key=lambda run: run["start"])[-1]["payload"] == 39, runs
    assert not overlaps(runs)
    assert len(runs) <= 4, runs  # one per max-long stretch of the burst, and the last


def test_at_its_cap_a_burst_runs_its_newest_call_and_each_call_that_ran_answers_its_own_result(
        latest, start_worker, events_redis):
    # Given a task debounced by 0.5 s with lock_debounce_max=1
    start_worker(app=APP, concurrency=2)
    # When one key is called every 0.2 s for 4 s (never 0.5 s quiet: a run at each cap)
    made = _burst(latest.debounced_max, 21, 4.0)
    _all_ready(made, 30)
    runs = sorted(_settled(events_redis, 1.5), key=lambda run: run["start"])
    answers = [result.get(timeout=5) for _, result in made]
    ran = [run["payload"] for run in runs]
    # Then the calls that ran are the calls whose result is not None, and each answers its own run
    assert len(runs) >= 3 and len(set(ran)) == len(ran), runs
    assert [n for n, answer in enumerate(answers) if answer is not None] == sorted(ran), (answers, runs)
    assert all(answers[n] == {"key": "k", "payload": n} for n in ran), answers
    # and each run is the newest call made before it started (publishing takes well under 0.15 s)
    for run in runs:
        newer = [n for n, (when, _) in enumerate(made) if n > run["payload"] and when < run["start"] - 0.15]
        assert not newer, (run, newer, runs)
    assert ran[-1] == 20 and not overlaps(runs)


@pytest.mark.parametrize("failure, seen", [(KeyboardInterrupt, KeyboardInterrupt), (ConnectionError, Exception)])
def test_a_burst_whose_last_publish_fails_still_runs_once_with_the_last_published_call(
        latest, start_worker, events_redis, monkeypatch, failure, seen):
    # Given a worker and a task debounced by 0.5 s, called 10 times
    start_worker(app=APP, concurrency=2)
    made = _burst(latest.debounced, 10, 0.5)
    # When the 11th call's publish raises in the publisher (the broker refuses it, ^C in beat)
    def refuse(*args, **kwargs):
        raise failure("the broker refused the message")
    monkeypatch.setattr(latest.app.amqp, "send_task_message", refuse)
    with pytest.raises(seen):  # kombu wraps a connection error in its OperationalError
        latest.debounced.delay("k", 10)
    monkeypatch.undo()
    # Then the burst ran once, with the last call that was published, which answers its own result
    _all_ready(made, 20)
    runs = _settled(events_redis, 1.5)
    assert [run["payload"] for run in runs] == [9], runs
    assert made[-1][1].get(timeout=5) == {"key": "k", "payload": 9}


def test_a_call_whose_publisher_died_right_after_publishing_it_still_runs(latest, start_worker, events_redis,
                                                                          monkeypatch):
    from celery_singleton_lock.store.generations import RedisGenerations

    # Given a worker and a task debounced by 0.5 s, called 10 times
    start_worker(app=APP, concurrency=2)
    made = _burst(latest.debounced, 10, 0.5)
    # When the 11th call is published, and its publisher stops before recording it as the newest
    def died(*args, **kwargs):
        raise KeyboardInterrupt("the publisher stopped")
    monkeypatch.setattr(RedisGenerations, "supersede", died)
    last = latest.debounced.AsyncResult("unrecorded-call")
    with pytest.raises(KeyboardInterrupt):
        latest.debounced.apply_async(("k", 10), task_id=last.id)
    monkeypatch.undo()
    # Then the 11th call runs, answering its own result, and it alone: nothing of the burst is lost,
    # and the 10th (never told it was displaced) waits for the 11th's message instead of running
    assert last.get(timeout=20) == {"key": "k", "payload": 10}
    _all_ready(made, 20)
    runs = _settled(events_redis, 2.5)
    assert [run["payload"] for run in runs] == [10], runs
    assert {result.get(timeout=5) for _, result in made} == {None}


_PUBLISHER = """
import sys, time
from tests.integration import proj_latest
for n in range(40):
    proj_latest.debounced.delay(sys.argv[1], n)
    if n == 0:
        print("publishing", flush=True)
    time.sleep(0.01)
"""


def test_publishers_killed_mid_burst_lose_no_burst_and_run_none_twice(latest, start_worker, events_redis):
    # Given a worker and a task debounced by 0.5 s
    start_worker(app=APP, concurrency=2)
    rng = random.Random(7)
    keys = [f"killed-{n}" for n in range(12)]
    for key in keys:
        # When a publisher process calls one key 40 times in a row and is SIGKILLed mid-burst
        publisher = subprocess.Popen([sys.executable, "-c", _PUBLISHER, key], env=dict(os.environ),
                                     stdout=subprocess.PIPE)
        assert publisher.stdout is not None
        publisher.stdout.readline()  # its first call is out
        time.sleep(rng.uniform(0.0, 0.3))  # pacing the kill, not waiting for the worker
        publisher.kill()
        publisher.wait()
        publisher.stdout.close()
    # Then every key's burst ran, and none ran twice
    wait_for(lambda: {run["key"] for run in records(events_redis, "started")} >= set(keys), 30, interval=0.2,
             what="every killed publisher's burst to run")
    runs = _settled(events_redis, 2.5)
    assert [key for key, n in Counter(run["key"] for run in runs).items() if n > 1] == [], runs


_DIES_AT_PUBLISH = """
import os, sys
from celery.signals import before_task_publish
from tests.integration import proj_latest
before_task_publish.connect(lambda **kwargs: os._exit(9), weak=False)
proj_latest.replaced_qor.delay(sys.argv[1], 0)
"""


def test_the_newest_call_takes_over_an_enqueue_lock_whose_publisher_died_before_publishing(latest, start_worker,
                                                                                           events_redis, lock_redis):
    # Given a worker, and a queued_or_running replace task whose first call of a key took the key's
    # enqueue lock at publish, and whose publisher was killed before the message went out
    start_worker(app=APP, concurrency=2)
    died = subprocess.run([sys.executable, "-c", _DIES_AT_PUBLISH, "orphan"], env=dict(os.environ), timeout=60)
    assert died.returncode == 9
    assert [lock_field(lock_redis, key, "state") for key in _locks(lock_redis)] == ["queued"]
    # When a newer call of the key is made
    newer = latest.replaced_qor.delay("orphan", 1, duration=0.1)
    # Then it runs now, with its own arguments, not after lock_queue_ttl, and leaves nothing locked
    assert newer.get(timeout=20) == {"key": "orphan", "payload": 1}
    assert [run["payload"] for run in records(events_redis, "started")] == [1]
    wait_for(lambda: _locks(lock_redis) == [], 5, what="the lock to be released")


def _locks(lock_redis) -> list:
    """The lock keys, without the hashes that name each key's newest call."""
    return [key for key in lock_keys(lock_redis) if not key.endswith(":gen")]


@pytest.mark.parametrize("name", ["replaced", "replaced_qor"])
def test_replace_runs_the_newest_of_20_waiting_calls_after_the_running_one(latest, start_worker, events_redis,
                                                                           name):
    # Given a queued(_or_running)-scope task whose newest call replaces the waiting one, one copy running
    task = getattr(latest, name)
    start_worker(app=APP, concurrency=2)
    first = task.delay("k", 0)
    wait_started(events_redis, 1)
    # When 20 more calls with different payloads are made while it runs
    made = [(time.time(), task.delay("k", n)) for n in range(1, 21)]
    # Then every result gets ready, and exactly two runs happened: the first, then the 20th payload
    _all_ready([(0, first)] + made, 20)
    runs = sorted(_settled(events_redis, 1.5), key=lambda run: run["start"])
    assert [run["payload"] for run in runs] == [0, 20], runs
    assert not overlaps(runs)
    assert {result.get(timeout=5) for _, result in made[:-1]} == {None}


def test_a_superseded_call_says_so_in_the_redis_result_backend_and_still_answers_none(latest, start_worker,
                                                                                       events_redis):
    # Given a worker and a caller storing extended results in the Redis result backend, a replace
    # task's first call of a key running
    conf = latest.app.conf
    before = conf.result_extended
    conf.result_extended = True
    try:
        start_worker(app=APP, concurrency=2, env={"CSL_RESULT_EXTENDED": "1"})
        first = latest.replaced.delay("s", 0, duration=1.0)
        wait_started(events_redis, 1)
        # When two more calls are made while it runs: the second takes the waiting one's place
        waiting = latest.replaced.delay("s", 1)
        newest_call = latest.replaced.delay("s", 2, duration=0.1)
        _all_ready([(0, first), (0, waiting), (0, newest_call)], 20)
        # Then the superseded call answers None, as a run that returned None would, and says it was superseded
        assert waiting.get(timeout=5) is None
        assert superseded(waiting)
        meta = latest.app.backend.get_task_meta(waiting.id)
        assert meta["singleton_lock_superseded_by"] == newest_call.id
        # and the calls that ran do not
        assert newest_call.get(timeout=5) == {"key": "s", "payload": 2}
        assert not superseded(first) and not superseded(newest_call)
    finally:
        conf.result_extended = before


@pytest.mark.parametrize("name", ["replaced_default", "debounced_default"])
def test_the_newest_call_starts_as_soon_as_the_run_it_waits_behind_ends(latest, start_worker, events_redis, name):
    # Given a task whose newest call wins, with the default lock_retry_delay (5 s), one 1 s run going
    task = getattr(latest, name)
    start_worker(app=APP, concurrency=3)
    first = task.delay("k", 0, 1.0)
    wait_started(events_redis, 1)
    # When three more calls are made while it runs
    made = [(time.time(), task.delay("k", n)) for n in range(1, 4)]
    _all_ready([(0, first)] + made, 20)
    runs = sorted(_settled(events_redis, 1.5), key=lambda run: run["start"])
    # Then the newest ran after the first, as soon as the first ended (not lock_retry_delay later),
    # and the others ended superseded
    assert [run["payload"] for run in runs] == [0, 3], runs
    assert not overlaps(runs)
    assert runs[1]["start"] - runs[0]["end"] < 0.6, runs
    assert [result.get(timeout=5) for _, result in made] == [None, None, {"key": "k", "payload": 3}]


def test_a_worker_killed_in_the_middle_of_a_burst_loses_nothing_and_runs_nothing_twice(
        latest, start_worker, events_redis):
    # Given a worker that holds a debounced burst, its messages waiting for their countdowns
    env = {"CSL_VISIBILITY_TIMEOUT": "2"}
    doomed = start_worker(app=APP, concurrency=2, env=env)
    made = _burst(latest.debounced_long, 20, 0.4)
    wait_for(lambda: doomed.log().count(" received") >= 20, 10, what="the worker to hold all 20 messages")
    # When it is killed (kill -9) before the quiet period (2 s) ends, and another worker takes over
    doomed.kill()
    assert not records(events_redis, "started")
    start_worker(app=APP, concurrency=2, env=env)
    wait_for(lambda: restore_overdue(latest.app) or records(events_redis, "started"), 20, interval=0.5,
             what="the killed worker's messages to be handed out again and the key to run")
    # Then the key ran once, with the last call's arguments, and every result is ready
    _all_ready(made, 20)
    runs = _settled(events_redis, 1.5)
    assert [run["payload"] for run in runs] == [19], runs


def test_a_lock_store_restarted_empty_in_the_middle_of_a_burst_still_runs_the_last_call_once(
        latest, start_worker, events_redis):
    # Given a worker and a publisher on a lock store of their own
    with RedisServer() as lock_server, app_on(latest, lock_server.url):
        start_worker(app=APP, concurrency=2, env={"CSL_LOCK_URL": lock_server.url})
        # When the store restarts without its data before the burst's messages are due
        made = _burst(latest.debounced, 20, 0.4)
        lock_server.stop()
        lock_server.start(settle=False)
        # Then every result is ready, and the key ran once, with the last call's arguments
        _all_ready(made, 30)
        runs = _settled(events_redis, 1.5)
        assert [run["payload"] for run in runs] == [19], runs
        # And a burst after the restart runs its own last call once
        events_redis.delete("started", "intervals")
        made = _burst(latest.debounced, 20, 0.4)
        _all_ready(made, 30)
        assert [run["payload"] for run in _settled(events_redis, 1.5)] == [19]


def test_a_debounced_message_handed_out_twice_past_the_visibility_timeout_runs_once(
        latest, start_worker, events_redis):
    # Given a one-process worker whose broker hands a message out again after 1 s unacknowledged (one
    # process: the second copy runs after the first has ended and let go of the lock)
    worker = start_worker(app=APP, concurrency=1, env={"CSL_VISIBILITY_TIMEOUT": "1"})
    # When a call debounced by 2 s waits in the worker past that, and the broker hands it out again
    result = latest.debounced_long.delay("k", "only")
    wait_for(lambda: restore_overdue(latest.app, visibility_timeout=1.0) or worker.log().count(" received") >= 2,
             10, interval=0.3, what="the broker to hand the waiting message out a second time")
    # Then the call ran once, and its result is its run's
    assert result.get(timeout=10) == {"key": "k", "payload": "only"}
    runs = _settled(events_redis, 1.5)
    assert [run["payload"] for run in runs] == ["only"], runs


def test_groups_and_chains_of_debounced_calls_end_ready_and_run_the_newest_once(latest, start_worker,
                                                                               events_redis):
    from celery import chain, group

    start_worker(app=APP, concurrency=2)
    # Given a group of five calls of one key, and a chain whose first step is a call of another
    members = group(latest.debounced.s("g", n) for n in range(5)).apply_async()
    chained = chain(latest.debounced.s("c", "first"), latest.collect.s()).apply_async()
    superseded_step = latest.debounced.delay("c2", "old")
    follows = chain(latest.debounced.s("c2", "old-chain"), latest.collect.s()).apply_async()
    latest.debounced.delay("c2", "newest")
    # Then the group's newest member ran, the others ended superseded, and both chains went on
    assert members.get(timeout=20) == [None, None, None, None, {"key": "g", "payload": 4}]
    assert chained.get(timeout=20) == {"key": "c", "payload": "first"}
    assert follows.get(timeout=20) is None  # its first step was superseded: the chain goes on with None
    assert superseded_step.get(timeout=5) is None
    runs = _settled(events_redis, 1.5)
    assert sorted((run["key"], run["payload"]) for run in runs) == [("c", "first"), ("c2", "newest"), ("g", 4)]


def _calls_made(lock_redis) -> int:
    """How many calls of the key were published: the newest generation its hash names."""
    return max((int(lock_redis.hget(key, "gen") or 0) for key in lock_redis.scan_iter("*:gen")), default=0)


def test_calls_from_celery_beat_quicker_than_the_quiet_period_run_once_after_the_last(latest, start_worker,
                                                                                      events_redis, lock_redis):
    # Given a worker, and celery beat calling a task debounced by 0.5 s every 0.2 s
    start_worker(app=APP, concurrency=2)
    beat = start_worker.beat(app=APP, env={"CSL_BEAT_LATEST": "debounced"})
    # When beat has called it for a while, then stops
    wait_for(lambda: _calls_made(lock_redis) >= 12, 20, interval=0.1, what="beat's burst of calls")
    beat.stop()  # SIGTERM: beat may be in the middle of a publish, which then withdraws its call
    stopped = time.time()
    # Then the burst ran once, a quiet period after beat's last published call (the key's newest
    # generation: the server's clock in microseconds when it was made)
    runs = _settled(events_redis, 2.0)
    assert len(runs) == 1 and _calls_made(lock_redis) >= 12, runs
    last_call = _calls_made(lock_redis) / 1e6
    assert last_call + 0.5 - 0.05 <= runs[0]["start"] <= stopped + 0.5 + 1.0, (runs, last_call, stopped)
