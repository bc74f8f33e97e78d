"""``lock_limit`` and ``lock_window`` from the task definition to the store (MemoryBackend, no worker)."""

from __future__ import annotations

import threading
import time
from typing import List

import pytest
from celery import Celery

from celery_singleton_lock import ConfigurationError, LockedTask
from celery_singleton_lock.calls.limits import window_countdown
from celery_singleton_lock.config.options import resolve_options
from celery_singleton_lock.runtime import runtime_for
from tests.support.apps import MADE
from celery_singleton_lock.store import Conflict, MemoryBackend


def resolve(conf=None, **attrs):
    return resolve_options("t", attrs.get, conf or {})


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now





def _app(store=None, **conf):
    app = Celery("limits", broker="memory://", set_as_current=False)
    MADE.append(app)
    if store is not None:
        app.conf.singleton_lock_backend = store
    else:
        app.conf.singleton_lock_url = "redis://127.0.0.1:6379/0"  # never connected to here
    app.conf.update(conf)
    app.finalize()
    return app


def test_the_defaults_are_the_singleton_lock():
    options = resolve()
    assert (options.limit, options.window) == (1, 0.0)


def test_task_options_win_over_app_settings():
    options = resolve({"singleton_lock_limit": 4, "singleton_lock_window": 60}, lock_limit=2)
    assert (options.limit, options.window) == (2, 60.0)


@pytest.mark.parametrize("attrs, message", [
    ({"lock_limit": 0}, "lock_limit must be an int from 1 to 1000000"),
    ({"lock_limit": True}, "lock_limit must be an int from 1 to 1000000"),
    ({"lock_limit": "3"}, "lock_limit must be an int from 1 to 1000000"),
    ({"lock_limit": 2.5}, "lock_limit must be an int from 1 to 1000000"),
    ({"lock_window": -1}, "lock_window=-1 must be >= 0"),
    ({"lock_window": "60"}, "lock_window must be a number of seconds"),
])
def test_wrong_limits_and_windows_are_refused_at_definition(attrs, message):
    with pytest.raises(ConfigurationError, match=message):
        resolve(**attrs)


def test_a_limit_above_one_on_a_quorum_is_refused_at_definition_with_why():
    app = _app(singleton_lock_url=["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"])
    with pytest.raises(ConfigurationError, match="quorum.*cannot keep lock_limit > 1.*Sentinel or a Redis Cluster"):
        @app.task(base=LockedTask, shared=False, lock_limit=3)
        def job(account_id):
            pass
    with pytest.raises(ConfigurationError, match="quorum"):
        @app.task(base=LockedTask, shared=False, lock_limit=lambda account_id: 1)
        def job2(account_id):
            pass

    # and a window alone works there
    @app.task(base=LockedTask, shared=False, lock_window=60)
    def throttled(account_id):
        pass


def test_at_most_limit_bodies_of_a_key_run_at_once_and_other_keys_are_apart():
    store = MemoryBackend()
    app = _app(store)
    release, running, ran = threading.Event(), [], []
    entered = threading.Semaphore(0)

    @app.task(base=LockedTask, shared=False, bind=True, lock_limit=2)
    def job(self, account_id):
        running.append(self.lock.key)
        entered.release()
        release.wait(10)
        ran.append(account_id)

    # Given four calls of key 1 and one of key 2 at once, each in its own thread
    results: List[object] = []
    threads = [threading.Thread(target=lambda a=a: results.append(job.apply((a,)).get()))
               for a in (1, 1, 1, 1, 2)]
    for thread in threads:
        thread.start()
    # then two of key 1 and the one of key 2 get in, and the others are skipped at once
    for _ in range(3):
        assert entered.acquire(timeout=10)
    deadline = time.monotonic() + 10
    while len(results) < 2 and time.monotonic() < deadline:  # the two skipped calls have answered
        time.sleep(0.01)
    assert len(results) == 2, results
    release.set()
    for thread in threads:
        thread.join(10)
    assert sorted(ran) == [1, 1, 2]
    assert all(key.endswith(":places") for key in running)
    # and every place is given back
    assert store.keys() == []


