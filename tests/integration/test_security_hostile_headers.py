"""Garbage in the library's message headers neither crashes a worker nor lets two runs of a key overlap.

Given messages sent by name (no ``LockedTask`` at hand, as any publisher can) whose
``singleton_lock_*`` headers hold wrong types, huge values and tokens of locks that
do not exist, when a real worker receives several of them for one key at once,
then each ends in a ready state, no two runs of the key overlap, and the worker
logs no traceback.
"""

from __future__ import annotations

from typing import Any, Dict, List

from celery_singleton_lock.calls import headers
from tests.integration.helpers import overlaps, records, wait_unlocked
from tests.support.waits import wait_for

GARBAGE: List[Dict[str, Any]] = [
    {headers.ENQUEUE_TOKEN: 12345, headers.ENQUEUE_DIGEST: {"not": "a digest"}, headers.RETRIES: "NaN"},
    {headers.ENQUEUE_TOKEN: ["a", "list"], headers.ENQUEUE_DIGEST: "../" * 1000, headers.RETRIES: -1},
    {headers.ENQUEUE_TOKEN: "x" * 200_000, headers.ENQUEUE_DIGEST: "f" * 32, headers.RETRIES: 10 ** 30},
    {headers.AFTER: "a-token-nobody-holds", headers.TOKEN: "chosen-by-the-publisher"},
    {headers.AFTER: {"a": ["b"]}, headers.ENQUEUE_TOKEN: None, headers.RETRIES: 2.5},
]


def test_garbage_headers_are_harmless(proj, start_worker, events_redis, lock_redis):
    worker = start_worker(concurrency=4)
    sent = [proj.app.send_task(task.name, (task.name,), {"duration": 0.5}, headers=garbage)
            for task in (proj.storm, proj.qor_job) for garbage in GARBAGE]  # one key per task

    outcomes = [result.get(timeout=60) for result in sent]

    intervals = records(events_redis)
    assert intervals and overlaps(intervals) == []
    assert {o["key"] for o in outcomes if o} == {proj.storm.name, proj.qor_job.name}
    wait_unlocked(lock_redis, 10)
    assert "Traceback" not in worker.log(), worker.log()


FORGED_GENERATIONS = [str(2 ** 53), str(2 ** 53 + 1), "9" * 30, "-5", "1e20", 2 ** 60, "0x10", "\uff11\uff12"]


def test_a_forged_generation_neither_runs_ahead_nor_silences_its_key(proj, start_worker, events_redis, lock_redis):
    # Given a debounced task, and for each of several keys a message sent by name with a generation
    # the store never handed out (past what Lua counts exactly, not a number, negative, ...)
    import importlib

    latest = importlib.import_module("tests.integration.proj_latest")
    start_worker(app="tests.integration.proj_latest", concurrency=2)
    keys = [f"hostile-{n}" for n in range(len(FORGED_GENERATIONS))]
    forged = [latest.app.send_task(latest.debounced.name, (key, "forged"), headers={headers.GENERATION: value})
              for key, value in zip(keys, FORGED_GENERATIONS)]
    for result in forged:
        result.get(timeout=60)  # each ends (judged as a call published without a generation)
    # When each key is then called as usual, three times in a row
    calls = {key: [latest.debounced.delay(key, n) for n in range(3)] for key in keys}
    # Then for every key the newest of those runs, with its own arguments, once, and the two before it
    # were superseded
    for key, made in calls.items():
        assert made[-1].get(timeout=30) == {"key": key, "payload": 2}, key
        assert [call.get(timeout=10) for call in made[:-1]] == [None, None], key
    ran = [(run["key"], run["payload"]) for run in records(events_redis) if run["payload"] != "forged"]
    assert sorted(ran) == sorted((key, 2) for key in keys), ran
    # and every generation the store keeps stays an exact integer below 2**52
    for name in lock_redis.scan_iter(match="*:gen"):
        for field in ("gen", "claimed"):
            value = lock_redis.hget(name, field)
            assert value is None or 0 < int(value) < headers.MAX_GENERATION, (name, field, value)


def test_a_generation_header_passed_to_apply_async_is_replaced_and_the_call_is_the_newest(
        proj, start_worker, events_redis, lock_redis):
    # Given a replace task whose first call of a key runs, and a second call waiting
    import importlib

    latest = importlib.import_module("tests.integration.proj_latest")
    start_worker(app="tests.integration.proj_latest", concurrency=2)
    first = latest.replaced.delay("own-header", 0, duration=1.0)
    wait_for(lambda: records(events_redis, "started"), 20, what="the first call to start")
    waiting = latest.replaced.delay("own-header", 1, duration=0.1)
    # When a caller passes its own singleton_lock_generation (an old one) to apply_async
    newest = latest.replaced.apply_async(("own-header", 2), {"duration": 0.1}, headers={headers.GENERATION: "1"})
    # Then that call is stamped the newest as any other: it runs, after the first, and the waiting one is
    # superseded (with its header obeyed, the waiting call would run and this one be superseded)
    assert newest.get(timeout=30) == {"key": "own-header", "payload": 2}
    assert waiting.get(timeout=10) is None
    assert first.get(timeout=10) == {"key": "own-header", "payload": 0}
    assert sorted(run["payload"] for run in records(events_redis)) == [0, 2]


def test_a_retries_header_passed_to_apply_async_does_not_skip_the_enqueue_lock(proj, start_worker, events_redis,
                                                                              lock_redis):
    # Given a queued_or_running task's call of a key published (its enqueue lock taken)
    start_worker(concurrency=2)
    held = proj.qor_job.delay("own-retries", 2.0)
    # When a caller passes the library's own retry headers to apply_async for the same key
    again = proj.qor_job.apply_async(("own-retries",), headers={headers.RETRIES: 1, headers.ENQUEUE_TOKEN: "x"})
    # Then it is the duplicate it is: nothing is published, the caller gets the holder's result
    assert again.id == held.id
    held.get(timeout=30)
    assert len(records(events_redis)) == 1
