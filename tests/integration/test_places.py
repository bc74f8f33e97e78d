"""Places (keys with a limit or a window) on a real Redis: what the server keeps, and for how long.

The contract checks (``tests/support/contract_places.py``) run here too, through
``test_backend_contract.py``; these tests look at the server itself: every key a place
writes has a TTL, a key holds O(limit) entries, and keys taken once are gone from the
server once their windows have passed.
"""

from __future__ import annotations

import uuid
from typing import Dict, Iterator, List

import pytest
import redis

from celery_singleton_lock.store import Grant, Holder, KeyLayout, RedisBackend, open_store
from celery_singleton_lock.store.places import Limit, limited
from celery_singleton_lock.store.redis_places import release_call
from tests.support.servers import wait_older_than
from tests.support.waits import wait_for
from tests.support.suite_redis import lock_prefix

HOLDER = Holder(task_id="t", host="h", pid=1, since_ms=0, heartbeat_ms=1000)


def holder(task_id: str) -> Holder:
    """A holder of its own task id (one task id takes one place of a key at a time)."""
    return Holder(task_id=task_id, host="h", pid=1, since_ms=0, heartbeat_ms=1000)


@pytest.fixture
def prefix(lock_redis: redis.Redis) -> Iterator[str]:
    name = f"places-{uuid.uuid4().hex[:8]}"
    yield name
    for key in lock_redis.scan_iter(match=f"{name}:*", count=10_000):
        lock_redis.delete(key)


#: The longest window these tests (and test_cli_places.py) grant places under, in seconds.
LONGEST_WINDOW_S = 60


@pytest.fixture
def store(test_env: Dict[str, str]) -> Iterator[RedisBackend]:
    """The suite's lock store, once it is older than the longest window granted here: a younger
    server grants no place of a key with a window (it cannot tell a fresh start from a restart
    that lost the places of the window before), so the first test of a fresh session waits."""
    opened = open_store(test_env["CSL_LOCK_URL"])
    assert isinstance(opened, RedisBackend)
    wait_older_than(opened.client, LONGEST_WINDOW_S)
    yield opened
    opened.close()


def _left(lock_redis: redis.Redis, prefix: str) -> List[str]:
    return [key for key in lock_redis.scan_iter(match=f"{prefix}:*", count=10_000) if not key.endswith(":fence")]


def test_every_key_a_place_writes_has_a_ttl_and_at_most_limit_entries(store, lock_redis, prefix):
    # Given a key with three places and a window, when 50 holders try it, each releasing at once,
    limit = Limit(3, 60_000)
    keys = limited(KeyLayout(prefix).keys("job", "a1", "running"), limit)
    granted = 0
    for n in range(50):
        if isinstance(store.acquire(keys.lock, f"tok-{n}", 5_000, holder(f"t{n}"), limit=limit), Grant):
            granted += 1
            assert store.release(keys.lock, f"tok-{n}")
    # then three got in (the window keeps their released places), and the key holds three
    # places plus its limit: nothing grows with the number of callers
    assert granted == 3
    assert lock_redis.hlen(keys.lock) == 3 + 1
    # and every key the library wrote has a TTL
    for key in lock_redis.scan_iter(match=f"{prefix}:*"):
        assert lock_redis.pttl(key) > 0, key


def test_a_dead_holders_entry_is_pruned_by_the_next_acquire(store, lock_redis, prefix):
    limit = Limit(2)
    keys = limited(KeyLayout(prefix).keys("job", "b1", "running"), limit)
    # Given a holder whose lease runs out (it stopped renewing), beside a live one
    assert isinstance(store.acquire(keys.lock, "dead", 50, holder("dead"), limit=limit), Grant)
    assert isinstance(store.acquire(keys.lock, "alive", 60_000, holder("alive"), limit=limit), Grant)
    # When the next acquire comes after its lease, then the dead entry is gone from the hash
    wait_for(lambda: isinstance(store.acquire(keys.lock, "next", 60_000, holder("next"), limit=limit), Grant), 5,
             what="the dead holder's place to free")
    assert sorted(k for k in lock_redis.hkeys(keys.lock) if not k.startswith("~")) == ["alive", "next"]


