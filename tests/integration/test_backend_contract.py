"""The lock-store contract (``tests/support/contract.py``) against ``RedisBackend`` on a real server.

The store is opened from a URL as the library opens it (``open_store``), on the lock database the
integration tests own; each check gets key names under a prefix of its own, deleted afterwards.
Time is the server's: a short lease runs out while the check waits a bounded while.
"""

from __future__ import annotations

import itertools
import time
import uuid
from typing import Dict, Iterator

import pytest
import redis

from celery_singleton_lock.store import KeyLayout, LockKeys, RedisBackend, open_store
from tests.support.contract import CHECKS, LONG_MS
from tests.support.servers import wait_older_than
from tests.support.suite_redis import lock_prefix

#: Where RedisBackend departs from the contract the in-memory backend keeps: check -> why.


class RedisBench:
    """``RedisBackend`` from ``open_store(url)``, its keys under a prefix of their own."""

    short_ms = 100

    def __init__(self, backend: RedisBackend, prefix: str) -> None:
        self.backend = backend
        self._layout = KeyLayout(prefix)
        self._names = itertools.count()

    def keys(self) -> LockKeys:
        return self._layout.keys("job", f"d{next(self._names)}", "queued")

    def elapse(self, ms: int) -> None:
        time.sleep(ms / 1000.0)  # the server's clock: a bounded wait for a short lease to run out


@pytest.fixture
def bench(test_env: Dict[str, str], lock_redis: redis.Redis) -> Iterator[RedisBench]:
    prefix = f"{lock_prefix()}:contract-{uuid.uuid4().hex[:8]}"  # under the run's prefix
    store = open_store(test_env["CSL_LOCK_URL"])
    assert isinstance(store, RedisBackend)
    wait_older_than(store.client, LONG_MS / 1000)  # the checks' windows: a younger store grants no place
    try:
        yield RedisBench(store, prefix)
    finally:
        store.close()
        for key in lock_redis.scan_iter(match=f"{prefix}:*"):
            lock_redis.delete(key)


@pytest.mark.parametrize("name", list(CHECKS))
def test_redis_backend_keeps_the_contract(bench, name):
    CHECKS[name](bench)

