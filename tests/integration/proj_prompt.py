"""The test app of :mod:`tests.integration.proj`, with a task that says when its body ended.

The body records its lock's key as it starts and the time as its last act, so a test
watching the key from outside can tell how long after the body's end the lock was gone.
"""

from __future__ import annotations

import json
import time

from celery_singleton_lock import LockedTask
from tests.integration.proj import *  # noqa: F401,F403 - the app and its tasks
from tests.integration.proj import app, events


def _says_its_end(task, key, duration):
    events().rpush("prompt:started", json.dumps({"key": key, "lock": task.lock.key}))
    time.sleep(duration)  # the test is watching the lock key by now
    events().rpush("prompt:ended", json.dumps({"key": key, "end": time.time()}))


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_ttl=3, lock_heartbeat=1)
def says_its_end(self, key, duration=0.3):
    _says_its_end(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_ttl=3, lock_heartbeat=1,
          ignore_result=True)
def says_its_end_quietly(self, key, duration=0.3):
    """The same with no result stored: nobody learns of its end through Celery."""
    _says_its_end(self, key, duration)


@app.task(shared=False)
def plain_follower(duration):
    """A task without a lock, long enough that a release still waiting for a next acquire would show."""
    time.sleep(duration)


@app.task(shared=False, base=LockedTask, lock_key=(), lock_limit=2)
def places_follower(duration):
    """A task whose acquire is one of a key's places: a script of its own, not the singleton's SET."""
    time.sleep(duration)
