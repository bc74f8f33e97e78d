"""The quorum (Redlock) decisions and its fencing order, on in-memory masters.

Given masters that can be down or whose counters drifted apart, when locks are
taken by majority, then every grant had a majority and a fence handed out after a
larger one is larger still (``tests/properties`` searches the fencing order).
"""

from __future__ import annotations

from typing import List

import pytest
import redis

from celery_singleton_lock.store import Conflict, Grant, Holder
from celery_singleton_lock.store.quorum import QuorumUnavailable
from tests.support.masters import HOLDER, MemoryMaster, quorum


def test_a_majority_grants_and_a_minority_does_not():
    masters = [MemoryMaster() for _ in range(5)]
    store = quorum(masters)
    assert isinstance(store.acquire("k", "t1", 5000, HOLDER), Grant)
    assert sum("k" in m.locks for m in masters) >= 3  # the rest may still be answering

    outcome = store.acquire("k", "t2", 5000, Holder("other", "h", 2, 0, 1000))
    assert isinstance(outcome, Conflict) and outcome.task_id == "me"  # the holder, as a master sees it
    assert all(m.locks["k"][0] == "t1" for m in masters if "k" in m.locks)  # the loser left nothing


def test_a_failed_acquire_is_undone_everywhere():
    masters = [MemoryMaster() for _ in range(3)]
    masters[0].locks["k"] = ("someone", "other")  # two of three hold someone else's lock
    masters[1].locks["k"] = ("someone", "other")
    store = quorum(masters)

    assert isinstance(store.acquire("k", "mine", 5000, HOLDER), Conflict)
    assert "k" not in masters[2].locks  # granted there, released again


def test_majority_down_is_a_backend_error_not_a_conflict():
    masters = [MemoryMaster() for _ in range(3)]
    masters[0].down = masters[1].down = True
    store = quorum(masters)

    with pytest.raises(QuorumUnavailable) as info:
        store.acquire("k", "t", 5000, HOLDER)
    assert isinstance(info.value, redis.exceptions.ConnectionError)  # so on_lock_error applies
    assert "k" not in masters[2].locks


def test_renewal_keeping_less_than_a_majority_is_a_loss():
    masters = [MemoryMaster() for _ in range(5)]
    store = quorum(masters)
    store.acquire("k", "t", 5000, HOLDER)
    for m in masters[:2]:
        del m.locks["k"]
    assert store.renew([("k", "t", 5000)]) == [True]  # three of five still hold it
    del masters[2].locks["k"]
    assert store.renew([("k", "t", 5000)]) == [False]  # two of five: lost


def test_renewal_that_cannot_tell_raises_so_the_heartbeat_retries():
    masters = [MemoryMaster() for _ in range(3)]
    store = quorum(masters)
    store.acquire("k", "t", 5000, HOLDER)
    masters[0].down = masters[1].down = True
    with pytest.raises(QuorumUnavailable):
        store.renew([("k", "t", 5000)])


def test_release_answers_whether_a_majority_still_held_the_token():
    masters = [MemoryMaster() for _ in range(3)]
    store = quorum(masters)
    store.acquire("k", "t", 5000, HOLDER)
    assert store.release("k", "t") is True
    assert store.release("k", "t") is False


def test_the_largest_counter_alone_would_go_backwards_the_settled_fence_does_not():
    # Given master 0 ran far ahead (minority grants that were undone), master 2 is down.
    masters = [MemoryMaster(100), MemoryMaster(5), MemoryMaster(5)]
    masters[2].down = True
    assert quorum(masters).acquire("k", "a", 5000, HOLDER) == Grant()
    assert quorum(masters).fence("k", "f", "a") == 101  # the largest of (101, 6)
    quorum(masters).release("k", "a")

    # When the next holder's majority is masters 1 and 2 (master 0 now down), from another process:
    masters[0].down, masters[2].down = True, False
    second = quorum(masters).acquire("k", "b", 5000, HOLDER)

    # Then its fence is larger: master 1 was raised to 101 before 101 was handed out.
    # (With the largest value alone master 1 would have said 7, master 2 said 6: fence 7 < 101.)
    assert isinstance(second, Grant) and quorum(masters).fence("k", "f", "b") > 101


def test_split_votes_are_retried_after_a_random_delay():
    masters = [MemoryMaster() for _ in range(5)]
    masters[4].down = True
    masters[0].locks["k"] = masters[1].locks["k"] = ("racer", "racer")  # 2 each of 4: nobody a majority
    store = quorum(masters)
    attempts: List[int] = []
    original = store._take

    def counted(*args, **kwargs):
        attempts.append(1)
        if len(attempts) == 2:
            masters[0].locks.clear()  # the racer gave up after its own failed attempt
            masters[1].locks.clear()
        return original(*args, **kwargs)

    store._take = counted  # type: ignore[assignment]
    assert isinstance(store.acquire("k", "t", 5000, HOLDER), Grant)
    assert len(attempts) == 2


def test_a_fence_is_refused_when_a_majority_does_not_hold_the_token():
    masters = [MemoryMaster() for _ in range(3)]
    store = quorum(masters)
    store.acquire("k", "t", 5000, HOLDER)
    assert isinstance(store.fence("k", "f", "t"), int)
    for m in masters[:2]:
        del m.locks["k"]  # lost on two of three (expired while paused, say)
    assert store.fence("k", "f", "t") is None
