"""A quorum undoes a failed acquire on the masters that take it late (masters in memory, one paused)."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from celery_singleton_lock.store.quorum import QuorumBackend, QuorumUnavailable
from celery_singleton_lock.store.quorum_undo import undo_call
from tests.support.masters import HOLDER, MemoryMaster
from tests.support.waits import wait_for


class PausedMaster(MemoryMaster):
    """Runs nothing until resumed: the calls sent meanwhile run then, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.resumed = threading.Event()

    def acquire(self, *args, **kwargs):
        self.resumed.wait(10)
        return super().acquire(*args, **kwargs)

    def release(self, *args, **kwargs):
        self.resumed.wait(10)
        return super().release(*args, **kwargs)


def test_acquires_queued_on_paused_masters_are_undone_when_they_resume_even_once_they_count_as_stuck():
    live, paused = MemoryMaster(), [PausedMaster(), PausedMaster()]
    store = QuorumBackend([live, *paused], node_timeout=0.1)
    failures = []

    def attempt(key: str) -> None:
        with pytest.raises(QuorumUnavailable):
            store.acquire(key, f"token-{key}", 5000, HOLDER)
        failures.append(key)

    try:
        # Given two of three masters paused, and two acquires sent to them, the second while the
        # first still waits there (by its undo, both masters count as stuck)
        threads = [threading.Thread(target=attempt, args=(key,)) for key in ("a", "b")]
        threads[0].start()
        time.sleep(0.03)
        threads[1].start()
        for thread in threads:
            thread.join(5)
        assert sorted(failures) == ["a", "b"] and not live.locks
        # When the masters resume, each runs both acquires, then both undos
        for master in paused:
            master.resumed.set()
        # then neither keeps a failed attempt's lock
        wait_for(lambda: not paused[0].locks and not paused[1].locks, 5, what="the late acquires undone")
    finally:
        for master in paused:
            master.resumed.set()
        store.close()


def test_an_undo_is_tried_again_until_answered_and_gives_up_at_its_deadline_or_on_close():
    class Flaky(MemoryMaster):
        def __init__(self, failures: int) -> None:
            super().__init__()
            self.failures = failures

        def release(self, *args, **kwargs):
            if self.failures:
                self.failures -= 1
                raise redis.exceptions.TimeoutError("paused")
            return super().release(*args, **kwargs)

    master = Flaky(3)
    master.locks["k"] = ("t", "me")
    stopping = threading.Event()
    assert undo_call("k", "t", "running", time.monotonic() + 5, stopping)(master) is True
    assert not master.locks
    down = Flaky(10 ** 6)
    started = time.monotonic()
    assert undo_call("k", "t", "running", time.monotonic() + 0.3, stopping)(down) is None
    assert time.monotonic() - started < 2.0
    stopping.set()
    assert undo_call("k", "t", "running", time.monotonic() + 60, stopping)(down) is None