def test_a_limit_function_gets_the_calls_arguments():
    store = MemoryBackend()
    app = _app(store)
    limits_asked = []

    def per_tenant(tenant, plan="free"):
        limits_asked.append((tenant, plan))
        return 1 if plan == "free" else 5

    @app.task(base=LockedTask, shared=False, bind=True, lock_key=("tenant",), lock_limit=per_tenant)
    def job(self, tenant, plan="free"):
        return self.lock.key

    assert job.apply(("acme",), {"plan": "pro"}).get().endswith(":places")
    # 1 and no window: still the key's places, where the calls answered 5 count too
    assert job.apply(("acme",)).get().endswith(":places")
    assert ("acme", "pro") in limits_asked

    @app.task(base=LockedTask, shared=False, lock_limit=lambda x: 0)
    def wrong(x):
        pass

    with pytest.raises(ConfigurationError, match="lock_limit function returned 0"):
        wrong.apply((1,)).get()


def test_a_window_keeps_the_key_taken_after_the_run_until_it_ends():
    clock = Clock()
    store = MemoryBackend(clock=clock)
    app = _app(store)
    ran = []

    @app.task(base=LockedTask, shared=False, lock_window=600)
    def job(x):
        ran.append(clock.now)

    # Given a run that ended, when the same call comes within the window, then it is skipped
    job.apply((1,)).get()
    job.apply((1,)).get()
    clock.now += 599
    job.apply((1,)).get()
    assert ran == [1_000.0]
    # and once the window has passed, it runs again; another key was never held back
    clock.now += 2
    job.apply((1,)).get()
    job.apply((2,)).get()
    assert len(ran) == 3


def _conflict(window_ms):
    return Conflict(task_id="t", host="h", pid=1, since_ms=0, pttl_ms=5_000, heartbeat_ms=1_000, state="released",
                    window_ms=window_ms)


def test_a_retry_under_a_window_aims_just_after_its_end():
    countdowns = [window_countdown(_conflict(2_000)) for _ in range(200)]
    assert all(2.0 < c <= 2.2 for c in countdowns)
    assert len(set(countdowns)) > 100  # jittered
    assert window_countdown(_conflict(None)) is None and window_countdown(None) is None


def test_a_call_handed_a_turn_comes_back_for_it_and_waits_in_place_when_it_is_near():
    from dataclasses import replace

    from celery_singleton_lock.calls.limits import TURN_WAIT_S, turn_wait

    # A turn 7 s away: re-queued to just after it, not to the soonest window's end
    far = replace(_conflict(2_000), turn_ms=7_000)
    assert all(7.0 < window_countdown(far) <= 7.05 for _ in range(50)) and turn_wait(far) is None
    # A turn a moment away is waited for in place
    assert 0.3 <= turn_wait(replace(far, turn_ms=300)) <= 0.31
    # A turn come already (a place of the turn before it was taken late): the soonest window's end
    assert 0.4 <= turn_wait(replace(_conflict(400), turn_ms=-20)) <= 0.41
    assert turn_wait(replace(_conflict(int(TURN_WAIT_S * 1000) + 500), turn_ms=0)) is None
    # No turn: nothing waits in place
    assert turn_wait(_conflict(300)) is None


def test_wait_is_woken_by_a_windows_end():
    store = MemoryBackend()
    app = _app(store)
    ran: List[float] = []

    @app.task(base=LockedTask, shared=False, lock_window=0.3, on_locked="wait", lock_wait_timeout=10)
    def job(x):
        ran.append(time.monotonic())

    # Given a run whose window still holds its key, when the same call comes with on_locked="wait"
    job.apply((1,)).get()
    job.apply((1,)).get()
    # then it runs as soon as the window has ended, not after lock_wait_timeout
    assert len(ran) == 2 and 0.25 <= ran[1] - ran[0] < 2.0


def test_wait_is_woken_by_any_holders_release():
    store = MemoryBackend()
    app = _app(store)
    gates = {1: threading.Event(), 2: threading.Event()}
    entered = threading.Semaphore(0)
    ran: List[int] = []

    @app.task(base=LockedTask, shared=False, lock_key=("k",), lock_limit=2, on_locked="wait", lock_wait_timeout=10)
    def job(k, n):
        entered.release()
        if n in gates:
            gates[n].wait(10)
        ran.append(n)

    # Given both places of a key held by runs that wait on their gates
    holders = [threading.Thread(target=lambda n=n: job.apply(("k", n)).get()) for n in (1, 2)]
    for thread in holders:
        thread.start()
    for _ in range(2):
        assert entered.acquire(timeout=10)
    # When a third call waits, and the second holder (not the first) lets go
    waiter = threading.Thread(target=lambda: job.apply(("k", 3)).get())
    waiter.start()
    gates[2].set()
    # then the waiter runs at once, while the first still holds its place
    waiter.join(5)
    assert ran[-1] == 3 and 1 not in ran
    gates[1].set()
    for thread in holders:
        thread.join(10)


