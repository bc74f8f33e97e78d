"""``SharedLock``: places on a named resource held as a block (MemoryBackend, no worker)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import List

import pytest
from celery import Celery

from celery_singleton_lock import (ConfigurationError, LockedError, LockLostError, SharedLock,
                                   UnencodableArgumentError, lock_acquired, lock_conflict, lock_lost, lock_released)
from celery_singleton_lock.runtime import hold_dir, holds, runtime_for
from celery_singleton_lock.store import MemoryBackend
from tests.support.apps import MADE
from tests.support.waits import wait_for




def _app(store=None, **conf):
    app = Celery("shared", broker="memory://", set_as_current=False)
    MADE.append(app)
    app.conf.singleton_lock_backend = store if store is not None else MemoryBackend()
    app.conf.update(conf)
    app.finalize()
    return app


def _blocks(lock, n, values=(), body=None):
    """Run ``n`` blocks in threads at once; return the most inside at one time and the errors."""
    inside, most, errors = [0], [0], []
    mutex = threading.Lock()

    def run():
        try:
            with lock.hold(*values):
                with mutex:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0.03) if body is None else body()
                with mutex:
                    inside[0] -= 1
        except Exception as exc:  # noqa: BLE001 - collected for the test to judge
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    return most[0], errors


def test_at_most_limit_blocks_hold_a_key_at_once_and_with_wait_every_block_gets_through():
    store = MemoryBackend()
    lock = SharedLock("payments-api", limit=2, app=_app(store))
    most, errors = _blocks(lock, 6)
    assert (most, errors) == (2, [])
    assert store.keys() == []


def test_raise_refuses_at_once_naming_the_lock_and_the_places():
    store = MemoryBackend()
    lock = SharedLock("payments-api", on_locked="raise", app=_app(store))
    with lock.hold():
        with pytest.raises(LockedError,
                           match=r"shared lock 'payments-api'.*held by a block outside a task on .* pid") as caught:
            with lock.hold():
                pytest.fail("the block must not run")
    assert caught.value.task == "payments-api"
    assert store.keys() == []


def test_wait_gives_up_after_wait_timeout_with_locked_error():
    lock = SharedLock("slow", wait_timeout=0.2, app=_app())
    with lock.hold():
        began = time.monotonic()
        with pytest.raises(LockedError, match="waited 0.2s"):
            with lock.hold():
                pass
        assert time.monotonic() - began >= 0.2


def test_wait_defaults_to_the_apps_wait_timeout():
    lock = SharedLock("slow", app=_app(singleton_lock_wait_timeout=0.1))
    with lock.hold():
        with pytest.raises(LockedError, match="waited 0.1s"):
            with lock.hold():
                pass


def test_a_waiting_block_is_woken_by_the_release_not_its_timeout():
    lock = SharedLock("woken", wait_timeout=30, ttl=30, app=_app())
    took = threading.Event()
    ended: List[float] = []

    def waiter():
        with lock.hold():
            ended.append(time.monotonic())

    with lock.hold():
        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.1)
        released_at = time.monotonic()
    thread.join(10)
    took.set()
    assert ended and ended[0] - released_at < 2.0


def test_the_place_is_given_back_when_the_block_raises():
    store = MemoryBackend()
    lock = SharedLock("tenant", app=_app(store))
    with pytest.raises(KeyError):
        with lock.hold(42):
            assert store.keys() != []
            raise KeyError("boom")
    assert store.keys() == []


def test_key_values_name_the_place_and_are_encoded_as_task_arguments():
    store = MemoryBackend()
    lock = SharedLock("tenant", on_locked="raise", app=_app(store))
    with lock.hold(42) as a, lock.hold(43) as b, lock.hold() as c:
        assert len({a.key, b.key, c.key}) == 3
        assert ":{tenant:" in a.key
        with pytest.raises(LockedError):
            with lock.hold(42):
                pass
    with pytest.raises(UnencodableArgumentError, match="shared lock 'tenant'"):
        with lock.hold(object()):
            pass
    assert store.keys() == []


def test_with_lock_is_hold_of_the_name_and_nests_per_thread():
    store = MemoryBackend()
    lock = SharedLock("plain", limit=2, on_locked="raise", app=_app(store))
    with lock as outer:
        with lock as inner:
            assert outer.key == inner.key and outer.token != inner.token
        assert len(store.keys()) == 1
    assert store.keys() == []


def test_fencing_tokens_strictly_increase_per_key():
    lock = SharedLock("fenced", limit=3, app=_app())
    fences = []
    for _ in range(4):
        with lock.hold("k") as held:
            fences.append(held.fencing_token)
    assert fences == sorted(set(fences))


def test_a_window_admits_at_most_limit_starts_per_window():
    lock = SharedLock("partner", limit=2, window=0.4, wait_timeout=10, app=_app())
    starts: List[float] = []
    for _ in range(5):
        with lock.hold():
            starts.append(time.monotonic())
    for i in range(len(starts) - 2):
        assert starts[i + 2] - starts[i] >= 0.35  # never 3 starts in one window


def test_retry_outside_a_task_is_refused_before_anything_is_asked():
    store = MemoryBackend()
    lock = SharedLock("payments-api", on_locked="retry", app=_app(store))
    with pytest.raises(ConfigurationError, match='on_locked="retry" re-queues the running Celery task'):
        with lock.hold():
            pass
    assert store.keys() == []


def test_in_a_task_the_record_names_the_task_and_its_id_and_retry_waits_when_eager():
    store = MemoryBackend()
    app = _app(store)
    lock = SharedLock("payments-api", on_locked="retry", wait_timeout=5, app=app)
    seen = {}

    @app.task(shared=False, bind=True)
    def charge(self):
        with lock.hold() as held:
            seen.update(store.holder(held.key))
            seen["id"] = self.request.id

    charge.apply(task_id="T1").get()
    assert (seen["task"], seen["task_id"]) == (charge.name, "T1")


def test_wrong_arguments_are_refused_at_construction():
    for kwargs, message in [({"limit": 0}, "limit must be an int from 1 to 1000000"), ({"limit": True}, "limit must be"),
                            ({"window": -1}, "window=-1 must be >= 0"), ({"ttl": 0}, "ttl=0 must be > 0"),
                            ({"on_locked": "skip"}, "on_locked='skip' is not one of"),
                            ({"wait_timeout": "1"}, "wait_timeout must be a number"),
                            ({"limit": 10 ** 7}, "limit must be an int from 1"),
                            ({"window": float("inf")}, "window=inf is not a finite"),
                            ({"ttl": float("nan")}, "ttl=nan is not a finite"),
                            ({"wait_timeout": 1e16}, "wait_timeout=1e\\+16 is longer than")]:
        with pytest.raises(ConfigurationError, match=message):
            SharedLock("x", **kwargs)
    with pytest.raises(ConfigurationError, match="non-empty str"):
        SharedLock("")


def test_a_limit_above_one_on_a_quorum_is_refused_at_construction():
    app = Celery("quorum", broker="memory://", set_as_current=False)
    app.conf.singleton_lock_url = ["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"]
    with pytest.raises(ConfigurationError, match="quorum"):
        SharedLock("payments-api", limit=2, app=app)
    SharedLock("partner", window=60, app=app)  # a window alone works there


def test_signals_name_the_shared_lock_as_sender():
    lock = SharedLock("signalled", on_locked="raise", app=_app())
    got: List[tuple] = []

    def receiver(signal):
        def on(sender=None, **kwargs):
            got.append((signal, sender, kwargs.get("at")))
        return on

    receivers = [(s, receiver(n)) for n, s in (("acquired", lock_acquired), ("released", lock_released),
                                                ("conflict", lock_conflict))]
    for signal, on in receivers:
        signal.connect(on)
    try:
        with lock.hold():
            with pytest.raises(LockedError):
                with lock.hold():
                    pass
    finally:
        for signal, on in receivers:
            signal.disconnect(on)
    assert [(name, sender is lock, at) for name, sender, at in got] == [
        ("acquired", True, None), ("conflict", True, "hold"), ("released", True, None)]


def test_a_place_taken_from_under_the_block_is_reported_lost():
    store = MemoryBackend()
    lock = SharedLock("fragile", ttl=0.3, app=_app(store))
    lost: List[object] = []

    def on_lost(sender=None, **kwargs):
        lost.append(sender)

    lock_lost.connect(on_lost)
    try:
        with lock.hold() as held:
            store.release(held.key, held.token)  # an operator's clear, say
            wait_for(lambda: held.lost, timeout=5, what="the heartbeat to notice")
            with pytest.raises(LockLostError, match="shared lock 'fragile'"):
                held.check()
            # the flag is raised first, so the block stops at once; the signal follows it
            wait_for(lambda: lost, timeout=5, what="lock_lost to be sent")
    finally:
        lock_lost.disconnect(on_lost)
    assert lost == [lock]


def test_the_main_process_gives_back_what_a_dead_pool_process_noted(tmp_path, monkeypatch):
    store = MemoryBackend()
    app = _app(store)
    lock = SharedLock("noted", on_locked="raise", app=app)
    monkeypatch.setattr(hold_dir.tempfile, "gettempdir", lambda: str(tmp_path))
    holds.enable(os.getpid())  # this process plays the pool process and its main process
    try:
        hold = lock.hold()
        held = hold.__enter__()  # the block never ends: the process "dies" inside it
        runtime_for(app).renewer.drop(held.lease)
        assert held.token in open(os.path.join(holds.directory(os.getpid()), str(os.getpid()))).read()
        assert holds.release_holds_of(store, app, os.getpid(), "a test") == 1
        assert store.keys() == []
        assert not os.path.exists(os.path.join(holds.directory(os.getpid()), str(os.getpid())))
    finally:
        holds._after_fork()  # this process's notes end as a new process's would


def test_the_app_that_describes_its_calls_names_the_key_values():
    store = MemoryBackend()
    lock = SharedLock("tenant", app=_app(store, singleton_lock_describe=True))
    with lock.hold(42, "eu") as held:
        assert store.holder(held.key)["describe"] == "42, 'eu'"
        assert held.description == "42, 'eu'"


_THREADED = """
import sys, threading
from celery import Celery
from celery_singleton_lock import SharedLock
from celery_singleton_lock.store import MemoryBackend

