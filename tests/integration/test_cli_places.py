"""``celery locks`` on keys with places: every holder shown, counted per task, and a released place's time.

Given a key with a limit and a window whose places are taken and given back through the store
itself (no worker: what ``locks`` reads is the store), the operator's commands name every holder
(``k of N``, each with its window's time left), count places per task, and say when a place its
window keeps was released.
"""

from __future__ import annotations

import json
import os
import re
import socket

from celery_singleton_lock.store import Grant, Holder, KeyLayout, RedisBackend
from celery_singleton_lock.store.places import Limit, limited
from tests.integration.test_cli import run_cli
from tests.integration.test_places import store  # noqa: F401 - a fixture

TASK = "tests.integration.proj.storm"


def _take(store: RedisBackend, limit: Limit, digest: str, count: int) -> str:
    keys = limited(KeyLayout("csltest").keys(TASK, digest, "running"), limit)
    for n in range(count):
        alive = Holder(task_id=f"t{n}", host=socket.gethostname(), pid=os.getpid(), since_ms=n,
                       heartbeat_ms=20_000)
        assert isinstance(store.acquire(keys.lock, f"tok-{n}", 60_000, alive, limit=limit), Grant)
    return keys.lock


def test_show_names_every_holder_of_a_key_with_places(proj, store):
    # Given a key with three places and a minute's window: three taken, the first given back
    key = _take(store, Limit(3, 60_000), "cd" * 16, 3)
    assert store.release(key, "tok-0")
    # When an operator shows it by its digest
    proc = run_cli("show", "cdcdcdcd")
    assert proc.returncode == 0, proc.stderr
    # then every holder is shown, as k of N with its window's time left
    assert proc.stdout.count("holder task id:") == 3
    assert {"t0", "t1", "t2"} == set(re.findall(r"holder task id: (\S+)", proc.stdout))
    assert proc.stdout.count("running (3 of 3, window") == 2
    # and the place given back says when, and how long its window keeps it
    released = re.search(r"state: released (\S+) ago, its window keeps the place (\S+) more", proc.stdout)
    assert released, proc.stdout
    assert released.group(1).endswith("ms") or float(released.group(1).rstrip("s")) < 30
    assert 50 < float(released.group(2).rstrip("s")) <= 60
    # and --json lists every place
    shown = json.loads(run_cli("show", "cdcdcdcd", "--json").stdout)
    assert sorted(r["task_id"] for r in shown) == ["t0", "t1", "t2"]
    assert [r["released_ms"] is not None for r in sorted(shown, key=lambda r: r["task_id"])] == [True, False, False]


def test_list_counts_a_key_with_places_once_and_each_holder(proj, store):
    # Given one key of a task with two of its three places running and one kept by its window
    key = _take(store, Limit(3, 60_000), "ef" * 16, 3)
    assert store.release(key, "tok-2")
    # When an operator lists the locks
    proc = run_cli("list")
    assert proc.returncode == 0, proc.stderr
    counts = proc.stdout.split("\n\n", 1)[1].splitlines()
    header, row = counts[0].split(), next(line.split() for line in counts[1:] if line.startswith(TASK))
    # then the task holds one lock, run by two holders, with one place its window keeps
    assert dict(zip(header, row)) == {"TASK": TASK, "LOCKS": "1", "RUNNING": "2", "QUEUED": "0",
                                      "WINDOW-KEPT": "1", "STALE": "0", "LOST": "0"}


def test_show_of_a_key_released_with_no_window_says_the_store_keeps_no_record(proj, store):
    key = _take(store, Limit(2, 0), "ab" * 16, 1)
    assert store.release(key, "tok-0")
    proc = run_cli("show", key)
    assert proc.returncode == 1
    assert "the store keeps no record of when" in proc.stderr


def test_a_place_carries_the_call_it_was_taken_for_when_the_app_describes_calls(proj, store):
    # Given a place taken by a holder whose app describes its calls
    limit = Limit(2, 0)
    keys = limited(KeyLayout("csltest").keys(TASK, "9a" * 16, "running"), limit)
    holder = Holder(task_id="tid-1", host=socket.gethostname(), pid=os.getpid(), since_ms=0, heartbeat_ms=20_000,
                    describe="account_id=42")
    assert isinstance(store.acquire(keys.lock, "tok", 60_000, holder, limit=limit), Grant)
    # then locks list and show name the call
    (record,) = [r for r in json.loads(run_cli("list", "--json").stdout) if r["key"] == keys.lock]
    assert (record["describe"], record["task_id"]) == ("account_id=42", "tid-1")
    assert "call: account_id=42" in run_cli("show", keys.lock).stdout
    # and the store still knows the place by its task id alone
    assert store.mark_redelivered(keys.lock, "tid-1")
    assert store.release(keys.lock, "tok")


def test_clear_of_a_key_with_places_judges_each_holder(proj, store):
    # Given a key with two places held by live holders (this process, renewing) and one its window keeps
    key = _take(store, Limit(3, 60_000), "7e" * 16, 3)
    assert store.release(key, "tok-0")
    # When an operator clears the key, then each live holder is refused, by its own token
    refused = run_cli("clear", key)
    assert refused.returncode == 1 and refused.stderr.count("refused:") == 2, refused.stderr
    # and with --force both holders are cleared, and the window ends: no place is kept
    forced = run_cli("clear", "--force", key)
    assert forced.returncode == 0 and forced.stdout.count("cleared ") == 2, forced.stdout + forced.stderr
    assert "ended the window" in forced.stdout and "3 place(s)" in forced.stdout, forced.stdout
    assert isinstance(store.acquire(key, "tok-new", 60_000, Holder("t9", "h", 1, 0, 20_000), limit=Limit(3, 60_000)),
                      Grant)
    assert store.holder(key)["held"] == "1"
