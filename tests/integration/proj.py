"""The Celery app the integration tests run in real workers (and publish from).

Configured from the environment so the test process and the worker processes
agree: ``CSL_BROKER_URL`` (broker and result backend), ``CSL_LOCK_URL`` (the
lock Redis), ``CSL_EVENTS_URL`` (where task bodies record what they did), ``CSL_LOCK_TRANSPORT_OPTIONS``
(JSON, the lock store's redis-py options), and the prefixes of tests/support/suite_redis.py.
Each task records its interval (start, end, pid, arguments) in Redis, so the
tests judge overlap from what really ran.
"""

from __future__ import annotations

import json
import os
import time

import redis
from celery import Celery, Task
from celery.exceptions import Reject

from celery_singleton_lock import LockedTask, LockLostError
from tests.support.suite_redis import broker_prefix, lock_prefix

if not os.environ.get("CSL_BROKER_URL"):  # never a default: it would be someone's Redis
    raise RuntimeError("the test app needs CSL_BROKER_URL, CSL_LOCK_URL and CSL_EVENTS_URL: the integration "
                       "tests' test_env fixture sets them")
BROKER_URL = os.environ["CSL_BROKER_URL"]
LOCK_URL = os.environ["CSL_LOCK_URL"]
EVENTS_URL = os.environ["CSL_EVENTS_URL"]

app = Celery("proj", broker=BROKER_URL, backend=BROKER_URL)
app.conf.update(
    singleton_lock_url=LOCK_URL,
    singleton_lock_prefix=lock_prefix(),
    task_serializer=os.environ.get("CSL_SERIALIZER", "json"),
    accept_content=["json", "msgpack"],
    result_accept_content=["json", "msgpack"],
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    result_expires=600,
    worker_hijack_root_logger=True,
    broker_transport_options={
        "visibility_timeout": float(os.environ.get("CSL_VISIBILITY_TIMEOUT", "3600")),
        # sweep for unacked messages past the visibility timeout every second (default: ~100 s)
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    },
)
if broker_prefix():  # on a Redis the suite did not start, every broker and result key under the run's prefix
    app.conf.broker_transport_options["global_keyprefix"] = broker_prefix()
    app.conf.result_backend_transport_options = {"global_keyprefix": broker_prefix()}
if os.environ.get("CSL_LOCK_TRANSPORT_OPTIONS"):  # a JSON object of redis-py options (TLS files, ...)
    app.conf.singleton_lock_transport_options = json.loads(os.environ["CSL_LOCK_TRANSPORT_OPTIONS"])
if os.environ.get("CSL_ACKS_LATE"):
    app.conf.task_acks_late = True

_events = None


def events() -> "redis.Redis":
    global _events
    if _events is None or _events.connection_pool.pid != os.getpid():
        _events = redis.Redis.from_url(EVENTS_URL)
    return _events


def _fence(task):
    """The execution's fencing token; ``None`` without a lock, or when it was lost before it was read."""
    lock = task.lock
    if lock is None:
        return None
    try:
        return lock.fencing_token
    except LockLostError:
        return None


def _record(kind: str, task, started: float, **extra) -> None:
    entry = dict(task=task.name, id=task.request.id, pid=os.getpid(), start=started, end=time.time(),
                 fence=_fence(task), **extra)
    events().rpush(kind, json.dumps(entry))


def _body(task, key, duration: float) -> dict:
    started = time.time()
    events().rpush("started", json.dumps(dict(task=task.name, id=task.request.id, key=key, pid=os.getpid(),
                                              start=started)))
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        time.sleep(min(0.05, max(deadline - time.monotonic(), 0)))
    _record("intervals", task, started, key=key)
    return {"key": key, "pid": os.getpid(), "fence": _fence(task)}


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",))
def storm(self, key, seq=0, duration=0.3):
    return _body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True)
def account(self, account_id, full=False):
    """Every argument decides the lock (lock_key=None)."""
    return _body(self, [account_id, full], 1.5 if account_id == 7 and not full else 0.2)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("account_id",))
