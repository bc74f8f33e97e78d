"""A lock store that stops answering while ``apply_async`` takes an enqueue lock.

Given a ``queued_or_running`` task whose lock store is a private redis-server, when the
store is paused (SIGSTOP) during ``apply_async``, the call times out and publishes anyway
(``on_lock_error="retry"``). The ask it sent is still in the server's socket and runs when
the store resumes, so an enqueue lock appears that nobody saw granted. The message must
still run exactly once: the worker adopts that lock (the message names its token), runs
the body, and releases it; nothing is ignored and no lock is left behind. With
``on_lock_error="raise"`` nothing is published, so the lock that ask takes late is
released by token as soon as the store answers: it names a call that will never run.
"""

from __future__ import annotations

import pytest

from celery_singleton_lock import LockBackendError

from tests.integration.helpers import lock_keys, records
from tests.integration.topo import app_on, worker_env, workers
from tests.support.servers import RedisServer
from tests.support.waits import wait_for

OPTIONS = {"socket_timeout": 0.5, "socket_connect_timeout": 0.5}


@pytest.fixture
def lock_server():
    with RedisServer() as server:
        yield server


def test_an_enqueue_ask_that_lands_after_its_timeout_is_adopted_not_ignored(lock_server, test_env, events_redis):
    import redis

    import tests.integration.proj as proj

    events_redis.delete("intervals", "started", "running")
    store = redis.Redis.from_url(lock_server.url, decode_responses=True)
    with app_on(proj, lock_server.url, OPTIONS):
        proj.qor_job.apply_async(("warm",), {"duration": 0.0}, queue="pause")  # connected before the pause
        lock_server.pause()
        try:
            late = proj.qor_job.apply_async(("late",), {"duration": 0.2}, queue="pause")
        finally:
            lock_server.resume()
        # The ask that timed out ran when the store resumed: the lock it took names this call.
        wait_for(lambda: len(lock_keys(store)) == 2, 10, what="the late enqueue lock beside the first call's")
        with workers(test_env, worker_env(lock_server.url, OPTIONS), "pause", count=1):
            assert late.get(timeout=30)["key"] == "late"
            wait_for(lambda: not lock_keys(store), 15, what="every lock to be released")
    runs = [entry for entry in records(events_redis) if entry["key"] == "late"]
    assert len(runs) == 1, f"the call ran {len(runs)} times"
    store.close()


def test_an_enqueue_ask_refused_to_the_caller_is_withdrawn_when_it_lands_late(lock_server, test_env):
    import redis

    import tests.integration.proj as proj

    store = redis.Redis.from_url(lock_server.url, decode_responses=True)
    with app_on(proj, lock_server.url, OPTIONS):
        proj.qor_error_raise.apply_async(("warm",), {"duration": 0.0}, queue="pause-raise")
        lock_server.pause()
        try:
            with pytest.raises(LockBackendError, match="nothing was published"):
                proj.qor_error_raise.apply_async(("late",), {"duration": 0.0}, queue="pause-raise")
        finally:
            lock_server.resume()
        # The late ask lands, then the publisher's heartbeat thread withdraws it.
        wait_for(lambda: len(lock_keys(store)) == 1, 15, what="the late enqueue lock to be withdrawn")
    store.close()
