"""Reports that say who keeps a place say it truly (MemoryBackend, no worker): a place kept only by
its window names the window, not the long-gone run as its holder; a ``SharedLock`` block outside any
task is called that, not ``task ?`` or ``task NAME[]``, and its loss names what the block checks."""

from __future__ import annotations

import logging

import pytest
from celery import Celery

from celery_singleton_lock import LockedError, LockedTask, SharedLock
from celery_singleton_lock.store import MemoryBackend
from tests.support.apps import MADE
from tests.support.waits import wait_for


def _app(store=None):
    app = Celery("truthful", broker="memory://", set_as_current=False)
    MADE.append(app)
    app.conf.singleton_lock_backend = store if store is not None else MemoryBackend()
    app.finalize()
    return app


def test_a_task_refused_by_a_window_names_the_window_not_the_ended_run():
    app = _app()

    @app.task(base=LockedTask, shared=False, lock_window=60, on_locked="raise")
    def report(day):
        return day

    first = report.apply(("mon",))
    assert first.get() == "mon"
    with pytest.raises(LockedError) as refused:
        report.apply(("mon",)).get()
    message = str(refused.value)
    assert f"held by the window of task {first.id}'s run, which has ended" in message, message
    assert refused.value.holder is None


def test_a_shared_lock_refused_by_a_window_names_the_window():
    lock = SharedLock("throttled", window=60, on_locked="raise", app=_app())
    with lock.hold():
        pass
    with pytest.raises(LockedError) as refused:
        with lock.hold():
            pass
    assert "held by the window of a block's hold, which has ended" in str(refused.value), str(refused.value)
    assert refused.value.holder is None


def test_a_task_refused_by_a_block_outside_a_task_names_the_block():
    app = _app()

    @app.task(base=LockedTask, shared=False, lock_name="printer", lock_key=(), on_locked="raise")
    def print_job():
        return "printed"

    with SharedLock("printer", app=app).hold():
        with pytest.raises(LockedError) as refused:
            print_job.apply().get()
    message = str(refused.value)
    assert "held by a block outside a task on " in message and "task ?" not in message, message
    assert refused.value.holder is None


def test_a_lost_block_outside_a_task_is_reported_as_one(caplog):
    store = MemoryBackend()
    lock = SharedLock("fragile", ttl=0.3, app=_app(store))
    with caplog.at_level(logging.ERROR, logger="celery_singleton_lock"):
        with lock.hold() as held:
            store.release(held.key, held.token)  # an operator's clear, say
            wait_for(lambda: held.lost, timeout=5, what="the heartbeat to notice")
    lost = [record.getMessage() for record in caplog.records if "LOST" in record.getMessage()]
    assert len(lost) == 1, lost
    assert "shared lock 'fragile' (a block outside a task)" in lost[0] and "held.lost" in lost[0], lost
    assert "[]" not in lost[0] and "self.lock" not in lost[0], lost


def _record(**fields):
    from celery_singleton_lock.store import LockRecord

    base = dict(key="k", task="shop.sync", digest="ab" * 16, kind="run", state="running", task_id="t1", host="h",
                pid=1, since_ms=0, age_ms=0, ttl_ms=30_000, pttl_ms=20_000, heartbeat_ms=10_000, since_renewal_ms=5,
                token="tok", stale=False, lost=False, reason="renewed")
    return LockRecord(**{**base, **fields})


def _shown(record, label):
    from celery_singleton_lock.cli.format import show_lines

    return next(line.split(": ", 1)[1] for line in show_lines(record) if line.strip().startswith(label + ":"))


def test_locks_show_puts_a_missing_description_on_the_holders_app_not_the_clis():
    call = _shown(_record(describe=""), "call")
    assert "app.conf" not in call and "the process that took it had singleton_lock_describe off" in call, call
    assert "enqueue lock" in _shown(_record(kind="queued", state="queued"), "call")
    assert _shown(_record(describe="account_id=42"), "call") == "account_id=42"


def test_locks_show_calls_a_block_outside_a_task_so():
    assert _shown(_record(task_id=""), "holder task id") == "- (a block outside a task)"
    assert _shown(_record(task_id="t1"), "holder task id") == "t1"