app = Celery("web", broker="memory://")
app.conf.singleton_lock_backend = MemoryBackend()
payments = SharedLock("payments-api", limit=2)  # module level, without app=, as a web process has it
for apps in range(int(sys.argv[1])):
    if apps:
        Celery(f"other{apps}", broker="memory://")
    seen = []

    def request():
        try:
            with payments.hold() as held:
                seen.append(held.key)
        except Exception as exc:
            seen.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=request)  # a web server's request thread: Celery's fallback app is current
    thread.start()
    thread.join()
    print(seen[0])
"""


def test_a_block_in_a_thread_the_app_was_not_made_in_uses_the_one_app_or_says_to_name_it(tmp_path):
    script = tmp_path / "web.py"
    script.write_text(_THREADED)
    done = subprocess.run([sys.executable, str(script), "2"], capture_output=True, text=True, timeout=60,
                          cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                              filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))))
    assert done.returncode == 0, done.stderr
    one, two = done.stdout.splitlines()
    assert one.startswith("singleton_lock:{payments-api:")  # the one app this process made
    assert one.endswith(":places")
    assert two == ("ConfigurationError: shared lock 'payments-api': no app to use in this thread: Celery's current "
                   "app here is its fallback (the thread did not make the app) and this process has 2 apps; pass "
                   "SharedLock(..., app=app), or call app.set_default() once")
