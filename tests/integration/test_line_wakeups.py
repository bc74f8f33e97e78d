"""Who a release wakes in a key's line, on a real Redis: the first waiters alone, as many as the key
has places; each of the others is told on its own channel when a grant or a departure makes it one
of the first (``store/line.py``, ``store/line_wait.py``)."""

from __future__ import annotations

import uuid
from typing import Dict, Iterator, Optional

import pytest

from celery_singleton_lock.store import Conflict, Grant, KeyLayout, RedisBackend, open_store
from celery_singleton_lock.store.places import Limit, limited
from tests.support.contract import LONG_MS, holder
from tests.support.servers import wait_older_than
from tests.support.suite_redis import lock_prefix


@pytest.fixture
def store(test_env: Dict[str, str]) -> Iterator[RedisBackend]:
    opened = open_store(test_env["CSL_LOCK_URL"])
    assert isinstance(opened, RedisBackend)
    wait_older_than(opened.client, 1)
    try:
        yield opened
    finally:
        opened.close()


def _key(limit: Optional[Limit]) -> str:
    keys = KeyLayout(f"{lock_prefix()}:wake-{uuid.uuid4().hex[:8]}").keys("job", "d1", "queued")
    return limited(keys, limit).lock if limit is not None else keys.lock


def _ask(store: RedisBackend, key: str, name: str, limit: Optional[Limit]):
    return store.line.acquire(key, name, LONG_MS, holder(f"task-{name}"), limit=limit)


@pytest.mark.parametrize("limit", [None, Limit(2)], ids=["singleton", "two places"])
def test_a_release_wakes_the_first_in_line_alone_and_the_next_is_told_when_it_becomes_first(store, limit):
    key = _key(limit)
    count = limit.count if limit is not None else 1
    # Given every place held, the first waiters (as many as places) and one more behind them, each
    # listening as a waiter in line does: the first for releases, the last only on its own channel
    held = [f"h{n}" for n in range(count)]
    for name in held:
        assert isinstance(store.acquire(key, name, LONG_MS, holder(name), limit=limit), Grant)
    with store.line_events(key, "w1") as first, store.line_events(key, "last") as last:
        ahead = [f"w{n + 1}" for n in range(count)]
        for name in ahead:
            assert isinstance(_ask(store, key, name, limit), Conflict)
        refused = _ask(store, key, "last", limit)
        assert isinstance(refused, Conflict) and refused.ahead == count
        assert last.follow(False) is False  # not among the first: it stops listening for releases
        # When a holder lets go
        assert store.release(key, held[0]) is True
        # Then the first in line hears it, and the waiter behind the first ones is not woken
        assert first.listen(2.0) is True
        assert last.listen(0.3) is False
        # When the first in line takes the freed place, then the last is told it is now among the first
        assert isinstance(_ask(store, key, "w1", limit), Grant)
        assert last.listen(2.0) is True
        now = _ask(store, key, "last", limit)
        assert isinstance(now, Conflict) and now.ahead == count - 1
        # and, listening for releases from then on, it is woken by the next release and served
        assert last.follow(True) is True
        assert isinstance(_ask(store, key, "last", limit), Conflict)
        for name in [*held[1:], *ahead[1:]]:
            store.line.leave(key, name, limit)
            store.release(key, name)
        assert store.release(key, "w1") is True
        assert last.listen(2.0) is True
        assert isinstance(_ask(store, key, "last", limit), Grant)
    store.release(key, "last")


def test_a_waiter_that_leaves_tells_the_one_now_first(store):
    key = _key(None)
    assert isinstance(store.acquire(key, "h", LONG_MS, holder("h")), Grant)
    with store.line_events(key, "w2") as second:
        # Given two waiters in line, the second listening only on its own channel
        assert isinstance(_ask(store, key, "w1", None), Conflict)
        assert isinstance(_ask(store, key, "w2", None), Conflict)
        second.follow(False)
        # When the first gives up, then the second is told it is now first
        store.line.leave(key, "w1")
        assert second.listen(2.0) is True
        refused = _ask(store, key, "w2", None)
        assert isinstance(refused, Conflict) and refused.ahead == 0
    store.line.leave(key, "w2")
    store.release(key, "h")
