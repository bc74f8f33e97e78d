"""The prefork parent's watch over its children, against a real child process.

Given a child that accepts task after task, the watch holds on to the last one
only (Celery answers successes through its own request subclass, so nothing
tells the watch that a task ended well), and when the child dies it releases
for that one task.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from celery_singleton_lock.runtime.childwatch import ChildWatch
from tests.support.waits import wait_for

pytestmark = pytest.mark.skipif(not ChildWatch.supported, reason="needs os.pidfd_open (Linux)")


class _Request:
    """Stands for a LockedRequest: records the releases the watch asks of it."""

    def __init__(self, released: list) -> None:
        self.released = released

    def release_for_child(self, why: str) -> bool:
        self.released.append((self, why))
        return True


@pytest.fixture
def watch():
    watch = ChildWatch()
    yield watch
    watch.close()


@pytest.fixture
def child():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def test_a_child_running_many_tasks_is_watched_for_its_last_one(watch, child):
    released = []
    requests = [_Request(released) for _ in range(1000)]

    for request in requests:
        watch.watch(child.pid, request)

    assert watch.watched() == {child.pid: requests[-1]}
    child.kill()
    wait_for(lambda: released, 5, what="the release for the dead child's task")
    assert released == [(requests[-1], f"pool process {child.pid} exited")]
    assert watch.watched() == {}


def test_a_forgotten_request_is_not_released_when_the_child_dies_later(watch, child):
    released = []
    request = _Request(released)
    watch.watch(child.pid, request)

    watch.forget(child.pid, request)
    child.kill()

    wait_for(lambda: child.pid not in watch.watched(), 5, what="the watch to notice the exit")
    assert released == []


def test_green_pool_ids_are_not_processes(watch):
    watch.watch(id(object()), _Request([]))  # gevent and eventlet report a greenlet's address

    assert watch.watched() == {}
