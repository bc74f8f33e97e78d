"""``celery locks`` where a careless operator or a hostile ACL user would trip it, against a real Redis.

Given locks whose task names nest, a key of the lock's name planted with another Redis type,
and a live holder seen from another PID namespace, when an operator lists and clears, then
``--task`` means that task alone, the planted key is shown and can be cleared, and a lock its
holder still renews is never judged lost.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from celery_singleton_lock.store import Holder, KeyLayout, RedisBackend, pid_namespace
from tests.integration.helpers import lock_field
from tests.integration.test_cli import QUICK_TTL, ROOT, holding, listed, run_cli  # noqa: F401 - a fixture
from tests.support.suite_redis import lock_prefix

LAYOUT = KeyLayout(lock_prefix())


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


def test_a_key_of_another_type_at_a_locks_name_is_a_foreign_holder_listed_and_cleared(proj, start_worker,
                                                                                     lock_redis):
    worker = start_worker(concurrency=1)
    # Given a sorted set (no TTL) put at the name of a call's lock, as the ACL user can
    key = LAYOUT.lock(proj.storm.name, proj.storm.lock_digest(("k",), {}))
    lock_redis.zadd(key, {"planted": 1})

    # When the call runs, then it meets a holder, and the worker says which key and what to do
    assert proj.storm.delay("k", duration=0.1).get(timeout=20) is None  # skipped as a duplicate
    assert f"key {key} holds a value this library did not write" in worker.log()
    assert f"celery locks clear {key}" in worker.log()
    # and at enqueue time it is a holder too, whose call still ends (not PENDING for ever)
    qor_key = LAYOUT.lock(proj.qor_job.name, proj.qor_job.lock_digest(("k",), {}))
    lock_redis.zadd(qor_key, {"planted": 1})
    assert proj.qor_job.delay("k").get(timeout=5) is None

    # When the operator lists, then both show, flagged foreign
    found = {lock["key"]: lock for lock in listed()}
    assert set(found) == {key, qor_key}
    assert (found[key]["state"], found[key]["holds"], found[key]["stale"], found[key]["pttl_ms"]) == (
        "foreign", "other-type", True, -1)
    assert "foreign" in run_cli("list").stdout
    shown = run_cli("show", key)
    assert shown.returncode == 0 and "not a lock" in shown.stdout

    # When the operator clears one (no --force: it is no live lock), then it is gone, and the call runs
    cleared = run_cli("clear", key)
    assert cleared.returncode == 0, cleared.stderr
    assert lock_redis.exists(key) == 0
    assert proj.storm.delay("k", duration=0.1).get(timeout=20)["key"] == "k"
    # and clear --stale removes the other
    assert "cleared 1 stale lock(s)" in run_cli("clear", "--stale").stdout
    assert lock_redis.exists(qor_key) == 0


def test_a_foreign_string_and_a_foreign_type_are_holders_and_never_stop_a_renewal(proj, lock_redis):
    from celery_singleton_lock.store import Conflict, Grant
    from celery_singleton_lock.store.admin import clear_lock, read_lock

    store = RedisBackend(lock_redis)
    holder = Holder("mine", "here", 1, int(time.time() * 1000), 1_000)
    planted, text, mine = (LAYOUT.lock("t", digest * 32) for digest in "abc")
    lock_redis.zadd(planted, {"x": 1})
    lock_redis.set(text, "hello world", px=60_000)
    # Given keys at locks' names that are no locks: an acquire meets a foreign holder
    for key in (planted, text):
        met = store.acquire(key, "t", 30_000, holder)
        assert isinstance(met, Conflict) and met.state == "foreign" and met.task_id == "", (key, met)
    # and a renewal of a lock batched with one of them still renews the lock
    assert isinstance(store.acquire(mine, "m", 3_000, holder), Grant)
    assert store.renew([(planted, "t", 30_000), (mine, "m", 30_000)]) == [False, True]
    assert lock_redis.pttl(mine) > 3_000
    # When the operator clears them, then they go; a lock taken at a foreign key's name since it was
    # read is left alone
    text_record = read_lock(lock_redis, LAYOUT, text)
    assert text_record is not None and text_record.holds == "string"
    lock_redis.delete(text)
    assert isinstance(store.acquire(text, "new", 30_000, holder), Grant)
    assert not clear_lock(store, text_record).cleared
    assert lock_redis.get(text).startswith("new running")
    assert clear_lock(store, read_lock(lock_redis, LAYOUT, planted)).cleared
    assert lock_redis.exists(planted) == 0


def test_clear_stale_in_another_pid_namespace_leaves_a_live_holder_alone(holding, lock_redis):
    # Given a live holder, renewed every second by a worker on this host
    _, result, started = holding
    [key] = [k for k in lock_redis.scan_iter(f"{lock_prefix()}:*") if not k.endswith((":fence", ":done"))]
    token = lock_field(lock_redis, key, "token")

    # When an operator in another PID namespace of the same host (a host-networked container),
    # where the holder's pid is not visible, lists and clears the stale locks of its task
    listing = run_cli_in_new_pid_namespace("list", "--json")
    cleared = run_cli_in_new_pid_namespace("clear", "--task", QUICK_TTL, "--stale")

    # Then the lock is live (its fresh renewal outweighs a pid not seen), and it is left alone
    assert listing.returncode == 0, listing.stderr
    [lock] = json.loads(listing.stdout)
    assert (lock["task_id"], lock["pid"], lock["lost"], lock["stale"]) == (result.id, started["pid"], False, False)
    assert lock["pid_ns"] and lock["pid_ns"] == pid_namespace.current()
    assert cleared.returncode == 0, cleared.stderr
    assert "cleared 0 stale lock(s)" in cleared.stdout and "left 1 live lock(s)" in cleared.stdout
    assert lock_field(lock_redis, key, "token") == token
    # and the same command in the holder's own namespace agrees
    assert "left 1 live lock(s)" in run_cli("clear", "--task", QUICK_TTL, "--stale").stdout


def run_cli_in_new_pid_namespace(*args: str) -> subprocess.CompletedProcess:
    """``celery locks`` under ``unshare -pf --mount-proc``: same host name, a PID namespace of its own."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare(1) and root to start a PID namespace")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    return subprocess.run(["unshare", "-pf", "--mount-proc", sys.executable, "-m", "celery", "-A",
                           "tests.integration.proj", "locks", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=60)
