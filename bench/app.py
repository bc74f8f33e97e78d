"""The Celery app the end-to-end and storm benchmarks run in real workers (and publish from).

Configured from the environment so the bench process and its workers agree:
``BENCH_BROKER_URL`` (broker), ``BENCH_LOCK_URL`` (locks of every variant: ours,
celery-once's and celery-singleton's), ``BENCH_EVENTS_URL`` (what the tasks record).

Every variant of a task has the same empty (or 50 ms) body; only the base class
differs. A ``task_postrun`` receiver records one completion timestamp per task,
the same for every variant, after the lock of every variant has been released
(ours in ``__call__``, celery-once in ``after_return``, celery-singleton in ``on_success``).
"""

from __future__ import annotations

import json
import os
import time

import redis
from celery import Celery
from celery.signals import task_postrun

from celery_singleton_lock import LockedTask

if not os.environ.get("BENCH_BROKER_URL"):  # never a default: the bench empties these databases
    raise RuntimeError("the bench app needs BENCH_BROKER_URL, BENCH_LOCK_URL and BENCH_EVENTS_URL, which "
                       "`python -m bench` sets to the servers it starts")
BROKER_URL = os.environ["BENCH_BROKER_URL"]
LOCK_URL = os.environ["BENCH_LOCK_URL"]
EVENTS_URL = os.environ["BENCH_EVENTS_URL"]

app = Celery("bench", broker=BROKER_URL)
app.conf.update(
    singleton_lock_url=LOCK_URL,
    singleton_lock_prefix="bench",
    # celery-once and celery-singleton: same Redis, their documented settings
    ONCE={"backend": "celery_once.backends.Redis", "settings": {"url": LOCK_URL, "default_timeout": 600}},
    singleton_backend_url=LOCK_URL,
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=True,
    worker_redirect_stdouts=False,
)

try:
    from celery_once import QueueOnce
except ImportError:  # pragma: no cover - the bench extra installs it
    QueueOnce = None
try:
    from celery_singleton import Singleton
except ImportError:  # pragma: no cover
    Singleton = None

_events = None


def events() -> "redis.Redis":
    global _events
    if _events is None or _events.connection_pool.pid != os.getpid():
        _events = redis.Redis.from_url(EVENTS_URL)
    return _events


@task_postrun.connect(weak=False, dispatch_uid="bench.postrun")
def _done(sender=None, args=None, **_: object) -> None:
    """One timestamp per finished task, keyed by the run id (the first argument)."""
    if sender is not None and sender.name.startswith("bench.") and args:
        events().rpush(f"done:{args[0]}", time.time())


def _storm_body(key: str, run: str) -> None:
    started = time.time()
    time.sleep(0.05)
    events().rpush(f"intervals:{run}", json.dumps({"key": key, "start": started, "end": time.time()}))


# -- end to end: trivial bodies, distinct arguments ------------------------------------------------
@app.task(name="bench.plain")
def plain(run, i):
    return None


@app.task(name="bench.locked_running", base=LockedTask)
def locked_running(run, i):
    return None


@app.task(name="bench.locked_qor", base=LockedTask, lock_scope="queued_or_running")
def locked_qor(run, i):
    return None


@app.task(name="bench.locked_replace", base=LockedTask, lock_scope="queued_or_running", on_locked="replace")
def locked_replace(run, i):
    return None


# The shortest quiet period: what debouncing costs beside the wait itself (a countdown message).
@app.task(name="bench.locked_debounced", base=LockedTask, lock_debounce=0.001)
def locked_debounced(run, i):
    return None


# -- storm: 50 ms bodies, the key decides -------------------------------------------------------
@app.task(name="bench.storm_plain")
def storm_plain(run, key, seq):
    _storm_body(key, run)


@app.task(name="bench.storm_running", base=LockedTask, lock_key=("run", "key"))
def storm_running(run, key, seq):
    _storm_body(key, run)


@app.task(name="bench.storm_qor", base=LockedTask, lock_key=("run", "key"), lock_scope="queued_or_running")
def storm_qor(run, key, seq):
    _storm_body(key, run)


if QueueOnce is not None:
    @app.task(name="bench.once", base=QueueOnce, once={"graceful": True})
    def once(run, i):
        return None

    @app.task(name="bench.storm_once", base=QueueOnce, once={"graceful": True, "keys": ["run", "key"]})
    def storm_once(run, key, seq):
        _storm_body(key, run)

if Singleton is not None:
    @app.task(name="bench.singleton", base=Singleton)
    def singleton(run, i):
        return None

    @app.task(name="bench.storm_singleton", base=Singleton, unique_on=["run", "key"])
    def storm_singleton(run, key, seq):
        _storm_body(key, run)
