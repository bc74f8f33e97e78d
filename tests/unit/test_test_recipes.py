"""docs/testing.md's test recipe (``MemoryBackend``, eager mode), also where the project's settings name
the deployed lock Redis, and what an eager duplicate that retries ends with."""

from __future__ import annotations

import types

import pytest
from celery import Celery

from celery_singleton_lock import LockedError, LockedTask
from celery_singleton_lock.config.settings import resolve_settings
from celery_singleton_lock.store import MemoryBackend
from tests.support.apps import MADE


def _project_app():
    """A Django-style app whose settings name the deployed lock Redis (under the CELERY namespace)."""
    settings = types.SimpleNamespace(CELERY_BROKER_URL="redis://broker-host:6379/0",
                                     CELERY_SINGLETON_LOCK_URL="redis://:pw@lock-host:6379/1")
    app = Celery("proj", set_as_current=False)
    app.config_from_object(settings, namespace="CELERY")
    MADE.append(app)
    return app


def test_the_faq_recipe_works_where_the_settings_name_a_lock_url():
    app = _project_app()
    # docs/testing.md's lines, as written:
    app.conf.singleton_lock_backend = MemoryBackend()   # instead of singleton_lock_url
    app.conf.task_always_eager = True                   # or run a worker in-process

    @app.task(base=LockedTask, shared=False)
    def refresh(account_id):
        return account_id

    assert refresh.delay(42).get() == 42
    assert resolve_settings(app.conf).backend is app.conf.singleton_lock_backend


def test_a_backend_object_in_the_test_settings_wins_over_the_inherited_url():
    settings = types.SimpleNamespace(CELERY_BROKER_URL="memory://", CELERY_TASK_ALWAYS_EAGER=True,
                                     CELERY_SINGLETON_LOCK_URL="redis://lock-host:6379/1",
                                     CELERY_SINGLETON_LOCK_BACKEND=MemoryBackend())
    app = Celery("proj", set_as_current=False)
    app.config_from_object(settings, namespace="CELERY")
    assert resolve_settings(app.conf).backend is settings.CELERY_SINGLETON_LOCK_BACKEND
    assert "lock-host" not in repr(resolve_settings(app.conf))


@pytest.mark.parametrize("retry_max", [None, 3])
def test_an_eager_duplicate_that_retries_spends_no_max_retries(retry_max):
    app = Celery("eager", broker="memory://", set_as_current=False)
    MADE.append(app)
    app.conf.singleton_lock_backend = MemoryBackend()
    app.conf.task_always_eager = True
    seen = {}

    @app.task(base=LockedTask, shared=False, bind=True, on_locked="retry", lock_retry_max=retry_max,
              lock_key=("account_id",), max_retries=0)
    def sync(self, account_id, nested):
        if nested:
            inner = sync.delay(account_id, nested=False)  # a duplicate while this run holds the lock
            seen.update(state=inner.state, error=inner.result, retries=self.request.retries)
        return account_id

    outer = sync.delay(7, nested=True)
    assert outer.get() == 7
    assert seen["state"] == "FAILURE" and isinstance(seen["error"], LockedError), seen
    assert seen["error"].holder == outer.id
    assert "in eager mode a lock retry cannot wait for the holder" in str(seen["error"])
    assert seen["retries"] == 0
    assert sync.delay(7, nested=False).get() == 7  # the lock was freed: the next call runs


def test_a_worker_started_on_a_backend_object_over_a_url_is_warned():
    from celery_singleton_lock.worker.start_check import check_lock_store

    app = _project_app()
    app.conf.singleton_lock_backend = MemoryBackend()

    @app.task(base=LockedTask, shared=False)
    def refresh(account_id):
        return account_id

    warning = check_lock_store(app)
    assert "singleton_lock_backend MemoryBackend is in use" in warning and "is ignored" in warning
    assert ":pw@" not in warning
