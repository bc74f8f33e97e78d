"""The test app of :mod:`tests.integration.proj`, with tasks where the newest call of a key wins
(``on_locked="replace"``, ``lock_debounce``). Each body records its interval with the payload it ran
with, so a test sees which call's arguments ran, when, and whether runs overlapped."""

from __future__ import annotations

import json
import os
import time

from celery_singleton_lock import LockedTask
from tests.integration.proj import *  # noqa: F401,F403 - the tasks
from tests.integration.proj import _record, app, events

if os.environ.get("CSL_RESULT_EXTENDED"):  # only in the workers of the tests that read extended meta
    app.conf.result_extended = True


def _run(task, key, payload, duration: float) -> dict:
    started = time.time()
    events().rpush("started", json.dumps(dict(task=task.name, id=task.request.id, key=key, payload=payload,
                                              pid=os.getpid(), start=started)))
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        time.sleep(min(0.05, max(deadline - time.monotonic(), 0)))
    _record("intervals", task, started, key=key, payload=payload)
    return {"key": key, "payload": payload}


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_debounce=0.5, lock_retry_delay=0.2)
def debounced(self, key, payload, duration=0.1):
    return _run(self, key, payload, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_debounce=0.5, lock_debounce_max=1,
          lock_retry_delay=0.2)
def debounced_max(self, key, payload, duration=0.3):
    return _run(self, key, payload, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_scope="queued", on_locked="replace",
          lock_retry_delay=0.2)
def replaced(self, key, payload, duration=1.5):
    return _run(self, key, payload, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_debounce=2, lock_retry_delay=0.2)
def debounced_long(self, key, payload, duration=0.1):
    return _run(self, key, payload, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_scope="queued_or_running", on_locked="replace",
          lock_retry_delay=0.2)
def replaced_qor(self, key, payload, duration=1.5):
    return _run(self, key, payload, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_scope="queued", on_locked="replace")
def replaced_default(self, key, payload, duration=2.0):
    """``replace`` with the default ``lock_retry_delay`` (5 s)."""
    return _run(self, key, payload, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_debounce=0.3)
def debounced_default(self, key, payload, duration=2.0):
    """``lock_debounce`` with the default ``lock_retry_delay`` (5 s)."""
    return _run(self, key, payload, duration)


if os.environ.get("CSL_BEAT_LATEST"):  # celery beat calls the named task every 0.2 s, quicker than its quiet period
    app.conf.beat_schedule = {
        "burst": {"task": f"tests.integration.proj_latest.{os.environ['CSL_BEAT_LATEST']}", "schedule": 0.2,
                  "args": ("beat", "tick")},
    }
