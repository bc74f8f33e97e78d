"""``celery locks`` where a careless operator or a hostile ACL user would trip it, against a real Redis.

Given locks whose task names nest, a key of the lock's name planted with another Redis type,
and a live holder seen from another PID namespace, when an operator lists and clears, then
``--task`` means that task alone, the planted key is shown and can be cleared, and a lock its
holder still renews is never judged lost.
"""

from __future__ import annotations

import time

from celery_singleton_lock.store import Holder, KeyLayout, RedisBackend
from tests.integration.test_cli import listed, run_cli

LAYOUT = KeyLayout("csltest")


def _stale(store: RedisBackend, task: str, digest: str, task_id: str) -> str:
    """A lock whose holder stopped renewing it (heartbeat 100 ms, taken a while ago)."""
    key = LAYOUT.lock(task, digest)
    store.acquire(key, f"token-{task_id}", 30_000, Holder(task_id, "elsewhere", 4242, int(time.time() * 1000), 100))
    return key


def test_clear_task_stale_matches_the_task_name_exactly(proj, lock_redis):
    # Given stale locks of a task, and of a task whose name goes on after it (a glob would match both)
    store = RedisBackend(lock_redis)
    mine = _stale(store, "billing.charge", "a" * 32, "mine")
    nested = _stale(store, "billing.charge:5}:x", "b" * 32, "nested")
    time.sleep(0.3)  # a few of their 100 ms heartbeats missed

    # When the operator lists and clears the stale locks of billing.charge
    assert [lock["task_id"] for lock in listed("--task", "billing.charge")] == ["mine"]
    cleared = run_cli("clear", "--task", "billing.charge", "--stale")

    # Then only that task's lock went
    assert cleared.returncode == 0, cleared.stderr
    assert "cleared 1 stale lock(s) of task billing.charge" in cleared.stdout
    assert lock_redis.exists(mine) == 0 and lock_redis.exists(nested) == 1
    assert [lock["task_id"] for lock in listed("--task", "billing.charge:5}:x")] == ["nested"]
