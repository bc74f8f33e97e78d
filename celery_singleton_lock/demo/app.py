"""The demo's Celery app: one task per ``on_locked`` policy, a debounced one, a limited one
(``lock_limit=2``), a windowed one (``lock_window``), and a beat job slower than its schedule.

Run it like any Celery project (the demo runner does exactly this)::

    REDIS_URL=redis://127.0.0.1:6379 celery -A celery_singleton_lock.demo.app worker
    REDIS_URL=redis://127.0.0.1:6379 celery -A celery_singleton_lock.demo.app beat
    REDIS_URL=redis://127.0.0.1:6379 celery -A celery_singleton_lock.demo.app locks list

Broker, results and locks share the Redis at ``REDIS_URL``; every key is under
``CSL_DEMO_NAMESPACE`` (default ``csl-demo``), see :mod:`.config`.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict

from celery import Celery
from celery import signals as celery_signals

from celery_singleton_lock import LockedTask
from celery_singleton_lock import signals as lock_signals

from .config import DemoConfig
from .judge import LIMITED, WINDOWED
from .record import Recorder

__all__ = ["app", "config", "recorder", "skip_job", "retry_job", "wait_job", "raise_job", "debounce_job",
           "limited_job", "windowed_job", "report"]

config = DemoConfig.from_env()
recorder = Recorder(config)

app = Celery("csl_demo", broker=config.redis_url, backend=config.redis_url)
app.conf.update(
    singleton_lock_prefix=config.lock_prefix,
    broker_transport_options={"global_keyprefix": config.broker_prefix},
    # A lost Redis must end the demo, not hang its clean-up in endless reconnects.
    result_backend_transport_options={"global_keyprefix": config.result_prefix,
                                      "retry_policy": {"max_retries": 2, "interval_start": 0.2,
                                                       "interval_step": 0.2, "interval_max": 0.5}},
    broker_connection_retry_on_startup=True,
    worker_prefetch_multiplier=1,
    worker_hijack_root_logger=True,
    result_expires=3600,
    beat_max_loop_interval=0.5,
    beat_schedule={
        "report-every-second": {"task": "demo.report", "schedule": config.report_every},
    },
)


def _work(task: Any, label: str, seconds: float) -> Dict[str, Any]:
    """The body every demo task shares: record the start, sleep, record the interval."""
    lock = task.lock
    key = lock.key if lock else None
    pid = os.getpid()
    started = recorder.started(task.name, label, key, task.request.id, pid)
    time.sleep(seconds)
    recorder.finished(task.name, label, key, task.request.id, pid, started,
                      lock.fencing_token if lock else None)
    return {"label": label, "pid": pid, "fence": lock.fencing_token if lock else None}


# Short TTLs: if the demo is killed with -9, its locks are gone within seconds.
_COMMON = dict(base=LockedTask, bind=True, lock_key=("account",), lock_ttl=6)


@app.task(name="demo.skip", on_locked="skip", **_COMMON)
def skip_job(self: Any, account: str, seq: int = 0, seconds: float = 1.2) -> Dict[str, Any]:
    """A duplicate of a running call is dropped (ends SUCCESS with ``None``)."""
    return _work(self, f"skip({account})", seconds)


@app.task(name="demo.retry", on_locked="retry", lock_retry_delay=0.4, **_COMMON)
def retry_job(self: Any, account: str, seq: int = 0, seconds: float = 0.5) -> Dict[str, Any]:
    """A duplicate is re-queued with a jittered countdown until the holder is done."""
    return _work(self, f"retry({account})", seconds)


@app.task(name="demo.wait", on_locked="wait", lock_wait_timeout=15, **_COMMON)
def wait_job(self: Any, account: str, seq: int = 0, seconds: float = 1.0) -> Dict[str, Any]:
    """A duplicate blocks until the holder releases (woken by the release, no polling)."""
    return _work(self, f"wait({account})", seconds)


@app.task(name="demo.raise", on_locked="raise", **_COMMON)
def raise_job(self: Any, account: str, seq: int = 0, seconds: float = 1.0) -> Dict[str, Any]:
    """A duplicate fails with ``LockedError`` naming the holder."""
    return _work(self, f"raise({account})", seconds)


@app.task(name="demo.debounce", lock_debounce=0.4, lock_retry_delay=0.4, **_COMMON)
def debounce_job(self: Any, account: str, seq: int = 0, seconds: float = 0.5) -> Dict[str, Any]:
    """A burst of edits runs once, 0.4 s after the last, with the last edit (the others are superseded)."""
    return _work(self, f"debounce({account}={seq})", seconds)


@app.task(name=LIMITED.task, lock_limit=LIMITED.limit, **_COMMON)
def limited_job(self: Any, account: str, seq: int = 0, seconds: float = 1.5) -> Dict[str, Any]:
    """Up to two calls of an account run at once; a third meanwhile is skipped."""
    return _work(self, f"limited({account})", seconds)


@app.task(name=WINDOWED.task, lock_limit=WINDOWED.limit, lock_window=WINDOWED.window, **_COMMON)
def windowed_job(self: Any, account: str, seq: int = 0, seconds: float = 0.3) -> Dict[str, Any]:
    """At most one call of an account starts in any window (a rate limit shared by every worker);
    the others within it are skipped, even after the run has ended."""
    return _work(self, f"windowed({account})", seconds)


@app.task(name="demo.report", base=LockedTask, bind=True, lock_scope="queued_or_running",
          on_locked="skip", lock_ttl=6, lock_queue_ttl=60)
def report(self: Any) -> Dict[str, Any]:
    """The beat job: scheduled every second, takes 2.5 s; never queued or run twice at once."""
    return _work(self, "report()", config.report_seconds)


# -- recording duplicates and beat's publishes, in whichever process they happen ---------------
def on_lock_conflict(sender: Any = None, key: str = "", task_id: Any = None, holder: Any = None,
                     action: str = "", at: str = "run", **kwargs: Any) -> None:
    recorder.conflict(getattr(sender, "name", str(sender)), key, action, at, task_id, holder)


def on_after_task_publish(sender: Any = None, **kwargs: Any) -> None:
    # Only beat publishes the report job; the producer counts its own calls.
    if sender == report.name:
        recorder.count(report.name, "sent")


lock_signals.lock_conflict.connect(on_lock_conflict, weak=False, dispatch_uid="csl_demo.conflict")
celery_signals.after_task_publish.connect(on_after_task_publish, weak=False, dispatch_uid="csl_demo.publish")
