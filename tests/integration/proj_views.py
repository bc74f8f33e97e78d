"""The test app of :mod:`tests.integration.proj`, with tasks whose arguments the serializer changes.

Every argument decides the lock (no ``lock_key``), and each body records the type
of the argument it received, so a test sees the worker's view of a call next to
the publisher's.
"""

from __future__ import annotations

import json
import time

from celery_singleton_lock import LockedTask
from tests.integration.proj import *  # noqa: F401,F403 - the tasks
from tests.integration.proj import _record, app, events


def _seen(task, value, duration: float) -> str:
    """Record what the body received (its repr and type), run ``duration`` seconds, return the type."""
    started = time.time()
    seen = type(value).__name__
    events().rpush("started", json.dumps(dict(task=task.name, id=task.request.id, key=repr(value), seen=seen,
                                              start=started)))
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        time.sleep(min(0.05, max(deadline - time.monotonic(), 0)))
    _record("intervals", task, started, key=repr(value), seen=seen)
    return seen


@app.task(shared=False, base=LockedTask, bind=True, lock_scope="queued_or_running")
def views_qor(self, value, duration=0.2):
    return _seen(self, value, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_scope="queued", lock_retry_delay=0.3)
def views_queued(self, value, duration=0.2):
    return _seen(self, value, duration)
