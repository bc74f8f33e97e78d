"""The crontab recipe (docs/beat.md): ``lock_key=tick_key(schedule)`` never turns an
on-schedule tick away after a late (catch-up) run, and two beats still run each tick once.

The schedule is a crontab of seconds (``tests/integration/proj_ticks.AlignedEvery``: ticks on
the clock's multiples of the period), so a beat restart before a tick plays in seconds what a
daily job meets in days. Given a beat stopped after one tick and restarted after it missed the
next, it publishes the missed tick at once and the following tick on the clock: both run. Under
the interval recipe (a window of 0.9 of the period, no tick key) the late run's window turned that
following tick away (checked by running this test with ``CSL_TICK_TASK=windowed``). A restarted
beat's late publish of a tick another beat ran on time is turned away by the recipe's window of one
period (and not by a shorter one: ``CSL_TICK_WINDOW=3``).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
import uuid

import pytest

from tests.support.waits import wait_for
from tests.support.workers import Beat

APP = "tests.integration.proj_ticks"


def _runs(events_redis) -> list:
    return [json.loads(raw)["start"] for raw in events_redis.lrange("tick-runs", 0, -1)]


def _next_tick(period: float, after: float) -> float:
    return (math.floor(after / period) + 1) * period


def _sleep_until(moment: float) -> None:
    while time.time() < moment:
        time.sleep(min(0.05, max(moment - time.time(), 0)))


@pytest.fixture
def ticks_env(test_env):
    return {name: os.environ[name] for name in ("CSL_TICK_TASK", "CSL_TICK_WINDOW") if name in os.environ}


def test_a_beat_restarted_before_a_tick_runs_the_missed_tick_and_the_next_one(proj, start_worker, events_redis,
                                                                              test_env, ticks_env):
    period = 10.0
    env = dict(ticks_env, CSL_TICK_SECONDS=str(period))
    start_worker(pool="prefork", concurrency=2, env=env, app=APP)
    schedule_file = tempfile.mktemp(prefix="csl-ticks-schedule-")  # kept across the restart: beat's memory
    beat = Beat(APP, dict(test_env, **env), name=f"ticks-{uuid.uuid4().hex[:6]}",
                extra_args=["-s", schedule_file])
    try:
        beat.start()
        wait_for(lambda: _runs(events_redis), 2 * period + 10, what="the first tick's run")
        beat.stop()  # warm: the schedule file keeps the tick it ran
        first = _runs(events_redis)[-1]
        missed = _next_tick(period, first)  # beat is down at this tick
        _sleep_until(missed + 1.0)  # and starts again just after it, well before the following one
        restarted = Beat(APP, dict(test_env, **env), name=f"ticks-again-{uuid.uuid4().hex[:6]}",
                         extra_args=["-s", schedule_file])
        restarted.start()
        try:
            wait_for(lambda: len(_runs(events_redis)) >= 2, period, what="the missed tick's late run")
            late = _runs(events_redis)[1]
            following = _next_tick(period, missed)
            assert late < following - 1, f"the late run came at {late - missed:.1f}s past its tick (load?)"
            _sleep_until(following + period / 2)
            runs = _runs(events_redis)
        finally:
            restarted.stop()
    finally:
        beat.stop()
        for leftover in (schedule_file, schedule_file + ".db"):
            if os.path.exists(leftover):
                os.unlink(leftover)
    on_schedule = [start for start in runs if following <= start < following + period / 2]
    assert len(on_schedule) == 1, (f"the tick {following - missed:.0f}s after the missed one ran {len(on_schedule)} "
                                   f"times; runs at {[round(r - missed, 2) for r in runs]} (s after the missed tick)")
    print(f"late run {late - missed:.2f}s after its tick, next tick run {on_schedule[0] - following:.2f}s after it")


def test_two_beats_run_each_tick_of_a_crontab_like_schedule_once(proj, start_worker, events_redis, test_env,
                                                                 ticks_env):
    period = 4.0
    env = dict(ticks_env, CSL_TICK_SECONDS=str(period))
    start_worker(pool="prefork", concurrency=2, env=env, app=APP)
    beats = [Beat(APP, dict(test_env, **env), name=f"ticks{i}-{uuid.uuid4().hex[:6]}") for i in range(2)]
    try:
        for beat in beats:
            beat.start()
        begun = time.time()
        wait_for(lambda: len(_runs(events_redis)) >= 4, 8 * period, what="four ticks' runs")
    finally:
        for beat in beats:
            beat.stop()
    published = [beat.log().count("Sending due task job") for beat in beats]
    runs = _runs(events_redis)
    ticks = [math.floor(start / period) for start in runs]  # each run starts within its tick's period
    assert len(ticks) == len(set(ticks)), (f"a tick ran twice: runs at {[round(r - begun, 2) for r in runs]}, "
                                           f"publishes {published}")
    assert all(published) and sum(published) > len(runs), published


def test_a_restarted_beats_late_publish_of_a_tick_another_beat_ran_is_turned_away(proj, start_worker, events_redis,
                                                                                  test_env, ticks_env):
    """A window of one period covers a catch-up published most of a period after its tick."""
    period = 10.0
    env = dict(ticks_env, CSL_TICK_SECONDS=str(period))
    start_worker(pool="prefork", concurrency=2, env=env, app=APP)
    schedule_file = tempfile.mktemp(prefix="csl-ticks-schedule-")
    steady = Beat(APP, dict(test_env, **env), name=f"ticks-steady-{uuid.uuid4().hex[:6]}")
    restarted = None
    try:
        steady.start()
        first_life = Beat(APP, dict(test_env, **env), name=f"ticks-b-{uuid.uuid4().hex[:6]}",
                          extra_args=["-s", schedule_file])
        first_life.start()
        wait_for(lambda: _runs(events_redis), 2 * period + 10, what="the first tick's run")
        wait_for(lambda: "Sending due task job" in first_life.log(), period, what="the second beat's publish")
        first_life.stop()
        missed = _next_tick(period, _runs(events_redis)[-1])  # the steady beat runs it on time
        _sleep_until(missed + 0.6 * period)  # the second beat comes back late in that tick's period
        restarted = Beat(APP, dict(test_env, **env), name=f"ticks-b-again-{uuid.uuid4().hex[:6]}",
                         extra_args=["-s", schedule_file])
        restarted.start()
        wait_for(lambda: "Sending due task job" in restarted.log(), period, what="the late publish")
        late = time.time()
        assert late < missed + period, f"the restarted beat published {late - missed:.1f}s after the tick (load?)"
        _sleep_until(missed + period + period / 2)  # and the following tick
        runs = _runs(events_redis)
    finally:
        for beat in (steady, restarted):
            if beat is not None:
                beat.stop()
        for leftover in (schedule_file, schedule_file + ".db"):
            if os.path.exists(leftover):
                os.unlink(leftover)
    ticks = [math.floor(start / period) for start in runs]
    assert len(ticks) == len(set(ticks)), f"a tick ran twice: runs at {[round(r - missed, 2) for r in runs]}"
    assert math.floor(missed / period) in ticks and math.floor(missed / period) + 1 in ticks, runs
