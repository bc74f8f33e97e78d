"""A refusal at definition stays the same refusal: the app's registry is built whole, and every later
use of a refused task raises the same ConfigurationError, not Celery's ``NotRegistered`` (no Redis)."""

from __future__ import annotations

import threading

import pytest
from celery import Celery

from celery_singleton_lock import ConfigurationError, LockedTask
from tests.support.apps import MADE

#: Tasks Celery builds into every app as it is finalized (one finalize callback each).
BUILTINS = {"celery.backend_cleanup", "celery.chord_unlock", "celery.map", "celery.starmap", "celery.chunks",
            "celery.group", "celery.chain", "celery.chord", "celery.accumulate"}


def _app(**conf):
    app = Celery("refusing", broker="memory://", set_as_current=False)
    MADE.append(app)
    app.conf.update(conf)
    return app


def _refusals(calls):
    seen = []
    for call in calls:
        with pytest.raises(ConfigurationError) as raised:
            call()
        seen.append(str(raised.value))
    return seen


def test_a_refused_setting_leaves_every_task_registered_and_each_call_refused_alike():
    app = _app(singleton_lock_url="redis://lock-host/0", singleton_lock_tll=5)

    @app.task(base=LockedTask, shared=False)
    def first(account_id):
        pass

    @app.task(shared=False)
    def plain(account_id):
        return account_id

    with pytest.raises(ConfigurationError, match="unknown setting app.conf.singleton_lock_tll"):
        app.finalize()
    assert BUILTINS | {first.name, plain.name} <= set(app.tasks)
    seen = _refusals([lambda: first.apply_async((1,)), lambda: first.delay(2), lambda: first.apply((3,)).get()])
    assert set(seen) == {"unknown setting app.conf.singleton_lock_tll: did you mean singleton_lock_ttl?"}
    assert plain.apply((4,)).get() == 4  # a task that takes no lock still runs


def test_tasks_that_disagree_on_a_shared_lock_are_both_refused_at_every_call():
    app = _app(singleton_lock_url="redis://lock-host/0")

    @app.task(base=LockedTask, shared=False, lock_name="account", lock_key=("account_id",), lock_limit=2)
    def sync_account(account_id):
        pass

    @app.task(base=LockedTask, shared=False, lock_name="account", lock_key=("account_id",))
    def delete_account(account_id):
        pass

    with pytest.raises(ConfigurationError, match="share lock_name='account' but disagree on lock_limit"):
        app.finalize()
    calls = [sync_account.delay, delete_account.delay] * 2
    seen = _refusals([lambda call=call: call(1) for call in calls])
    assert len(set(seen)) == 1 and "disagree on lock_limit" in seen[0], seen


def test_a_refusal_is_raised_anew_each_time_not_the_same_object_growing_a_traceback():
    app = _app(singleton_lock_url="redis://lock-host/0")
    app.finalize()
    with pytest.raises(ConfigurationError):
        @app.task(base=LockedTask, shared=False, lock_scope="forever")
        def job(account_id):
            pass
    task = app.tasks[f"{__name__}.job"]
    errors = []
    for _ in range(2):
        with pytest.raises(ConfigurationError, match="lock_scope='forever'") as raised:
            task.delay(1)
        errors.append(raised.value)
    assert errors[0] is not errors[1] and str(errors[0]) == str(errors[1])


def test_a_worker_still_starting_ends_on_a_refusal_but_a_check_judging_tasks_never_ends_it(monkeypatch, caplog):
    from celery.app.task import Task

    from celery_singleton_lock.config import refused

    monkeypatch.setattr(Task, "_stackprotected", True, raising=False)  # what a starting worker has set
    monkeypatch.setattr(refused, "_STARTED", threading.Event())
    app = _app(singleton_lock_url="redis://lock-host/0")
    app.finalize()
    with pytest.raises(SystemExit) as ended:
        @app.task(base=LockedTask, shared=False, lock_scope="forever")
        def job(account_id):
            pass
    assert ended.value.code == refused.EXIT_SETTINGS == 65
    assert [r.getMessage() for r in caplog.records if r.levelname == "CRITICAL"] == [
        "singleton lock: refusing to start: task 'tests.unit.test_refusal_stays.job': lock_scope='forever' is not "
        "one of 'running', 'queued', 'queued_or_running'"]
    with refused.judging(), pytest.raises(ConfigurationError, match="lock_scope='never'"):
        @app.task(base=LockedTask, shared=False, lock_scope="never")
        def other(account_id):
            pass
    refused.started()
    with pytest.raises(ConfigurationError, match="lock_scope='again'"):
        @app.task(base=LockedTask, shared=False, lock_scope="again")
        def third(account_id):
            pass
