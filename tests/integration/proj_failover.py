"""The topology app (:mod:`tests.integration.proj_topo`) with a task that holds its lock through a failover.

``held`` runs until its duration passes or its lock is lost, checking the lock's flag every
20 ms, and records in the events list ``failover`` when it started, when it learned the lock
was lost (``told``, ``None`` if never) and when it ended, on the host's wall clock.
"""

from __future__ import annotations

import json
import os
import time

from tests.integration.proj import events
from tests.integration.proj_topo import *  # noqa: F401,F403 - the tasks
from tests.integration.proj_topo import app

from celery_singleton_lock import LockedTask


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_ttl=6, lock_heartbeat=2)
def held(self, key, duration=12.0):
    started = time.time()
    events().rpush("failover-started", json.dumps(dict(key=key, id=self.request.id, start=started)))
    told = None
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        if self.lock is not None and self.lock.lost:
            told = time.time()
            break
        time.sleep(0.02)
    events().rpush("failover", json.dumps(dict(key=key, id=self.request.id, pid=os.getpid(), start=started,
                                               told=told, end=time.time())))
    return told is None
