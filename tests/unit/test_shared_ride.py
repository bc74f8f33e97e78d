"""A waiting ``SharedLock`` block rides an outage that passes within its ``wait_timeout`` (MemoryBackend)."""

from __future__ import annotations

import time

import pytest
import redis
from celery import Celery

from celery_singleton_lock import ConfigurationError, LockBackendError, SharedLock
from celery_singleton_lock.store import MemoryBackend
from tests.support.apps import MADE


class FlakyStore(MemoryBackend):
    """Answers each acquire with the next error of ``errors`` while there are some."""

    def __init__(self, errors) -> None:
        super().__init__()
        self.errors = list(errors)
        self.asks = 0

    def acquire(self, *args, **kwargs):
        self.asks += 1
        if self.errors:
            raise self.errors.pop(0)
        return super().acquire(*args, **kwargs)


def _app(store):
    app = Celery("ride", broker="memory://", set_as_current=False)
    MADE.append(app)
    app.conf.singleton_lock_backend = store
    app.finalize()
    return app


def test_a_waiting_block_asks_again_through_an_outage_that_passes():
    store = FlakyStore([redis.exceptions.ConnectionError("failover")] * 3)
    with SharedLock("ride", wait_timeout=5, app=_app(store)).hold() as held:
        assert held.token
    assert store.asks == 4


def test_an_outage_past_the_wait_timeout_ends_the_block_with_lock_backend_error():
    store = FlakyStore([redis.exceptions.ConnectionError("down")] * 1000)
    started = time.monotonic()
    with pytest.raises(LockBackendError, match="cannot reach Redis"):
        with SharedLock("ride", wait_timeout=0.4, app=_app(store)).hold():
            pass
    assert 0.4 <= time.monotonic() - started < 2.0 and store.asks > 1


def test_a_store_set_up_wrong_or_a_block_that_does_not_wait_fails_at_once():
    wrong = FlakyStore([redis.exceptions.AuthenticationError("WRONGPASS invalid username-password pair")])
    with pytest.raises(ConfigurationError):
        with SharedLock("ride", wait_timeout=5, app=_app(wrong)).hold():
            pass
    down = FlakyStore([redis.exceptions.ConnectionError("down")] * 2)
    with pytest.raises(LockBackendError):
        with SharedLock("ride", on_locked="raise", app=_app(down)).hold():
            pass
    assert wrong.asks == 1 and down.asks == 1
