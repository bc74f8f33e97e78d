"""A ``retry`` duplicate whose window turn is under a second away waits for it in place and runs:
it was never re-queued, so it is neither logged as "is a duplicate (retry)" nor counted in
``lock_conflict`` (what ``duplicates_total{outcome="retried"}`` counts); one that is re-queued is,
once (MemoryBackend, no worker)."""

from __future__ import annotations

import logging
from typing import List

from celery import Celery

from celery_singleton_lock import LockedTask, lock_conflict
from celery_singleton_lock.run.attempt import Attempt
from celery_singleton_lock.run.decisions import Requeue, Run
from celery_singleton_lock.run.policy import decide
from celery_singleton_lock.store import Grant, MemoryBackend
from tests.support.apps import MADE


def _task(window: float):
    app = Celery("in-place", broker="memory://", set_as_current=False)
    MADE.append(app)
    app.conf.singleton_lock_backend = MemoryBackend()
    app.finalize()

    @app.task(base=LockedTask, shared=False, lock_key=(), lock_window=window, on_locked="retry")
    def sync():
        return "synced"

    return sync


def _decide(task, task_id: str):
    """One execution up to its decision, as ``run_guarded`` goes."""
    task.push_request(id=task_id, retries=0)
    try:
        attempt = Attempt(task, (), {})
        outcome, started = attempt.acquire()
        return Run(outcome, started) if isinstance(outcome, Grant) else decide(attempt, outcome)
    finally:
        task.pop_request()


def _conflicts(run) -> List[str]:
    seen: List[str] = []

    def on_conflict(sender=None, action=None, **kwargs):
        seen.append(action)

    lock_conflict.connect(on_conflict)
    try:
        run()
    finally:
        lock_conflict.disconnect(on_conflict)
    return seen


def test_a_call_that_waits_for_its_turn_in_place_and_runs_is_no_counted_duplicate(caplog):
    sync = _task(window=0.3)
    assert sync.apply().get() == "synced"  # its place is kept by its window for 0.3 s
    decisions = []
    with caplog.at_level(logging.INFO, logger="celery_singleton_lock"):
        conflicts = _conflicts(lambda: decisions.append(_decide(sync, "second")))
    assert isinstance(decisions[0], Run), decisions
    assert conflicts == [], conflicts
    logged = caplog.text
    assert "is a duplicate (retry)" not in logged and "waits its turn" in logged, logged


def test_a_call_that_is_re_queued_is_counted_once():
    sync = _task(window=30)
    assert sync.apply().get() == "synced"
    decisions = []
    conflicts = _conflicts(lambda: decisions.append(_decide(sync, "second")))
    assert isinstance(decisions[0], Requeue), decisions
    assert conflicts == ["retry"]
