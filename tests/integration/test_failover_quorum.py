"""A quorum of three masters through pauses: what an acquire failed to take is undone.

Given three redis-servers started here, when two of them are paused (SIGSTOP) while acquires
are on their way and resumed (SIGCONT) after the attempts gave up, then the locks those
masters took late are released again, and another process is granted each key within about
a second of their return, not after the ttl.
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Iterator, List

import pytest

from celery_singleton_lock.store import Grant, new_token
from celery_singleton_lock.store.connect import open_store
from celery_singleton_lock.store.quorum import QuorumUnavailable
from tests.integration.topo import HOLDER
from tests.support.topologies import Masters
from tests.support.waits import wait_for

TTL_MS = 6000


@pytest.fixture(scope="module")
def masters() -> Iterator[Masters]:
    started = Masters(3).start()
    try:
        yield started
    finally:
        started.stop()


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
