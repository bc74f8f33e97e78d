"""The renewal thread against the in-memory backend: a lease that ran out is lost, not renewed;
an ask withdrawn after a failure is released by token once the store answers."""

from __future__ import annotations

from celery_singleton_lock.store import Grant, Holder, Lease, MemoryBackend, Renewer
from tests.support.waits import wait_for

HOLDER = Holder(task_id="t", host="h", pid=1, since_ms=0, heartbeat_ms=1000)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_lease_past_its_ttl_since_the_last_renewal_is_lost_and_not_renewed():
    store, clock, lost = MemoryBackend(), Clock(), []
    assert isinstance(store.acquire("k", "tok", 60_000, HOLDER), Grant)
    renewer = Renewer(store, on_lost=lambda lease, reason: lost.append(reason), clock=clock)
    renewer.idle_linger = 0.05
    lease = Lease("k", "tok", ttl=3.0, heartbeat=1.0, confirmed_at=clock.now - 3.5)  # paused for 3.5 s
    try:
        renewer.hold(lease)
        wait_for(lease.lost.is_set, 2, what="the loss to be noticed")
        assert lost and "TTL ran out" in lost[0]
    finally:
        renewer.close()
    still = store.acquire("k", "someone-else", 1000, HOLDER)
    assert still.pttl_ms > 50_000, "a lost lease must not be renewed (a renewal sets its 3 s TTL)"


def test_a_withdrawn_ask_is_released_by_token_and_another_holder_is_left_alone():
    store = MemoryBackend()
    renewer = Renewer(store)
    renewer.restart_check = 0.02
    renewer.idle_linger = 0.05
    assert isinstance(store.acquire("late", "asked", 60_000, HOLDER), Grant)  # the ask that landed late
    assert isinstance(store.acquire("other", "theirs", 60_000, HOLDER), Grant)
    try:
        renewer.release_later("late", "asked", within=5.0)
        renewer.release_later("other", "asked", within=5.0)  # never granted to this token
        wait_for(lambda: store.holder("late") is None, 2, what="the withdrawn ask's lock to be released")
        wait_for(lambda: not renewer.running, 2, what="the thread to exit once nothing is left to do")
        assert store.holder("other") is not None
    finally:
        renewer.close()
