"""Values that are accepted by their type but cannot work are refused at definition, naming the option:
a lease shorter than Redis keeps, a renewal period shorter than the store counts (no Redis, no worker)."""

from __future__ import annotations

import pytest
from celery import Celery

from celery_singleton_lock import ConfigurationError, LockedTask, SharedLock
from celery_singleton_lock.config.options import MIN_PERIOD, MIN_TTL, resolve_options
from celery_singleton_lock.store import MemoryBackend
from tests.support.apps import MADE


def _app(**conf):
    app = Celery("impossible", broker="memory://", set_as_current=False)
    MADE.append(app)
    app.conf.singleton_lock_backend = MemoryBackend()
    app.conf.update(conf)
    app.finalize()
    return app


@pytest.mark.parametrize("attrs, message", [
    ({"lock_scope": "queued", "lock_queue_ttl": 0.0004}, "lock_queue_ttl=0.0004 is below the 10 ms Redis can keep"),
    ({"lock_scope": "queued", "lock_queue_ttl": 0.009}, "lock_queue_ttl=0.009 is below the 10 ms Redis can keep"),
    ({"lock_heartbeat": 1e-12}, "lock_heartbeat=1e-12 is below the 1 ms the lock store counts"),
    ({"lock_ttl": 0.005}, "lock_ttl=0.005 is below the 10 ms Redis can keep"),
])
def test_a_task_option_that_cannot_work_is_refused_at_definition_naming_it(attrs, message):
    app = _app()
    with pytest.raises(ConfigurationError, match=message):
        @app.task(base=LockedTask, shared=False, **attrs)
        def job(account_id):
            pass


def test_the_smallest_values_that_work_are_accepted():
    options = resolve_options("t", {"lock_ttl": MIN_TTL, "lock_queue_ttl": MIN_TTL}.get, {})
    assert (options.ttl, options.queue_ttl) == (MIN_TTL, MIN_TTL)
    assert options.heartbeat == pytest.approx(MIN_TTL / 3) and options.heartbeat >= MIN_PERIOD
    assert resolve_options("t", {"lock_heartbeat": MIN_PERIOD}.get, {}).heartbeat == MIN_PERIOD


@pytest.mark.parametrize("setting, value, message", [
    ("singleton_lock_queue_ttl", 0.0001, "singleton_lock_queue_ttl = 0.0001 is wrong: lock_queue_ttl=0.0001 is below"),
    ("singleton_lock_heartbeat", 1e-9, "singleton_lock_heartbeat = 1e-09 is wrong: lock_heartbeat=1e-09 is below"),
])
def test_an_app_wide_default_that_cannot_work_is_refused_at_finalize(setting, value, message):
    with pytest.raises(ConfigurationError, match=message):
        _app(**{setting: value})


def test_a_shared_lock_with_a_lease_redis_cannot_keep_is_refused_at_construction():
    with pytest.raises(ConfigurationError, match=r"shared lock 'api': ttl=0\.005 is below the 10 ms Redis can keep"):
        SharedLock("api", ttl=0.005)
    assert SharedLock("api", ttl=MIN_TTL).ttl == MIN_TTL
