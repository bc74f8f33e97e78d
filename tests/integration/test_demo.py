"""The demo end to end, as a user runs it: real Redis, real worker and beat, real Ctrl-C.

Given the demo's short mode, when it runs to the end, then it exits 0 with a
summary saying overlaps 0, the CLI saw its locks while it ran, and it left no
process and no key of its own behind, and deleted none of the user's; when it is
interrupted, it still cleans up.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from typing import Dict, Iterator, Optional

import pytest
import redis

from tests.support.servers import free_port, reachable
from tests.support.waits import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: A database of the test Redis that no other test uses; the demo touches only its namespace in it.
DEMO_DB = 11


class DemoProcess:
    """``python -m celery_singleton_lock.demo`` with its output in a file we can read while it runs."""

    def __init__(self, tmp_path, env: Dict[str, str], *args: str) -> None:
        self.out_path = tmp_path / "demo.out"
        self._out = open(self.out_path, "wb")
        self.env = dict(os.environ, **env)
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
        self.started = time.monotonic()
        self.process = subprocess.Popen([sys.executable, "-m", "celery_singleton_lock.demo", *args],
                                        stdout=self._out, stderr=subprocess.STDOUT, cwd=str(tmp_path),
                                        env=self.env, start_new_session=True)

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        finally:
            self._out.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self._out.close()

    def pid_after(self, label: str) -> Optional[int]:
        found = re.search(rf"{label} \(pid (\d+)\)", self.output())
        return int(found.group(1)) if found else None


@pytest.fixture
def run_demo(tmp_path) -> Iterator[object]:
    started = []

    def start(env: Dict[str, str], *args: str) -> DemoProcess:
        demo = DemoProcess(tmp_path, env, *args)
        started.append(demo)
        return demo

    yield start
    for demo in started:
        demo.kill()


def _group_gone(pgid: Optional[int]) -> bool:
    assert pgid is not None
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _locks_listed(env: Dict[str, str]) -> list:
    proc = subprocess.run([sys.executable, "-m", "celery", "-A", "celery_singleton_lock.demo.app", "locks", "list",
                           "--json"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_short_demo_runs_end_to_end_with_zero_overlaps(run_demo, redis_base, tmp_path):
    namespace = f"csl-demo-test-{uuid.uuid4().hex[:8]}"
    env = {"REDIS_URL": f"{redis_base}/{DEMO_DB}", "CSL_DEMO_NAMESPACE": namespace}
    theirs = {f"{namespace}:mine": "a key of the user's in the namespace", "elsewhere": "another key of the user's"}
    client = redis.Redis.from_url(env["REDIS_URL"], decode_responses=True)
    client.mset(theirs)
    plot = importlib.util.find_spec("matplotlib") is not None  # the demo extra; the test extra may lack it
    demo = run_demo(env, "--short", *(["--plot", str(tmp_path / "timeline.png")] if plot else []))

    # While it runs, the operator's CLI sees the demo's locks through the demo app.
    wait_for(lambda: "round 1/2" in demo.output(), 90, what="the demo to start sending")
    seen = wait_for(lambda: _locks_listed(demo.env), 15, interval=0.1, what="a lock listed by the CLI")
    assert {lock["task"] for lock in seen} <= {"demo.skip", "demo.retry", "demo.wait", "demo.raise", "demo.debounce",
                                             "demo.limited", "demo.windowed", "demo.report"}

    code = demo.wait(60)
    elapsed = time.monotonic() - demo.started
    out = demo.output()

    assert code == 0, out
    assert elapsed < 40
    assert "overlaps = 0" in out and "every call accounted for" in out
    total = re.search(r"^total\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", out, re.M)
    assert total, out
    sent, ran, skipped, retried, waited, raised, overlaps = map(int, total.groups())
    assert overlaps == 0 and sent > ran > 0 and skipped > 0 and retried > 0 and waited > 0 and raised > 0
    # each round's burst of edits to the debounced task ran once, with the last edit (seq 5)
    edits = re.findall(r"debounce\((acct-[12])=(\d+)\)\s+runs", out)
    assert sorted(edits) == [("acct-1", "5"), ("acct-2", "5")], out
    # the limited task ran no more than two of an account at once; the windowed one started an
    # account once per window (acct-3, sent each round, ran in the first round only)
    assert re.search(r"demo\.limited: expected at most 2 runs of an account at once; saw at most [12] at once "
                     r"over \d+ run\(s\): as promised", out), out
    assert re.search(r"demo\.windowed: expected at most 1 start\(s\) of an account in any 4s; saw at most 1 "
                     r"start\(s\) in one window over 3 run\(s\): as promised", out), out
    assert re.search(r"^limit\s+demo\.limited\s+10\s+", out, re.M), out
    assert re.search(r"^window\s+demo\.windowed\s+8\s+3\s+5\s", out, re.M), out
    if plot:
        assert (tmp_path / "timeline.png").stat().st_size > 10_000
    assert _group_gone(demo.pid_after("worker ready")), "the worker outlived the demo"
    assert sorted(client.scan_iter(match=f"{namespace}:*")) == [f"{namespace}:mine"], "the demo left keys behind"
    assert {key: client.get(key) for key in theirs} == theirs, "the demo deleted a key it did not make"
    client.delete(*theirs)
    client.close()


def test_a_namespace_that_could_match_other_keys_is_refused(run_demo):
    demo = run_demo({"REDIS_URL": f"redis://127.0.0.1:{free_port()}", "CSL_DEMO_NAMESPACE": "*"})
    assert demo.wait(30) == 2
    assert "CSL_DEMO_NAMESPACE='*'" in demo.output()


def test_demo_starts_embedded_redis_when_none_answers_and_cleans_up_on_ctrl_c(run_demo):
    url = f"redis://127.0.0.1:{free_port()}"
    assert not reachable(url)
    demo = run_demo({"REDIS_URL": url, "CSL_DEMO_NAMESPACE": "csl-demo"})
    wait_for(lambda: "round 1/8" in demo.output(), 90, what="the demo to start sending")
    redis_pid, worker_pid = demo.pid_after("embedded redis-server"), demo.pid_after("worker ready")
    embedded = re.search(r"at (redis://127\.0\.0\.1:\d+/0)", demo.output()).group(1)
    assert reachable(embedded)

    demo.process.send_signal(signal.SIGINT)  # what Ctrl-C sends
    code = demo.wait(30)

    out = demo.output()
    assert code == 130, out
    assert "interrupted" in out and "demo keys deleted (0 left" in out and "embedded redis-server stopped" in out
    assert _group_gone(worker_pid) and _group_gone(redis_pid)
    assert not reachable(embedded)