def test_a_redelivery_is_not_dropped_when_another_holder_of_its_key_lets_go():
    from celery_singleton_lock.store import Holder, Limit, limited

    store = MemoryBackend()
    app = _app(store)
    ran: List[int] = []

    @app.task(base=LockedTask, shared=False, lock_key=("k",), lock_limit=2, acks_late=True, lock_ttl=1)
    def job(k):
        ran.append(k)

    limit = Limit(2)
    keys = limited(runtime_for(app).layout.keys(job.name, job.lock_digest(("k",), {}), "running"), limit)

    def holder(task_id: str) -> Holder:
        return Holder(task_id=task_id, host="h", pid=1, since_ms=0, heartbeat_ms=300)

    # Given the first delivery of message M holding a place but dead (its 0.6 s lease not renewed),
    # and another call holding the key's other place
    store.acquire(keys.lock, "first-delivery", 600, holder("M"), limit=limit)
    store.acquire(keys.lock, "other", 60_000, holder("X"), limit=limit)
    # When M is delivered again, and meanwhile the other call (not M's first delivery) lets go
    threading.Timer(0.2, lambda: store.release(keys.lock, "other")).start()
    job.apply(("k",), task_id="M").get()
    # then the redelivery was not taken for a copy whose first delivery ran: once the dead
    # delivery's lease ran out, it ran
    assert ran == ["k"]


def test_a_redelivery_watching_its_first_deliverys_place_does_not_spin_on_a_key_with_free_places():
    from celery_singleton_lock.store import Holder, Limit, limited

    class Counting(MemoryBackend):
        asks = 0

        def acquire(self, *args, **kwargs):
            Counting.asks += 1
            return super().acquire(*args, **kwargs)

    store = Counting()
    app = _app(store)
    ran: List[str] = []

    @app.task(base=LockedTask, shared=False, lock_key=("k",), lock_limit=3, acks_late=True, lock_ttl=1)
    def job(k):
        ran.append(k)

    limit = Limit(3)
    keys = limited(runtime_for(app).layout.keys(job.name, job.lock_digest(("k",), {}), "running"), limit)
    # Given the dead first delivery of M holding one of three places (its 0.8 s lease not renewed)
    store.acquire(keys.lock, "first-delivery", 800, Holder("M", "h", 1, 0, 300), limit=limit)
    Counting.asks = 0
    # When M is delivered again, then it runs once that lease has run out, having asked a few
    # times a second meanwhile (not in a tight loop: the key's waiters are told of nothing while
    # it has a free place)
    job.apply(("k",), task_id="M").get()
    assert ran == ["k"]
    assert Counting.asks <= 12, Counting.asks


def test_a_refusal_of_a_key_with_places_says_how_many_are_taken_in_the_error_and_the_signal():
    from celery_singleton_lock import LockedError, lock_conflict

    app = _app(MemoryBackend())
    seen: List[dict] = []

    def record(sender=None, **kwargs):
        seen.append(kwargs)

    @app.task(base=LockedTask, shared=False, lock_window=600, on_locked="raise")
    def job(x):
        return x

    @app.task(base=LockedTask, shared=False, lock_scope="queued_or_running", lock_limit=2, on_locked="raise")
    def queued(x):
        return x

    @app.task(base=LockedTask, shared=False, lock_scope="queued_or_running", on_locked="raise")
    def single(x):
        return x

    lock_conflict.connect(record, weak=False)
    try:
        # Given a run whose window still keeps its place, when the same call comes
        assert job.apply((1,)).get() == 1
        result = job.apply((1,))
        # then its LockedError and the signal say the one place of one is taken
        assert isinstance(result.result, LockedError)
        assert "(1 of 1 places taken)" in str(result.result)
        # and a call refused at publish, with both places of a key queued, says two of two
        queued.delay(7)
        queued.delay(7)
        with pytest.raises(LockedError, match="2 of 2 places taken"):
            queued.delay(7)
        # while a singleton lock's refusal names no places
        single.delay(7)
        with pytest.raises(LockedError) as refused:
            single.delay(7)
        assert "places" not in str(refused.value)
        assert [s["places"] for s in seen] == ["1 of 1 places taken", "2 of 2 places taken", None]
    finally:
        lock_conflict.disconnect(record)
