"""Fences of successive quorum holders strictly increase, whatever minority is down or ran ahead."""

from __future__ import annotations

from typing import List, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from celery_singleton_lock.store import Grant, new_token
from tests.support.masters import HOLDER, MemoryMaster, quorum


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sets(st.integers(0, 4), max_size=2), st.integers(0, 4), st.integers(0, 50)),
                min_size=1, max_size=40))
def test_fences_strictly_increase_whatever_minority_is_down_or_ahead(steps: List[Tuple[set, int, int]]):
    masters = [MemoryMaster() for _ in range(5)]
    fences: List[int] = []
    for down, bumped, bump in steps:
        masters[bumped].counters["f"] = masters[bumped].counters.get("f", 0) + bump  # a minority ran ahead
        for i, m in enumerate(masters):
            m.down = i in down  # at most two of five down: a majority is up
        store = quorum(masters)  # every holder is a new process: no floor remembered
        token = new_token()
        outcome = store.acquire("k", token, 5000, HOLDER)
        assert isinstance(outcome, Grant)
        fences.append(store.fence("k", "f", token))
        store.release("k", token)
        for m in masters:  # a lock left on a master that was down when released expires
            m.locks.pop("k", None)
    assert all(b > a for a, b in zip(fences, fences[1:])), fences
