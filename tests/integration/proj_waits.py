"""The test app of :mod:`tests.integration.proj`, with the tasks of the wait and young-store tests.

Every publish of these tasks (by the test, a worker's re-queue, or beat) is recorded in the
events Redis under ``published`` with its time, so a test can tell how long after its publish
a call ran. ``CSL_WAITS_BEAT=1`` gives beat a one-second schedule of :func:`tick`.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from celery.signals import after_task_publish

from celery_singleton_lock import LockedTask
from tests.integration.proj import _body, _tracked, app, events

__all__ = ["app", "wait_retry", "wait_raise", "tick"]


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), on_locked="wait", lock_wait_timeout=30,
          on_lock_error="retry", lock_retry_delay=1)
def wait_retry(self: Any, key: str, duration: float = 3.0) -> dict:
    return _body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), on_locked="wait", lock_wait_timeout=30,
          on_lock_error="raise")
def wait_raise(self: Any, key: str, duration: float = 3.0) -> dict:
    return _body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_scope="queued_or_running")
def tick(self: Any, key: str = "tick", duration: float = 0.2) -> dict:
    return _tracked(self, key, duration)


OURS = {task.name for task in (wait_retry, wait_raise, tick)}


def _published(sender: Any = None, headers: Any = None, **kwargs: Any) -> None:
    if sender in OURS and headers:
        events().rpush("published", json.dumps(dict(task=sender, id=headers.get("id"), at=time.time(),
                                                    pid=os.getpid())))


after_task_publish.connect(_published, weak=False, dispatch_uid="tests.integration.proj_waits.published")

if os.environ.get("CSL_WAITS_BEAT"):
    app.conf.beat_schedule = {"tick": {"task": tick.name, "schedule": 1.0}}
