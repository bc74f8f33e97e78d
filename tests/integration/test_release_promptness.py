"""A finished task's lock is gone from Redis at once, not at the next task or heartbeat.

Given a real worker running one task with nothing after it, when the body ends, then
the lock key disappears within 50 ms of the body's last act as seen by a client
polling it from outside, and within one heartbeat period (1 s here) in any case. The
50 ms bound is taken on the median of a few tasks run one after another (one task
alone may lose its core on a shared machine); the heartbeat bound holds for each.
"""

from __future__ import annotations

import json
import time
from typing import Dict, Iterator

import pytest

from tests.integration.helpers import drop_runtime
from tests.support.waits import wait_for

APP = "tests.integration.proj_prompt"
TASKS = 5
PROMPT = 0.05
HEARTBEAT = 1.0  # the task's lock_heartbeat


@pytest.fixture
def prompt_proj(test_env: Dict[str, str], suite_servers, events_redis) -> Iterator[object]:
    import tests.integration.proj_prompt as module

    drop_runtime(module.app)
    suite_servers.clean()
    events_redis.delete("prompt:started", "prompt:ended")
    yield module
    drop_runtime(module.app)


def _gone_after_end(proj, lock_redis, events_redis, n: int, task: str = "says_its_end", follower=None) -> float:
    """Seconds from the body's recorded end to the first poll that found its lock key gone; with
    ``follower``, a 2 s task of it queued right behind."""
    result = getattr(proj, task).delay(f"k{n}", 0.2 if follower is not None else 0.3)
    after = follower.delay(2.0) if follower is not None else None
    started = wait_for(lambda: events_redis.lindex("prompt:started", n), 20, interval=0.005,
                       what=f"task {n} to start")
    key = json.loads(started)["lock"]
    deadline = time.monotonic() + 10
    while lock_redis.exists(key):  # a tight poll, bounded
        assert time.monotonic() < deadline, f"lock {key} still held 10 s after its task started"
        time.sleep(0.001)
    gone = time.time()
    ended = json.loads(wait_for(lambda: events_redis.lindex("prompt:ended", n), 10, what=f"task {n}'s end"))
    if not result.ignored:
        result.get(timeout=10)
    if after is not None:
        after.get(timeout=10)
    return gone - ended["end"]


@pytest.mark.parametrize("task", ["says_its_end", "says_its_end_quietly"])
@pytest.mark.parametrize("pool,concurrency", [("prefork", 2), ("solo", 1)])
def test_a_released_lock_is_gone_at_once_when_nothing_follows(prompt_proj, start_worker, lock_redis, events_redis,
                                                             pool, concurrency, task):
    start_worker(pool=pool, concurrency=concurrency, app=APP)

    delays = [_gone_after_end(prompt_proj, lock_redis, events_redis, n, task) for n in range(TASKS)]

    assert all(d < HEARTBEAT for d in delays), delays
    assert sorted(delays)[TASKS // 2] < PROMPT, delays


@pytest.mark.parametrize("follower", ["plain_follower", "places_follower"])
def test_in_a_solo_worker_a_release_goes_before_the_next_tasks_body(prompt_proj, start_worker, lock_redis,
                                                                      events_redis, follower):
    """A solo worker sends the release of a task that stores no result with the next task's acquire: a
    next task without one (or whose acquire went another way) must not keep it waiting while its body runs."""
    start_worker(pool="solo", concurrency=1, app=APP)
    _gone_after_end(prompt_proj, lock_redis, events_redis, 0, "says_its_end_quietly")  # the worker is warm
    delays = [_gone_after_end(prompt_proj, lock_redis, events_redis, n, "says_its_end_quietly",
                              getattr(prompt_proj, follower)) for n in range(1, 4)]
    assert sorted(delays)[1] < PROMPT, delays


def test_in_a_solo_worker_a_stored_result_never_finds_its_lock_still_held(prompt_proj, start_worker, lock_redis,
                                                                          events_redis):
    """A caller that sees the result (or a chain's next link, published before it) may call again at
    once: the release it would meet must be gone by then, not waiting for a next task."""
    start_worker(pool="solo", concurrency=1, app=APP)
    for n in range(5):
        result = prompt_proj.says_its_end.delay(f"r{n}", 0.05)
        started = wait_for(lambda: events_redis.lindex("prompt:started", n), 20, interval=0.005,
                           what=f"task {n} to start")
        key = json.loads(started)["lock"]
        wait_for(result.ready, 10, interval=0.001, what=f"task {n}'s result")
        assert not lock_redis.exists(key), f"task {n}'s result was stored while its lock {key} was held"
