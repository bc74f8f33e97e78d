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
from celery.signals import task_postrun, worker_process_init, worker_process_shutdown

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


_profiler = None


@worker_process_init.connect(weak=False, dispatch_uid="bench.profile_start")
def _profile_start(**_: object) -> None:
    """With ``BENCH_PROFILE_DIR`` set, each pool process profiles everything it runs until it exits."""
    global _profiler
    if os.environ.get("BENCH_PROFILE_DIR"):
        import cProfile

        _profiler = cProfile.Profile(time.process_time)  # CPU: a pool process waiting for work costs none
        _profiler.enable()


@worker_process_shutdown.connect(weak=False, dispatch_uid="bench.profile_stop")
def _profile_stop(**_: object) -> None:
    if _profiler is not None:
        _profiler.disable()
        _profiler.dump_stats(os.path.join(os.environ["BENCH_PROFILE_DIR"], f"pool-{os.getpid()}.prof"))


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


# -- limits: what a place costs (empty bodies), and a per-key rate limit (short bodies) ---------------------
RATE_TIMES, RATE_PER = 5, 2  # at most 5 starts of a key in any 2 s


@app.task(name="bench.locked_limit1", base=LockedTask, lock_limit=1)
def locked_limit1(run, i):
    return None


@app.task(name="bench.locked_limit3", base=LockedTask, lock_limit=3)
def locked_limit3(run, i):
    return None


@app.task(name="bench.locked_window", base=LockedTask, lock_window=60)
def locked_window(run, i):
    return None


_plain_locks = None


@app.task(name="bench.redis_py_lock")
def redis_py_lock(run, i):
    """What people write by hand: a plain task whose body takes redis-py's ``Lock`` named after its
    arguments and releases it (no renewal, no fence, no release when the process dies)."""
    global _plain_locks
    if _plain_locks is None or _plain_locks.connection_pool.pid != os.getpid():
        _plain_locks = redis.Redis.from_url(LOCK_URL)
    lock = _plain_locks.lock(f"bench:redis-py:{run}:{i}", timeout=30, thread_local=False)
    if lock.acquire(blocking=False):
        lock.release()


def _rate_body(run, key, requeues):
    events().rpush(f"starts:{run}", json.dumps({"key": key, "start": time.time(), "requeues": requeues}))
    time.sleep(0.01)


@app.task(name="bench.rate_ours", base=LockedTask, bind=True, lock_key=("run", "key"), lock_limit=RATE_TIMES,
          lock_window=RATE_PER, on_locked="retry")
def rate_ours(self, run, key, seq):
    _rate_body(run, key, int(self.request.get("singleton_lock_retries") or 0))  # the lock's re-queues


try:
    from celery_heimdall import HeimdallTask
except ImportError:  # pragma: no cover - the bench extra installs it
    HeimdallTask = None

if HeimdallTask is not None:
    @app.task(name="bench.rate_heimdall", base=HeimdallTask, bind=True,
              heimdall={"times": RATE_TIMES, "per": RATE_PER, "key": lambda args, kwargs: f"{args[0]}:{args[1]}"})
    def rate_heimdall(self, run, key, seq):
        _rate_body(run, key, None)  # heimdall re-publishes refused calls its own way: not counted here


# -- the newest call's hand-over: a 1 s holder, then the newest call of its key ---------------------
def _handover_body(run: str, payload: int, duration: float) -> None:
    started = time.time()
    events().set(f"started:{run}", started)
    time.sleep(duration)
    events().rpush(f"handover:{run}", json.dumps({"payload": payload, "start": started, "end": time.time()}))


@app.task(name="bench.handover_replace", base=LockedTask, lock_key=("run",), lock_scope="queued",
          on_locked="replace")
def handover_replace(run, payload, duration=0.05):
    _handover_body(run, payload, duration)


@app.task(name="bench.handover_debounce", base=LockedTask, lock_key=("run",), lock_debounce=0.3)
def handover_debounce(run, payload, duration=0.05):
    _handover_body(run, payload, duration)
