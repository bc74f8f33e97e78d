"""The test app of :mod:`tests.integration.proj`, with shared locks: tasks sharing a ``lock_name``,
and plain tasks holding a ``SharedLock`` in their bodies.

Each body records its interval, with ``asked``: the time it began asking for its place (the
place was granted between ``asked`` and ``start``), and, for the re-queued ones, every entry
into the body (``entered``), so a test can tell a re-queue from a run.
"""

from __future__ import annotations

import json
import os
import time

from celery_singleton_lock import LockedTask, SharedLock
from tests.integration.proj import *  # noqa: F401,F403 - the tasks
from tests.integration.proj import _fence, app, events

if os.environ.get("CSL_SHARED_RETRY_DELAY"):  # only in the workers of these tests
    app.conf.singleton_lock_retry_delay = float(os.environ["CSL_SHARED_RETRY_DELAY"])

payments = SharedLock("payments-api", limit=2, wait_timeout=120)
long_held = SharedLock("long-held", limit=2, ttl=30)
one_at_a_time = SharedLock("one-at-a-time", on_locked="retry")
partner = SharedLock("partner", limit=3, window=1.0, wait_timeout=120)


def _sleep(duration: float) -> None:
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        time.sleep(min(0.02, max(deadline - time.monotonic(), 0)))


def _record(task, key, asked: float, started: float, fence=None) -> None:
    events().rpush("intervals", json.dumps(dict(
        task=task.name, id=task.request.id, pid=os.getpid(), key=key, asked=asked, start=started, end=time.time(),
        fence=fence, retries=task.request.retries)))


# -- two tasks, one lock per account ---------------------------------------------------------------------
@app.task(shared=False, base=LockedTask, bind=True, lock_name="account", lock_key=("account_id",),
          on_locked="retry", lock_retry_delay=0.1)
def sync_account(self, account_id, duration=0.3):
    started = time.time()
    _sleep(duration)
    _record(self, account_id, started, started, _fence(self))


@app.task(shared=False, base=LockedTask, bind=True, lock_name="account", lock_key=("account_id",),
          on_locked="retry", lock_retry_delay=0.1)
def delete_account(self, account_id, reason="", duration=0.3):
    started = time.time()
    _sleep(duration)
    _record(self, account_id, started, started, _fence(self))


# -- one lock per account, whoever asks: another parameter name, and a shared lock's block ---------------
@app.task(shared=False, base=LockedTask, bind=True, lock_name="account", lock_key=("id",),
          on_locked="retry", lock_retry_delay=0.1)
def close_account(self, id, duration=0.3):
    started = time.time()
    _sleep(duration)
    _record(self, id, started, started, _fence(self))


accounts = SharedLock("account", wait_timeout=120)


@app.task(shared=False, bind=True)
def audit_account(self, account_id, duration=0.3):
    asked = time.time()
    with accounts.hold(account_id) as held:
        started = time.time()
        _sleep(duration)
        _record(self, account_id, asked, started, held.fencing_token)


# -- plain tasks holding a shared lock in their bodies ---------------------------------------------------
def _charge(task, duration: float) -> None:
    asked = time.time()
    with payments.hold() as held:
        started = time.time()
        _sleep(duration)
        _record(task, "payments", asked, started, held.fencing_token)


@app.task(shared=False, bind=True)
def charge_card(self, duration=0.3):
    _charge(self, duration)


@app.task(shared=False, bind=True)
def refund_card(self, duration=0.3):
    _charge(self, duration)


@app.task(shared=False, bind=True)
def capture_card(self, duration=0.3):
    _charge(self, duration)


@app.task(shared=False, bind=True)
def hold_long(self, duration=30.0):
    with long_held.hold():
        events().rpush("held", json.dumps(dict(id=self.request.id, pid=os.getpid())))
        _sleep(duration)


fair = SharedLock("fair", wait_timeout=120)


@app.task(shared=False, bind=True)
def wait_fairly(self, duration=0.2):
    asked = time.time()
    with fair.hold():
        started = time.time()
        _sleep(duration)
        _record(self, "fair", asked, started)


@app.task(shared=False, base=LockedTask, bind=True, lock_key=(), on_locked="wait", lock_wait_timeout=120)
def wait_in_turn(self, duration=0.2):
    started = time.time()
    _sleep(duration)
    _record(self, "turn", started, started)


churn = SharedLock("churn", ttl=300)  # a place left by a dead process would outlive the test


@app.task(shared=False, bind=True)
def churn_holds(self, seconds=30.0, block=0.003):
    """Short blocks back to back, one key per pool process, until ``seconds`` have passed."""
    pid = os.getpid()
    events().sadd("churning", pid)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with churn.hold(pid):
            time.sleep(block)


@app.task(shared=False, bind=True, max_retries=0)
def one_by_one(self, n, duration=0.3):
    events().rpush("entered", json.dumps(dict(id=self.request.id, n=n, retries=self.request.retries)))
    asked = time.time()
    with one_at_a_time.hold():
        started = time.time()
        _sleep(duration)
        _record(self, "one", asked, started)


@app.task(shared=False, bind=True)
def call_partner(self, n):
    asked = time.time()
    with partner.hold():
        _record(self, "partner", asked, time.time())
