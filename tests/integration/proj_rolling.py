"""The test app of tests/integration/test_rolling_deploy.py: one app that both an older version of the
package (built from the repository's history, before a lock's key became its name and key values
without parameter names) and this one run, each in a worker of its own queue (``-Q older``,
``-Q newer``), so the test decides which version runs which copy of a call.

Configured from the environment as :mod:`tests.integration.proj` is (``CSL_BROKER_URL``,
``CSL_LOCK_URL``, ``CSL_EVENTS_URL``, ``CSL_LOCK_TRANSPORT_OPTIONS`` and the prefixes of
tests/support/suite_redis.py). ``CSL_GUARD_OLD_KEYS=1`` turns on ``singleton_lock_guard_old_keys``
(only then: an older package refuses a ``singleton_lock_*`` setting it does not know as a typo).

Nothing here may use what the older package lacks. Each body records, in the events Redis:

- ``started``: its start, pid and the directory of the ``celery_singleton_lock`` it imported;
- ``intervals``: its start and end, when it ends;

and it runs for ``duration`` seconds, or until the test sets ``end:<task id>``, whichever comes
first (``duration`` is no part of the lock's key: ``lock_key=("account_id",)``). Every delivery of a
task's message is recorded in ``entered`` (a re-queued copy enters again), and every
``lock_conflict`` the library sends in ``conflicts``.
"""

from __future__ import annotations

import json
import os
import time

import redis
from celery import Celery
from celery.signals import task_prerun

import celery_singleton_lock
from celery_singleton_lock import LockedTask
from celery_singleton_lock.signals import lock_conflict
from tests.support.suite_redis import broker_prefix, lock_prefix

if not os.environ.get("CSL_BROKER_URL"):  # never a default: it would be someone's Redis
    raise RuntimeError("the test app needs CSL_BROKER_URL, CSL_LOCK_URL and CSL_EVENTS_URL: the integration "
                       "tests' test_env fixture sets them")
BROKER_URL = os.environ["CSL_BROKER_URL"]
LOCK_URL = os.environ["CSL_LOCK_URL"]
EVENTS_URL = os.environ["CSL_EVENTS_URL"]
#: Where the ``celery_singleton_lock`` this process runs lives (an older version's tree, or this one).
PACKAGE = os.path.dirname(os.path.abspath(celery_singleton_lock.__file__))

app = Celery("proj_rolling", broker=BROKER_URL, backend=BROKER_URL)
app.conf.update(
    singleton_lock_url=LOCK_URL,
    singleton_lock_prefix=lock_prefix(),
    task_serializer="json",
    accept_content=["json"],
    result_accept_content=["json"],
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    result_expires=600,
    broker_transport_options={"visibility_timeout": 3600},
)
if broker_prefix():  # on a Redis the suite did not start, every broker and result key under the run's prefix
    app.conf.broker_transport_options["global_keyprefix"] = broker_prefix()
    app.conf.result_backend_transport_options = {"global_keyprefix": broker_prefix()}
if os.environ.get("CSL_LOCK_TRANSPORT_OPTIONS"):  # a JSON object of redis-py options (TLS files, ...)
    app.conf.singleton_lock_transport_options = json.loads(os.environ["CSL_LOCK_TRANSPORT_OPTIONS"])
if os.environ.get("CSL_GUARD_OLD_KEYS") == "1":  # only the newer worker: the older package knows no such setting
    app.conf.singleton_lock_guard_old_keys = True

_events = None


def events() -> "redis.Redis":
    global _events
    if _events is None or _events.connection_pool.pid != os.getpid():
        _events = redis.Redis.from_url(EVENTS_URL)
    return _events


def _push(kind: str, **entry) -> None:
    events().rpush(kind, json.dumps(dict(entry, pid=os.getpid(), package=PACKAGE)))


def _body(task, account_id, duration: float) -> dict:
    started = time.time()
    _push("started", task=task.name, id=task.request.id, key=account_id, start=started)
    deadline = time.monotonic() + duration
    told = f"end:{task.request.id}"
    while time.monotonic() < deadline and not events().exists(told):
        time.sleep(min(0.02, max(deadline - time.monotonic(), 0)))
    _push("intervals", task=task.name, id=task.request.id, key=account_id, start=started, end=time.time())
    return {"key": account_id, "pid": os.getpid(), "package": PACKAGE}


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("account_id",), lock_ttl=30, on_locked="skip")
def sync_or_skip(self, account_id, duration=2.0):
    return _body(self, account_id, duration)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=("account_id",), lock_ttl=30, on_locked="wait",
          lock_wait_timeout=60, lock_retry_delay=0.2)
def sync_or_wait(self, account_id, duration=2.0):
    return _body(self, account_id, duration)


@task_prerun.connect(weak=False, dispatch_uid="proj_rolling.entered")
def _entered(sender=None, task_id=None, **kwargs):
    if sender is not None and sender.name.startswith(__name__ + "."):
        _push("entered", task=sender.name, id=task_id, at=time.time())


@lock_conflict.connect(weak=False, dispatch_uid="proj_rolling.conflicts")
def _conflict(sender=None, key=None, task_id=None, holder=None, action=None, **kwargs):
    _push("conflicts", task=getattr(sender, "name", None), id=task_id, key=key, holder=holder, action=action,
          at=time.time())
