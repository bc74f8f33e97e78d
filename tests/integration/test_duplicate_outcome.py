"""A skipped duplicate's outcome, as the result backend and Flower show it.

Given a worker sending task events (``-E``) and storing extended results, Flower watching the
same broker, and a lock the test process holds, when a duplicate of that call is skipped, then
its result stays ``None`` while its extended meta in the result backend and its record in
Flower's HTTP API name the lock, the holder and the policy that decided.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from typing import Any, Dict, Iterator

import pytest

from tests.integration.helpers import records
from tests.support.scrape import free_port
from tests.support.waits import wait_for
from tests.support.suite_redis import lock_prefix

APP = "tests.integration.proj_flower"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _get(url: str, raw: bool = False) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body = response.read().decode()
            return body if raw else json.loads(body)
    except (urllib.error.URLError, OSError, ValueError):
        return None


@pytest.fixture
def flower(test_env: Dict[str, str]) -> Iterator[str]:
    """Flower on a free loopback port, watching the test broker's events; its base URL."""
    pytest.importorskip("flower")
    port = free_port()
    env = dict(os.environ, **test_env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    env["FLOWER_UNAUTHENTICATED_API"] = "true"  # a loopback port of the test's own
    process = subprocess.Popen([sys.executable, "-m", "celery", "-A", APP, "flower", f"--port={port}",
                                "--address=127.0.0.1"], cwd=ROOT, env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _get(f"{base}/healthcheck", raw=True), 30, interval=0.2, what="Flower to answer")
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def test_a_skipped_duplicate_names_lock_holder_and_policy_in_the_backend_and_in_flower(
        proj, start_worker, events_redis, flower):
    start_worker(app=APP, extra_args=["-E"])
    holder = threading.Thread(target=proj.sync.apply, kwargs=dict(args=("f-skip",), kwargs={"duration": 4.0}))
    holder.start()
    started = wait_for(lambda: [e for e in records(events_redis, "started") if e["key"] == "f-skip"], 10,
                       what="the test process to hold the lock")
    duplicate = proj.sync.delay("f-skip", duration=0)

    assert duplicate.get(timeout=20) is None  # the result is what docs/singleton-locks.md promises
    meta = proj.app.backend.get_task_meta(duplicate.id)
    assert meta["result"] is None and meta["status"] == "SUCCESS"
    assert meta["singleton_lock_holder"] == started[0]["id"]
    assert meta["singleton_lock_policy"] == "skip"
    assert meta["singleton_lock_key"].startswith(f"{lock_prefix()}:{{tests.integration.proj.sync:")

    info = wait_for(lambda: (lambda t: t if t and t.get("state") == "SUCCESS" and "singleton_lock_key" in t
                             else None)(_get(f"{flower}/api/task/info/{duplicate.id}")),
                    20, interval=0.2, what="Flower to show the duplicate with its lock fields")
    assert info["result"] == "None"
    assert (info["singleton_lock_key"], info["singleton_lock_holder"], info["singleton_lock_policy"]) == (
        meta["singleton_lock_key"], started[0]["id"], "skip")
    holder.join(15)