def test_a_key_released_with_no_window_left_is_deleted_at_once(store, lock_redis, prefix):
    limit = Limit(2)
    keys = limited(KeyLayout(prefix).keys("job", "c1", "running"), limit)
    assert isinstance(store.acquire(keys.lock, "a", 60_000, HOLDER, limit=limit), Grant)
    assert store.release(keys.lock, "a")
    assert lock_redis.exists(keys.lock) == 0


def test_a_window_ends_a_whole_window_after_the_start_it_counts(store, lock_redis, prefix):
    # The server keeps time in whole ms: a place granted within a ms must not count its window
    # from the start of that ms, or the next start may come up to 1 ms less than a window later.
    limit = Limit(1, 1_000)
    layout = KeyLayout(prefix)
    for n in range(50):
        keys = limited(layout.keys("job", f"w{n}", "running"), limit)
        seconds, micros = lock_redis.time()
        asked_us = seconds * 1_000_000 + micros
        assert isinstance(store.acquire(keys.lock, "a", 60_000, HOLDER, limit=limit), Grant)
        window_end_ms = int(lock_redis.hget(keys.lock, "a").split()[3])
        assert (window_end_ms - limit.window_ms) * 1_000 > asked_us


def test_100000_distinct_keys_taken_once_leave_nothing_after_their_windows(store, lock_redis, prefix):
    # Given 100,000 distinct keys, each taken once under a 1 s window and released at once
    # (pipelined, 1,000 scripts a round trip, through the backend's own scripts)
    limit = Limit(3, 1_000)
    layout = KeyLayout(prefix)
    places = store._places
    for start in range(0, 100_000, 1_000):
        pipe = store.client.pipeline(transaction=False)
        for n in range(start, start + 1_000):
            key = limited(layout.keys("job", f"{n:x}", "running"), limit).lock
            script, keys, args = places.acquire_call(key, "once", 60_000, HOLDER, "running", limit)
            script(keys=keys, args=args, client=pipe)
            keys, args = release_call(key, "once", None)
            places.release_script(keys=keys, args=args, client=pipe)
        assert pipe.execute() == [1, 1] * 1_000
    # then the last one is there while its window holds, with a TTL of at most the window
    sample = limited(layout.keys("job", f"{100_000 - 1:x}", "running"), limit).lock
    assert 0 < lock_redis.pttl(sample) <= 1_000 + 1  # the window counts from the next whole ms
    # and when the windows have passed, nothing but the bookkeeping (the fencing counters) is left
    wait_for(lambda: not _left(lock_redis, prefix), 30, interval=0.5, what="every place key to expire")
    assert len(list(lock_redis.scan_iter(match=f"{prefix}:*", count=10_000))) <= 16


def test_celery_locks_lists_each_place_as_k_of_n_with_its_window(proj, store):
    import json
    import os
    import socket

    from tests.integration.test_cli import run_cli

    # Given a key with three places and a minute's window: two held by live holders, one released
    limit = Limit(3, 60_000)
    keys = limited(KeyLayout(lock_prefix()).keys("tests.integration.proj.storm", "ab" * 16, "running"), limit)
    for n in range(3):
        alive = Holder(task_id=f"t{n}", host=socket.gethostname(), pid=os.getpid(), since_ms=n,
                       heartbeat_ms=20_000)
        assert isinstance(store.acquire(keys.lock, f"tok-{n}", 60_000, alive, limit=limit), Grant)
    assert store.release(keys.lock, "tok-0")
    # When an operator lists the locks
    proc = run_cli("list", "--json")
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    # then each place is a record of its own: three of three taken, the window's time left on each
    assert sorted(r["state"] for r in listed) == ["released", "running", "running"]
    assert {(r["held"], r["limit"]) for r in listed} == {(3, 3)}
    assert all(50_000 < r["window_ms"] <= 60_000 for r in listed)
    assert all(r["key"] == keys.lock and not r["stale"] for r in listed)
    table = run_cli("list").stdout
    assert "running (3 of 3, window" in table and "released (3 of 3, window" in table
    # and clearing the stale ones leaves the live holders (and the window) alone
    assert run_cli("clear", "--stale").returncode == 0
    assert len(json.loads(run_cli("list", "--json").stdout)) == 3