def sync(self, account_id, payload=None, duration=0.5):
    return _body(self, account_id, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_ttl=2)
def short_ttl(self, key, duration=7.0):
    return _body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_ttl=30)
def long_running(self, key, duration=30.0):
    return _body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_ttl=30, time_limit=1.5)
def hard_limited(self, key, duration=30.0):
    return _body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_ttl=30, soft_time_limit=1)
def soft_limited(self, key, duration=30.0):
    return _body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_ttl=3, lock_heartbeat=1)
def quick_ttl(self, key, duration=30.0):
    return _body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",))
def failing(self, key):
    events().rpush("started", json.dumps(dict(task=self.name, id=self.request.id, key=key)))
    raise ValueError(f"boom {key}")


def _reject_until(task, key, times: int) -> int:
    """Ask for the message back (``Reject(requeue=True)``) ``times`` times, then succeed."""
    delivery = events().rpush(f"deliveries:{task.name}", json.dumps(dict(id=task.request.id, key=key)))
    if delivery <= times:
        raise Reject(f"not yet ({delivery})", requeue=True)
    return delivery


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), acks_late=True)
def rejecting(self, key, times=3):
    return _reject_until(self, key, times)


@app.task(shared=False, bind=True, acks_late=True)
def rejecting_plain(self, key, times=3):  # the same body as a plain Celery task, to compare with
    return _reject_until(self, key, times)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), max_retries=1)
def retrying(self, key):
    events().rpush("started", json.dumps(dict(task=self.name, id=self.request.id, key=key,
                                              retries=self.request.retries)))
    if self.request.retries == 0:
        raise self.retry(countdown=30)
    return "retried"


def _retry_now(task, key, cleanup: float, countdown: float = 0) -> int:
    """Re-queues itself (at once by default), then takes a while to leave the body (a cleanup in ``finally``)."""
    started = time.time()
    events().rpush("started", json.dumps(dict(task=task.name, id=task.request.id, key=key, pid=os.getpid(),
                                              start=started, retries=task.request.retries)))
    try:
        if task.request.retries == 0:
            raise task.retry(countdown=countdown)
        return task.request.retries
    finally:
        time.sleep(cleanup)
        _record("intervals", task, started, key=key, retries=task.request.retries)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), max_retries=1)
def retry_now(self, key, cleanup=0.5):
    return _retry_now(self, key, cleanup)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), max_retries=1, lock_scope="queued_or_running")
def qor_retry_now(self, key, cleanup=0.5):
    return _retry_now(self, key, cleanup)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), max_retries=1, lock_scope="queued_or_running")
def qor_retry_later(self, key, cleanup=8.0):
    return _retry_now(self, key, cleanup, countdown=30)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), on_locked="retry", lock_retry_delay=0.5)
def policy_retry(self, key, duration=1.5):
    return _body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), on_locked="retry", lock_retry_delay=0.2, lock_retry_max=2, max_retries=0)
def policy_retry_bounded(self, key, duration=0.1):
    return _body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), on_locked="wait", lock_wait_timeout=10)
def policy_wait(self, key, duration=1.0):
    return _body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), on_locked="raise")
def policy_raise(self, key, duration=1.5):
    return _body(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), on_lock_error="retry", lock_retry_delay=0.3, lock_retry_max=1)
def error_retry(self, key):
    return _body(self, key, 0)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), on_lock_error="run")
def error_run(self, key):
    return _body(self, key, 0)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), on_lock_error="raise")
def error_raise(self, key):
    return _body(self, key, 0)


# -- enqueue-time scopes -------------------------------------------------------------------------
def _tracked(task, key, duration: float) -> dict:
    """A body that also keeps the set of running copies, for the beat pile-up test."""
    events().sadd("running", task.request.id)
    try:
        return _body(task, key, duration)
    finally:
        events().srem("running", task.request.id)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_scope="queued_or_running")
def qor_job(self, key, duration=0.5):
    return _tracked(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_scope="queued_or_running", on_locked="raise")
