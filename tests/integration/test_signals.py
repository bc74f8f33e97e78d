"""The library's signals, connected by a user's module in a real worker.

Given a worker whose app module connects receivers to ``lock_acquired``,
``lock_conflict`` and ``lock_released``, when a call runs and a duplicate of it is
skipped, then each signal arrives once, naming the task, the key and the holder,
and ``lock_released`` comes as the task ends, not a heartbeat period later. Under
``on_locked="replace"`` the newest call is no duplicate: only the call it superseded
is told, once.
"""

from __future__ import annotations

import importlib
import json

from celery_singleton_lock import lock_conflict
from tests.integration.helpers import wait_started
from tests.support.waits import wait_for

APP = "tests.integration.proj_signals"


def _signals(events_redis, name=None):
    sent = [json.loads(entry) for entry in events_redis.lrange("signals", 0, -1)]
    return [s for s in sent if name is None or s["signal"] == name]


def test_connected_receivers_hear_acquire_conflict_and_a_prompt_release(proj, start_worker, events_redis):
    start_worker(concurrency=2, app=APP)
    first = proj.sync.delay(5, duration=1.0)  # lock_ttl 30: the heartbeat period is 10 s
    wait_started(events_redis, 1)
    duplicate = proj.sync.delay(5)

    assert duplicate.get(timeout=20) is None
    outcome = first.get(timeout=20)
    released = wait_for(lambda: _signals(events_redis, "lock_released"), 5, promise=True,
                        what="lock_released within half a heartbeat period")

    acquired = _signals(events_redis, "lock_acquired")
    conflicts = _signals(events_redis, "lock_conflict")
    assert [(s["task_id"], s["task"]) for s in acquired] == [(first.id, "tests.integration.proj.sync")]
    assert [(s["task_id"], s["holder"], s["action"], s["at"]) for s in conflicts] == [
        (duplicate.id, first.id, "skip", "run")]
    assert [(s["task_id"], s["released"]) for s in released] == [(first.id, True)]
    assert acquired[0]["key"] == conflicts[0]["key"] == released[0]["key"]
    assert outcome["key"] == 5


def test_under_replace_only_the_superseded_call_hears_lock_conflict(proj, start_worker, events_redis):
    latest = importlib.import_module("tests.integration.proj_latest")
    start_worker(concurrency=2, app=APP)
    heard = []

    def publisher_side(sender=None, **kwargs):
        heard.append(kwargs)

    lock_conflict.connect(publisher_side, weak=False)
    try:
        first = latest.replaced.delay("k", 0, duration=1.0)
        wait_started(events_redis, 1)
        waiting = latest.replaced.delay("k", 1)  # waits behind the running copy
        newest = latest.replaced.delay("k", 2)  # takes its place
        assert first.get(timeout=20)["payload"] == 0 and newest.get(timeout=20)["payload"] == 2
        assert waiting.get(timeout=5) is None
    finally:
        lock_conflict.disconnect(publisher_side)

    assert heard == []  # neither newer call was a duplicate at enqueue
    conflicts = wait_for(lambda: _signals(events_redis, "lock_conflict"), 10, what="the superseded call's signal")
    assert [(s["task_id"], s["holder"], s["action"], s["at"]) for s in conflicts] == [
        (waiting.id, newest.id, "replace", "run")]
