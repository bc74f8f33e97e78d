"""``celery locks`` against a real Redis and real prefork workers.

Given a task holding its lock in a real worker, when an operator runs the CLI
(through Celery's own launcher, found by its entry point, or ``python -m``),
then it lists the holder, refuses to clear a live lock without ``--force``, and
clears stale locks by token.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

from celery_singleton_lock.store import Holder, KeyLayout, RedisBackend
from tests.integration.helpers import lock_field, lock_keys, wait_started, wait_unlocked
from tests.support.servers import RedisServer, free_port
from tests.support.suite_redis import lock_prefix
from tests.support.waits import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QUICK_TTL = "tests.integration.proj.quick_ttl"  # lock_ttl=3, lock_heartbeat=1


def run_cli(*args: str, launcher: str = "celery", env: Optional[Dict[str, str]] = None
            ) -> subprocess.CompletedProcess:
    """The CLI as an operator runs it, in its own process (``env`` on top of the test's)."""
    head: List[str] = (["-m", "celery", "-A", "tests.integration.proj", "locks"] if launcher == "celery"
                       else ["-m", "celery_singleton_lock", "--app", "tests.integration.proj"])
    env = dict(os.environ, **(env or {}),
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, *head, *args], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=60)


def listed(*args: str) -> list:
    proc = run_cli("list", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def holding(proj, start_worker, events_redis):
    """A quick_ttl execution holding its lock in a real worker (renewed every second)."""
    worker = start_worker(concurrency=2)
    result = proj.quick_ttl.delay("held", duration=30)
    started = wait_started(events_redis, 1)[0]
    yield worker, result, started
    result.revoke(terminate=True)


def test_list_json_shows_the_lock_of_a_running_task(holding, lock_redis):
    worker, result, started = holding
    time.sleep(1.2)  # at least one renewal, so "alive" is judged from a real heartbeat

    [lock] = listed()

    assert lock["task"] == QUICK_TTL and lock["task_id"] == result.id
    assert lock["pid"] == started["pid"] and lock["host"] == socket.gethostname()
    assert lock["key"] in lock_keys(lock_redis) and lock["key"].endswith(lock["digest"])
    assert lock["state"] == "running" and lock["stale"] is False and lock["lost"] is False
    assert 0 < lock["pttl_ms"] <= 3000 and lock["since_renewal_ms"] <= 1500
    assert "token" not in lock
    assert listed("--task", "tests.integration.proj.storm") == []
    assert listed("--task", QUICK_TTL)[0]["task_id"] == result.id
    table = run_cli("list").stdout
    assert lock["digest"][:12] in table and result.id in table


def test_clear_refuses_a_live_lock_without_force_and_force_clears_it(holding, lock_redis):
    worker, result, _ = holding
    [key] = lock_keys(lock_redis)
    token = lock_field(lock_redis, key, "token")
    digest = key.rsplit(":", 1)[1]

    refused = run_cli("clear", digest[:10])

    assert refused.returncode == 1
    assert "refused" in refused.stderr and "alive" in refused.stderr and "--force" in refused.stderr
    assert lock_field(lock_redis, key, "token") == token  # untouched

    shown = run_cli("show", digest, launcher="python -m")
    assert shown.returncode == 0 and result.id in shown.stdout and "alive" in shown.stdout

    forced = run_cli("clear", key, "--force")

    assert forced.returncode == 0, forced.stderr
    assert "cleared" in forced.stdout and "forced" in forced.stdout
    # The holder learns it at its next renewal, and says so at ERROR (never re-takes it silently).
    wait_for(lambda: "singleton lock LOST" in worker.log(), 5, what="the holder to report the lost lock")
    assert not lock_keys(lock_redis)


def test_clear_task_stale_removes_only_locks_nobody_renews(holding, proj, lock_redis):
    _, result, _ = holding
    runtime_store = RedisBackend(lock_redis)
    layout = KeyLayout(lock_prefix())
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    # What holders that stopped renewing leave behind: one paused elsewhere, one whose process died here.
    now_ms = int(time.time() * 1000)
    paused = layout.lock(QUICK_TTL, proj.quick_ttl.lock_digest(("paused",), {}))
    dead = layout.lock(QUICK_TTL, proj.quick_ttl.lock_digest(("dead",), {}))
    for key, holder in ((paused, Holder("paused-id", "elsewhere", 4242, now_ms, 200)),
                        (dead, Holder("dead-id", socket.gethostname(), gone.pid, now_ms, 200))):
        runtime_store.acquire(key, f"token-{key}", 30_000, holder)
    time.sleep(0.4)  # two of their 200 ms heartbeats missed

    flags = {lock["task_id"]: (lock["stale"], lock["lost"]) for lock in listed("--task", QUICK_TTL)}
    assert flags == {result.id: (False, False), "paused-id": (True, False), "dead-id": (True, True)}

    cleared = run_cli("clear", "--task", QUICK_TTL, "--stale")

    assert cleared.returncode == 0, cleared.stderr
    assert "cleared 2 stale lock(s)" in cleared.stdout and "left 1 live lock(s)" in cleared.stdout
    assert [lock["task_id"] for lock in listed()] == [result.id]
    assert lock_redis.exists(paused, dead) == 0


def test_clear_of_an_unknown_key_says_so(proj, test_env):
    proc = run_cli("clear", "0123456789ab")
    assert proc.returncode == 1 and "no lock named" in proc.stderr
    usage = run_cli("clear")
    assert usage.returncode == 2 and "--stale" in usage.stderr


def test_clear_deletes_nothing_when_the_lock_changed_hands(proj, lock_redis):
    """The token read by the CLI is the one compared at delete: a new holder's lock survives."""
    from celery_singleton_lock.store.admin import clear_lock, read_lock

    store, layout = RedisBackend(lock_redis), KeyLayout(lock_prefix())
    key = layout.lock(QUICK_TTL, "f" * 32)
    now_ms = int(time.time() * 1000)
    store.acquire(key, "old", 30_000, Holder("old-id", "elsewhere", 1, now_ms, 100))
    time.sleep(0.2)
    stale = read_lock(lock_redis, layout, key)
    assert stale is not None and stale.stale
    store.release(key, "old")
    store.acquire(key, "new", 30_000, Holder("new-id", "elsewhere", 2, now_ms, 10_000))

    result = clear_lock(store, stale)

    assert not result.cleared and "changed hands" in result.message
    assert lock_field(lock_redis, key, "token") == "new"
    store.release(key, "new")
    wait_unlocked(lock_redis, 1)


# -- a lock store that cannot be used: one line, no traceback -----------------------------------------
PASSWORD = "s3cret-pw"


@pytest.fixture
def acl_server() -> Iterator[Tuple[RedisServer, "redis.Redis"]]:
    import redis

    server = RedisServer(extra_args=["--user", "admin", "on", f">{PASSWORD}", "~*", "&*", "+@all",
                                     "--user", "default", "off"])
    server.start(probe_url=f"redis://admin:{PASSWORD}@127.0.0.1:{server.port}/0")
    admin = redis.Redis(port=server.port, username="admin", password=PASSWORD)
    yield server, admin
    admin.close()
    server.stop()


def one_line_failure(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("command", [("list",), ("show", "0123456789ab"), ("clear", "--stale")])
def test_redis_down_is_one_line_naming_the_url_and_what_to_do(test_env, command):
    port = free_port()
    line = one_line_failure(run_cli(*command, env={"CSL_LOCK_URL": f"redis://127.0.0.1:{port}/0"}))
    assert line.startswith("locks: cannot reach the lock store") and f"redis://127.0.0.1:{port}/0" in line
    assert "Connection refused" in line and "check that Redis runs" in line


def test_a_wrong_password_is_one_line_without_the_password(test_env):
    server = RedisServer(extra_args=["--requirepass", PASSWORD])
    server.start(probe_url=f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0")
    try:
        url = f"redis://:not-the-password@127.0.0.1:{server.port}/0"
        line = one_line_failure(run_cli("list", "--json", launcher="python -m", env={"CSL_LOCK_URL": url}))
    finally:
        server.stop()
    assert f"redis://:***@127.0.0.1:{server.port}/0" in line and "not-the-password" not in line
    assert "authentication failed" in line and "set the right user and password" in line


@pytest.mark.parametrize("denied, command", [
    ("-scan", ("list",)),
    ("-get", ("list",)),  # its answer is read in a pipeline: refused, not mistaken for "no lock"
    ("-scan", ("clear", "--stale")),
])
def test_a_missing_permission_is_one_line_naming_it(test_env, acl_server, denied, command):
    server, admin = acl_server
    admin.acl_setuser("ops", enabled=True, passwords=["+pw"], keys=[f"{lock_prefix()}:*"],
                      channels=[f"{lock_prefix()}:*"],
                      commands=["+@all", denied])
    # A lock for the listing to read.
    RedisBackend(admin).acquire(f"{lock_prefix()}:{{t:0}}:0123456789abcdef", "tok", 60_000,
                             Holder("id", "h", 1, int(time.time() * 1000), 1000))

    line = one_line_failure(run_cli(*command, env={"CSL_LOCK_URL": f"redis://ops:pw@127.0.0.1:{server.port}/0"}))
    assert f"redis://ops:***@127.0.0.1:{server.port}/0" in line
    assert "lacks a permission" in line and f"'{denied[1:]}' command" in line