def qor_raise(self, key, duration=0.5):
    return _tracked(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_scope="queued_or_running", on_lock_error="raise")
def qor_error_raise(self, key, duration=0.5):
    return _tracked(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_scope="queued", lock_retry_delay=0.3, lock_retry_max=0)
def queued_job(self, key, duration=0.5):
    return _tracked(self, key, duration)


def _pair_key(pair, duration=0.2):
    return str(pair)  # "(1, 2)" for a tuple, "[1, 2]" for the list a JSON message delivers


@app.task(shared=False, base=LockedTask, bind=True, lock_key=_pair_key, lock_scope="queued_or_running")
def qor_pair(self, pair, duration=0.2):
    return _tracked(self, pair, duration)


@app.task(shared=False)
def collect(results):
    """A chord body: what its header's members returned."""
    return results


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_scope="queued", on_locked="wait",
          lock_wait_timeout=30)
def queued_wait(self, key, duration=0.5):
    return _tracked(self, key, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_scope="queued_or_running", max_retries=2)
def qor_self_retry(self, key):
    events().rpush("started", json.dumps(dict(task=self.name, id=self.request.id, key=key,
                                              retries=self.request.retries, fence=self.lock.fencing_token)))
    if self.request.retries == 0:
        raise self.retry(countdown=1.5)
    return self.request.retries


@app.task(shared=False, base=LockedTask, bind=True, lock_scope="queued_or_running", lock_key=("key",))
def beat_qor(self, key="beat"):
    return _tracked(self, key, 3.5)


@app.task(shared=False, base=LockedTask, bind=True, lock_scope="queued", lock_key=("key",), lock_retry_delay=0.5)
def beat_queued(self, key="beat"):
    return _tracked(self, key, 3.5)


class AroundCall(Task):
    """A mixin as users write them (an app context, a tracing span): its ``__call__`` wraps the body."""

    def __call__(self, *args, **kwargs):
        events().rpush("around", json.dumps(dict(id=self.request.id, phase="enter")))
        try:
            return super().__call__(*args, **kwargs)
        finally:
            events().rpush("around", json.dumps(dict(id=self.request.id, phase="exit")))


class LockedAroundCall(LockedTask, AroundCall):
    pass


@app.task(shared=False, base=LockedAroundCall, bind=True, lock_key=("key",))
def around(self, key, duration=0.3):
    return dict(_body(self, key, duration), id=self.request.id)


if os.environ.get("CSL_BEAT_TASK"):
    app.conf.beat_schedule = {
        "every-second": {"task": f"tests.integration.proj.{os.environ['CSL_BEAT_TASK']}", "schedule": 1.0},
    }


#: The downstream store of ``fenced``: refuses a write whose fence is smaller than the last one
#: it accepted for the key, and logs every write (accepted or not) with what the writer knew.
_FENCED_WRITE = """
local last = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '-1')
local ok = tonumber(ARGV[2]) >= last
if ok then redis.call('hset', KEYS[1], ARGV[1], ARGV[2]) end
redis.call('rpush', KEYS[2], ARGV[3])
return ok and 1 or 0
"""


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), lock_ttl=3, on_locked="retry", lock_retry_delay=0.3)
def fenced(self, key, duration=3.0, writes=3):
    """A body that writes ``writes`` times, spread over ``duration``, to a fenced downstream store."""
    started = time.time()
    events().rpush("started", json.dumps(dict(task=self.name, id=self.request.id, key=key, start=started)))
    for _ in range(writes):
        time.sleep(duration / writes)
        lock = self.lock
        note = json.dumps(dict(id=self.request.id, key=key, fence=lock.fencing_token, lost=lock.lost, at=time.time()))
        accepted = events().eval(_FENCED_WRITE, 2, "fenced:last", "fenced:writes", key, lock.fencing_token, note)
        events().rpush("fenced:answers", json.dumps(dict(id=self.request.id, accepted=bool(accepted))))
    _record("intervals", self, started, key=key)
