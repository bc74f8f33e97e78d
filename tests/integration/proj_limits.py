"""The test app of :mod:`tests.integration.proj`, with tasks under a limit or a window.

Each body records its interval and, as ``asked``, the time its execution began asking
for a place (a ``task_prerun`` receiver: before the acquire), so a test can bound when
each place was granted: between ``asked`` and ``start``.
"""

from __future__ import annotations

import json
import os
import time

from celery.signals import task_prerun

from celery_singleton_lock import LockedTask
from tests.integration.proj import *  # noqa: F401,F403 - the tasks
from tests.integration.proj import _fence, app, events

_asked = {}


@task_prerun.connect(dispatch_uid="proj_limits.asked")
def _note_asked(task_id=None, **_):
    _asked[task_id] = time.time()


def _limited_body(task, key, duration: float) -> None:
    started = time.time()
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        time.sleep(min(0.02, max(deadline - time.monotonic(), 0)))
    events().rpush("intervals", json.dumps(dict(
        task=task.name, id=task.request.id, pid=os.getpid(), key=key, start=started, end=time.time(),
        asked=_asked.pop(task.request.id, started), fence=_fence(task), retries=task.request.get("retries"),
        requeues=int(task.request.get("singleton_lock_retries") or 0))))


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_limit=3, on_locked="retry", lock_retry_delay=0.2)
def limited(self, key, seq=0, duration=0.6):
    _limited_body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_limit=5, lock_window=2, on_locked="retry",
          lock_retry_delay=60)
def windowed(self, key, seq=0, duration=0.0):
    _limited_body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_limit=2, lock_ttl=30)
def limited_long(self, key, seq=0, duration=30.0):
    _limited_body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_limit=2, lock_ttl=3, lock_heartbeat=1)
def limited_short_ttl(self, key, seq=0, duration=30.0):
    _limited_body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_limit=2, lock_scope="queued_or_running")
def qor_limited(self, key, seq=0, duration=1.0):
    _limited_body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_limit=2, lock_scope="queued", lock_retry_delay=0.2)
def queued_limited(self, key, seq=0, duration=2.0):
    _limited_body(self, key, duration)


#: docs/beat.md's recipe for a beat job that two beat processes publish: a window a little under the
#: schedule's period keeps the second publish of a tick out, and lets the next tick in.
PERIOD = 2.0


@app.task(shared=False, base=LockedTask, bind=True, lock_scope="queued_or_running", lock_window=0.9 * PERIOD)
def ticked(self, duration=0.0):
    _limited_body(self, "tick", duration)


if os.environ.get("CSL_TICK_DURATION") is not None:
    app.conf.beat_schedule = {
        "tick": {"task": "tests.integration.proj_limits.ticked", "schedule": PERIOD,
                 "kwargs": {"duration": float(os.environ["CSL_TICK_DURATION"])}},
    }


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), on_locked="raise", lock_ttl=30,
          lock_limit=lambda key, seq=0, duration=3.0, limit=3: limit)
def varied(self, key, seq=0, duration=3.0, limit=3):
    _limited_body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_window=20, on_locked="skip")
def once_per_20s(self, key, seq=0, duration=0.0):
    _limited_body(self, key, duration)
    return seq


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_window=2, lock_ttl=30, on_locked="skip")
def twice_in_2s(self, key, seq=0, duration=0.0):
    _limited_body(self, key, duration)
    return seq


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_limit=2, lock_window=2, on_locked="retry",
          lock_retry_delay=60)
def two_per_2s(self, key, seq=0, duration=0.0):
    _limited_body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_window=6, on_locked="skip")
def once_per_6s(self, key, seq=0, duration=0.0):
    _limited_body(self, key, duration)
    return seq
