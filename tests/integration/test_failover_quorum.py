"""A quorum of three masters through pauses: what an acquire failed to take is undone.

Given three redis-servers started here, when two of them are paused (SIGSTOP) while acquires
are on their way and resumed (SIGCONT) after the attempts gave up, then the locks those
masters took late are released again, and another process is granted each key within about
a second of their return, not after the ttl; a block waiting for a place rides the outage; a
hold lost because the store did not answer says so; a module's ``SharedLock(limit=3)`` made
without ``app=`` stops a quorum worker as it starts.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Iterator, List

import pytest
from celery import Celery

from celery_singleton_lock import SharedLock, lock_lost
from celery_singleton_lock.runtime import runtime_for
from celery_singleton_lock.store import Grant, new_token
from celery_singleton_lock.store.connect import open_store
from celery_singleton_lock.store.quorum import QuorumUnavailable
from tests.integration.test_misconfigured_store import EXIT_CONFIG, the_one_line
from tests.integration.topo import HOLDER, worker_env
from tests.support.servers import RedisServer
from tests.support.topologies import Masters
from tests.support.waits import wait_for
from tests.support.workers import Worker

TTL_MS = 6000


@pytest.fixture(scope="module")
def masters() -> Iterator[Masters]:
    started = Masters(3).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def app(masters: Masters) -> Iterator[Celery]:
    made = Celery("failover-quorum", broker="memory://", set_as_current=False)
    made.conf.singleton_lock_url = masters.urls
    made.conf.singleton_lock_prefix = f"fq{new_token()[:6]}"
    try:
        yield made
    finally:
        runtime_for(made).close()


@contextmanager
def paused(masters: Masters, indices: List[int]) -> Iterator[None]:
    pids = [masters.servers[i].process.pid for i in indices]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def test_acquires_that_two_paused_masters_take_late_are_undone_when_they_resume(masters):
    keys = [f"undo:{{k{i}}}:lock" for i in range(4)]
    failing, other = open_store(masters.urls, {}), open_store(masters.urls, {})

    def attempt(index: int) -> BaseException:
        time.sleep(0.06 * index)  # later attempts queue behind earlier ones on the paused masters
        with pytest.raises(QuorumUnavailable) as failed:
            failing.acquire(keys[index], new_token(), TTL_MS, HOLDER)
        return failed.value

    try:
        with paused(masters, [1, 2]):
            with ThreadPoolExecutor(len(keys)) as pool:
                list(pool.map(attempt, range(len(keys))))
            time.sleep(1.0)  # the masters stay away past every socket timeout of the attempts
        back = time.monotonic()
        for key in keys:
            wait_for(lambda: isinstance(other.acquire(key, new_token(), TTL_MS, HOLDER), Grant), 1.5,
                     interval=0.05, what=f"{key} granted to another process after the masters' return")
        assert time.monotonic() - back < 1.5, "the failed attempts' locks outlived the masters' return"
    finally:
        failing.close()
        other.close()


def test_a_waiting_hold_rides_two_masters_paused_within_its_wait_timeout(masters, app):
    lock = SharedLock("ride", ttl=2, wait_timeout=8, app=app)
    holder = open_store(masters.urls, {})
    try:
        # Given a place held elsewhere for a second (never renewed: it ends at its ttl)
        key = lock.keys(runtime_for(app), ()).lock
        assert isinstance(holder.acquire(key, new_token(), 1000, HOLDER), Grant)
        waited = []

        def block() -> None:
            with lock.hold() as held:
                waited.append(held.token)

        # When a block waits for it, and two of the three masters are paused from before that place
        # ends until after (the block's asks meanwhile find no majority)
        with ThreadPoolExecutor(1) as pool:
            done = pool.submit(block)
            time.sleep(0.3)  # the block is waiting
            with paused(masters, [1, 2]):
                time.sleep(1.5)
            # then it keeps waiting through the outage, and takes the place when it frees
            done.result(timeout=10)
        assert waited
    finally:
        holder.close()


def test_a_hold_lost_while_the_store_did_not_answer_is_told_so_not_as_a_paused_process():
    server = RedisServer().start()
    app = Celery("failover-unreached", broker="memory://", set_as_current=False)
    app.conf.singleton_lock_url = server.url
    lock = SharedLock("unreached", ttl=1.5, app=app)
    reasons: List[str] = []

    def lost(sender=None, reason=None, **kwargs) -> None:
        if sender is lock:
            reasons.append(reason)

    lock_lost.connect(lost, weak=False, dispatch_uid="test-unreached")
    try:
        with lock.hold() as held:
            # When the lock store goes away for longer than the ttl (its renewals are refused at once)
            server.stop()
            wait_for(lambda: held.lost, 5, interval=0.05, what="the hold marked lost")
            wait_for(lambda: reasons, 5, interval=0.05, what="lock_lost, sent after the flag")
        # then the loss names the lock store, not a paused or starved process
        assert len(reasons) == 1 and "could not be reached" in reasons[0] and "paused" not in reasons[0], reasons
    finally:
        lock_lost.disconnect(dispatch_uid="test-unreached")
        runtime_for(app).close()
        server.stop()
        shutil.rmtree(server._dir, ignore_errors=True)


def test_a_module_shared_lock_of_three_without_an_app_stops_a_quorum_worker_at_start(masters, test_env):
    worker = Worker("tests.integration.proj_quorum_shared", dict(test_env, **worker_env(masters.urls)),
                    name=f"refused-{new_token()[:6]}", concurrency=1)
    try:
        with pytest.raises(RuntimeError, match="exited with"):
            worker.start(timeout=60)
        assert worker.process is not None and worker.process.returncode == EXIT_CONFIG
        line = the_one_line(worker.log())
        assert "shared lock 'three-at-once': limit=3 with a quorum lock store" in line, line
    finally:
        worker.stop()
