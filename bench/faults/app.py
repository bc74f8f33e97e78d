"""The workload: three ``LockedTask`` tasks whose bodies make fenced writes and record themselves
(or, with ``shared``, three plain tasks whose bodies hold a ``SharedLock`` place per item).

Configured by ``FAULTS_CONFIG`` (JSON, set by the runner for itself and its workers):
``broker``, ``results``, ``lock`` (a URL or a list of them: a quorum), ``history``,
``downstream``, ``queue``, ``visibility_timeout``, ``body`` ([min, max] seconds) and
``mid_write`` (and ``limit``, ``window``, ``shared``). Every body reads ``self.lock.fencing_token`` once, writes to the
downstream store at its start (claiming the key for its fence), half-way when
``mid_write``, and at its end; each write records the fence, whether it was accepted
and whether ``self.lock.lost`` was set at that moment.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from typing import Any, Optional

from celery import Celery

from celery_singleton_lock import LockedTask, LockLostError, SharedLock
from celery_singleton_lock.signals import lock_conflict, lock_lost

from .downstream import FencedStore
from .history import Recorder

CONFIG = json.loads(os.environ.get("FAULTS_CONFIG", "{}") or "{}")
TTL = 3
LIMIT = int(CONFIG.get("limit", 1))  # lock_limit of every task
WINDOW = float(CONFIG.get("window", 0.0))  # lock_window of every task

app = Celery("faults", broker=CONFIG.get("broker", "redis://127.0.0.1:6379/0"), backend=CONFIG.get("results"))
app.conf.update(
    singleton_lock_url=CONFIG.get("lock", "redis://127.0.0.1:6379/1"),
    singleton_lock_prefix="faults",
    task_default_queue=CONFIG.get("queue", "faults"),
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    result_expires=3600,
    broker_connection_retry_on_startup=True,
    worker_redirect_stdouts=False,
)
if app.conf.broker_url.startswith("redis"):
    # Unacknowledged messages older than the visibility timeout are put back by a sweep each
    # second (kombu's default sweeps every 100 s): a killed worker's messages come back soon.
    app.conf.broker_transport_options = {"visibility_timeout": CONFIG.get("visibility_timeout", 15.0),
                                         "unacked_restore_interval": 1, "unacked_restore_throttle": 1}

recorder = Recorder(CONFIG.get("history", "redis://127.0.0.1:6379/2"))
_store: Optional[FencedStore] = None


def _downstream() -> FencedStore:
    global _store
    if _store is None or _store.client.connection_pool.pid != os.getpid():
        _store = FencedStore(CONFIG.get("downstream", "redis://127.0.0.1:6379/3"), places=LIMIT)
    return _store


def _write(lock: Any, key: str, fence: int, execution: str, at: str) -> None:
    lost = lock.lost  # what the holder knew before this write
    moment = time.time()
    accepted, last = _downstream().write(key, fence)
    recorder.add("writes", {"exec": execution, "key": key, "t": moment, "fence": fence, "accepted": accepted,
                            "last": last, "lost": lost, "at": at})


def body(task: Any, item: int, lock: Any = None, key: Optional[str] = None) -> str:
    """The guarded work: a start record, fenced writes around a sleep, an end record. ``lock``: the
    handle guarding it (the task's own lock by default; a ``SharedLock`` place in the shared rows)."""
    lock = lock if lock is not None else task.lock
    key = key or f"{task.name}:{item}"
    execution = uuid.uuid4().hex
    record = {"exec": execution, "key": key, "task_id": task.request.id, "worker": task.request.hostname,
              "pid": os.getpid(), "token": lock.token, "start": time.time()}
    try:
        record["fence"] = lock.fencing_token
        record["fenced"] = time.time()
    except LockLostError:  # lost before its first write: no write may be made
        record["fence"] = None
        recorder.add("starts", record)
        recorder.add("ends", {"exec": execution, "end": time.time(), "fence_refused": True})
        return "lost"
    recorder.add("starts", record)
    low, high = CONFIG.get("body", (0.05, 0.3))
    duration = random.uniform(low, high)
    _write(lock, key, record["fence"], execution, "start")
    if CONFIG.get("mid_write"):
        time.sleep(duration / 2)
        _write(lock, key, record["fence"], execution, "mid")
        time.sleep(duration / 2)
    else:
        time.sleep(duration)
    _write(lock, key, record["fence"], execution, "end")
    recorder.add("ends", {"exec": execution, "end": time.time()})
    return "ran"


@app.task(bind=True, base=LockedTask, name="faults.running", lock_ttl=TTL, lock_key=("item",),
          lock_limit=LIMIT, lock_window=WINDOW)
def running(self: Any, item: int, seq: int) -> str:
    return body(self, item)


@app.task(bind=True, base=LockedTask, name="faults.queued_or_running", lock_ttl=TTL, lock_key=("item",),
          lock_limit=LIMIT, lock_window=WINDOW,
          lock_scope="queued_or_running")
def queued_or_running(self: Any, item: int, seq: int) -> str:
    return body(self, item)


@app.task(bind=True, base=LockedTask, name="faults.retry", lock_ttl=TTL, lock_key=("item",),
          lock_limit=LIMIT, lock_window=WINDOW, on_locked="retry",
          lock_retry_delay=1)
def retrying(self: Any, item: int, seq: int) -> str:
    return body(self, item)


TASKS = (running, queued_or_running, retrying)

if CONFIG.get("shared"):
    # The shared rows: plain tasks whose bodies hold one SharedLock place per item, whichever task
    # they are; full, one waits, one re-queues itself, one fails with LockedError.
    app.conf.singleton_lock_retry_delay = 1
    _SHARED = {policy: SharedLock("faults-shared", limit=LIMIT, window=WINDOW, ttl=TTL, on_locked=policy,
                                  wait_timeout=30) for policy in ("wait", "retry", "raise")}

    def _shared_body(task: Any, item: int, policy: str) -> str:
        with _SHARED[policy].hold(item) as held:
            return body(task, item, held, f"shared:{item}")

    @app.task(bind=True, name="faults.shared_wait")
    def shared_wait(self: Any, item: int, seq: int) -> str:
        return _shared_body(self, item, "wait")

    @app.task(bind=True, name="faults.shared_retry")
    def shared_retry(self: Any, item: int, seq: int) -> str:
        return _shared_body(self, item, "retry")

    @app.task(bind=True, name="faults.shared_raise")
    def shared_raise(self: Any, item: int, seq: int) -> str:
        return _shared_body(self, item, "raise")

    TASKS = (shared_wait, shared_retry, shared_raise)


@lock_conflict.connect(weak=False, dispatch_uid="faults.conflict")
def _conflict(sender: Any = None, key: str = "", task_id: str = "", holder: Any = None, action: str = "",
              at: str = "", **_: Any) -> None:
    recorder.add("conflicts", {"task_id": task_id, "holder": holder, "action": action, "at": at, "t": time.time()})


@lock_lost.connect(weak=False, dispatch_uid="faults.lost")
def _lost(sender: Any = None, key: str = "", task_id: str = "", reason: str = "", **_: Any) -> None:
    recorder.add("lost", {"task_id": task_id, "reason": str(reason), "t": time.time()})
