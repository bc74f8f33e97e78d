"""A rolling deploy across the change of a lock's key, with real workers of both versions.

Commit 2614155 made a task lock's key its name and key values in order, without parameter names:
a worker of the package before it and one after it look for one call under two keys. With
``singleton_lock_guard_old_keys`` a newer worker's run also holds the key the older version names
for the call, so neither version runs a call the other is running.

Given a prefork worker of the older package, built here from the repository's history
(``git archive 2614155^``) and imported from that tree, consuming the queue ``older``, and a
prefork worker of this package with the guard on, consuming ``newer``, each sent its copy of a
call by the test:

- a ``skip`` copy meeting the other version's run ends SUCCESS ``None`` unrun, both ways;
- a SIGKILLed pool process of the newer worker gives both keys back at once (its main process
  does), and an older copy of the call runs right after, long before the ttl;
- a ``wait`` copy meeting the other version's run runs after it, both ways: the newer one
  re-queued until the older run ends, the older one woken by the release of the older key.

Judged from what the bodies recorded (their starts and intervals, the directory of the package each
imported), from the ``lock_conflict`` signals and deliveries they recorded, and from the lock Redis.
Without the repository's history (the support matrix's cells copy only tests/) the tests skip.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional

import pytest
import redis
from celery.result import AsyncResult

from tests.integration.helpers import lock_field, lock_keys
from tests.support.waits import stretched, wait_for
from tests.support.workers import Worker

APP = "tests.integration.proj_rolling"
#: The repository: its history holds the older package.
ROOT = str(Path(__file__).resolve().parents[2])
#: The commit that changed every lock's key; the older package is built from its parent.
KEY_CHANGE = "2614155b6fe70bd78797bef25cfc147f6162888e"
BEFORE = f"{KEY_CHANGE}^"
#: The setting of the guard: the older package knows no such name (so it is surely the older one).
GUARD_SETTING = "singleton_lock_guard_old_keys"


class Workers(NamedTuple):
    older: Worker
    newer: Worker
    older_package: str  #: the directory of the older package's celery_singleton_lock
    newer_package: str


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", ROOT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def older_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as it was before the key change, from the repository's history."""
    try:
        found = _git("rev-parse", "--verify", "--quiet", f"{KEY_CHANGE}^{{commit}}")
        before = _git("rev-parse", "--verify", "--quiet", f"{BEFORE}^{{commit}}")
    except FileNotFoundError:
        pytest.skip("git is not installed: the older package is built from the repository's history")
    if found.returncode != 0 or before.returncode != 0:
        pytest.skip(f"no commit {KEY_CHANGE[:7]} and parent in {ROOT} (a copy of tests/ without the repository's "
                    "history): the older package is built from it")
    tree = tmp_path_factory.mktemp("older-package")
    archive = subprocess.Popen(["git", "-C", ROOT, "archive", before.stdout.decode().strip(), "celery_singleton_lock"],
                               stdout=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", str(tree)], stdin=archive.stdout)
    archive.stdout.close()
    assert archive.wait() == 0 and untar.returncode == 0, "git archive | tar -x failed"
    assert (tree / "celery_singleton_lock" / "__init__.py").is_file()
    knows = [path for path in (tree / "celery_singleton_lock").rglob("*.py") if GUARD_SETTING in path.read_text()]
    assert not knows, f"the older package already knows {GUARD_SETTING}: {knows}"
    return tree


@pytest.fixture(scope="module")
def rolling(test_env: Dict[str, str]):
    import tests.integration.proj_rolling as module

    return module


@pytest.fixture(scope="module")
def workers(test_env: Dict[str, str], suite_servers, older_tree: Path, rolling) -> Iterator[Workers]:
    """One worker of each version, for the whole module (each test uses accounts of its own)."""
    suite_servers.clean()
    tag = uuid.uuid4().hex[:6]
    older = Worker(APP, dict(test_env), name=f"older-{tag}", concurrency=2, extra_args=["-Q", "older"],
                   root=str(older_tree))
    newer = Worker(APP, dict(test_env, CSL_GUARD_OLD_KEYS="1"), name=f"newer-{tag}", concurrency=2,
                   extra_args=["-Q", "newer"])
    try:
        older.start()
        newer.start()
        yield Workers(older, newer, str(older_tree / "celery_singleton_lock"), rolling.PACKAGE)
    finally:
        older.stop()
        newer.stop()


@pytest.fixture
def send(workers: Workers, request: pytest.FixtureRequest, events_redis: redis.Redis,
         lock_redis: redis.Redis) -> Iterator[Callable[..., AsyncResult]]:
    """``send(task, account_id, duration, queue)``: one copy of a call, for the worker of ``queue``.

    Each test reads only its own records; at its end every body still running is told to end and
    every call is waited for, so a failed test leaves nothing running or held for the next one (and
    a failed test's report carries the ends of both workers' logs).
    """
    request.node.csl_processes = [workers.older, workers.newer]
    events_redis.delete("started", "intervals", "entered", "conflicts")
    sent: List[AsyncResult] = []

    def send_one(task, account_id: int, duration: float, queue: str) -> AsyncResult:
        sent.append(task.apply_async((account_id,), {"duration": duration}, queue=queue))
        return sent[-1]

    yield send_one
    for entry in _records(events_redis, "started"):
        _end(events_redis, entry["id"])
    for result in sent:
        try:
            result.get(timeout=stretched(10), propagate=False)
        finally:
            result.forget()
    _nothing_held(lock_redis)


def _records(events: redis.Redis, kind: str, task_id: Optional[str] = None) -> List[dict]:
    entries = [json.loads(item) for item in events.lrange(kind, 0, -1)]
    return [e for e in entries if task_id is None or e["id"] == task_id]


def _started(events: redis.Redis, task_id: str, timeout: float = 20.0) -> dict:
    return wait_for(lambda: next(iter(_records(events, "started", task_id)), None), timeout,
                    what=f"task {task_id} to start")


def _end(events: redis.Redis, task_id: str) -> None:
    """Tell a running body to end now."""
    events.set(f"end:{task_id}", 1)


def _held_by(lock_redis: redis.Redis, task_id: str) -> List[str]:
    """The lock keys (run locks) held by the execution of ``task_id``."""
    held = []
    for key in lock_keys(lock_redis):
        try:
            if lock_field(lock_redis, key, "task_id") == task_id:
                held.append(key)
        except redis.ResponseError:  # not a string: no run lock (a line, a generation)
            pass
    return held


def _nothing_held(lock_redis: redis.Redis) -> None:
    wait_for(lambda: not lock_keys(lock_redis), 10, interval=0.05, what="every lock key to be gone")


def _met_the_holder(events: redis.Redis, task_id: str) -> bool:
    """Whether a copy was turned away by a held lock: the library said so (``lock_conflict``), or its
    message came back (re-queued); or it started, which the caller judges."""
    return bool(_records(events, "conflicts", task_id) or len(_records(events, "entered", task_id)) >= 2
                or _records(events, "started", task_id))


@pytest.mark.parametrize("first, second", [("older", "newer"), ("newer", "older")])
def test_a_skip_copy_meeting_the_other_versions_run_ends_unrun(workers, rolling, send, events_redis, lock_redis,
                                                               first, second):
    account = 7 if first == "older" else 8
    # Given the call running in the {first} version's worker
    holder = send(rolling.sync_or_skip, account, 20.0, first)
    running = _started(events_redis, holder.id)
    assert running["package"] == getattr(workers, f"{first}_package")
    # When a copy of it is sent to the {second} version's worker
    copy = send(rolling.sync_or_skip, account, 0.5, second)
    # Then it ends SUCCESS None without running, while the holder still runs
    assert copy.get(timeout=stretched(10)) is None
    assert copy.state == "SUCCESS"
    assert not _records(events_redis, "intervals", holder.id), "the holder ended before the copy was judged"
    _end(events_redis, holder.id)
    done = holder.get(timeout=stretched(10))
    assert done["package"] == getattr(workers, f"{first}_package")
    assert [e["id"] for e in _records(events_redis, "started") if e["key"] == account] == [holder.id]
    # and nothing is left held
    _nothing_held(lock_redis)


def _locks(test_env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """``celery locks`` of this package, as an operator runs it beside the newer workers."""
    env = dict(os.environ, **test_env, CSL_GUARD_OLD_KEYS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "celery", "-A", APP, "locks", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=60)


def test_a_killed_pool_process_of_the_newer_worker_gives_both_keys_back_at_once(workers, rolling, send, events_redis,
                                                                                lock_redis, test_env):
    account = 10
    # Given the call running in the newer worker, holding its key and the older version's
    holder = send(rolling.sync_or_skip, account, 25.0, "newer")
    running = _started(events_redis, holder.id)
    held = wait_for(lambda: (lambda keys: keys if len(keys) == 2 else None)(_held_by(lock_redis, holder.id)), 5,
                    what="the run to hold two keys (its own and the older version's)")
    assert running["pid"] in workers.newer.children()
    # which the operator sees as one run: its lock, and its older key flagged as that run's
    listing = _locks(test_env, "list", "--task", rolling.sync_or_skip.name)
    assert listing.returncode == 0, listing.stderr
    rows = [line for line in listing.stdout.splitlines() if holder.id in line]
    assert len(rows) == 2 and sum("older-key" in row for row in rows) == 1, listing.stdout
    counts = [line.split() for line in listing.stdout.splitlines() if line.startswith(rolling.sync_or_skip.name)]
    assert [rolling.sync_or_skip.name, "1", "1"] in [row[:3] for row in counts], listing.stdout
    shown = _locks(test_env, "show", rolling.sync_or_skip.name)
    assert shown.returncode == 0 and "older key of" not in shown.stdout, shown.stdout + shown.stderr
    # When its pool process is SIGKILLed (ttl 30 s, body 25 s)
    os.kill(running["pid"], signal.SIGKILL)
    killed = time.time()
    # Then the worker's main process gives both keys back within seconds, not at their ttl
    wait_for(lambda: not any(lock_redis.exists(key) for key in held), 10, interval=0.05, promise=True,
             what=f"both keys of the killed run to be given back: {held}")
    # and an older worker's copy of the call runs right after
    copy = send(rolling.sync_or_skip, account, 0.2, "older")
    done = copy.get(timeout=stretched(10))
    assert done is not None and done["package"] == workers.older_package
    assert _started(events_redis, copy.id)["start"] - killed < 15  # the ttl (30 s) would have freed them later
    _nothing_held(lock_redis)


@pytest.mark.parametrize("first, second", [("older", "newer"), ("newer", "older")])
def test_a_wait_copy_meeting_the_other_versions_run_runs_after_it(workers, rolling, send, events_redis, lock_redis,
                                                                  first, second):
    account = 9 if first == "older" else 11
    # Given the call running in the {first} version's worker
    holder = send(rolling.sync_or_wait, account, 20.0, first)
    _started(events_redis, holder.id)
    # When a waiting copy of it is sent to the {second} version's worker, and meets the running one
    copy = send(rolling.sync_or_wait, account, 0.3, second)
    wait_for(lambda: _met_the_holder(events_redis, copy.id), 10, what="the copy to meet the running call")
    assert not _records(events_redis, "started", copy.id), "the copy started while the other version's run held it"
    # Then, once the running call ends, the copy runs after it: both ran, one after the other
    _end(events_redis, holder.id)
    first_run, second_run = holder.get(timeout=stretched(10)), copy.get(timeout=stretched(20))
    assert first_run["package"] == getattr(workers, f"{first}_package")
    assert second_run["package"] == getattr(workers, f"{second}_package")
    before, after = _records(events_redis, "intervals", holder.id)[0], _records(events_redis, "intervals", copy.id)[0]
    assert after["start"] >= before["end"]
    # soon after it: a waiting older copy is told of the older key's release (without that word it
    # would ask again only as the key's ttl of 30 s ran out); a newer one is re-queued every 0.1-0.3 s
    assert after["start"] - before["end"] < min(stretched(5), 15)
    _nothing_held(lock_redis)
