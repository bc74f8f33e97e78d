"""The lock-store contract (``tests/support/contract.py``) against ``MemoryBackend``.

Time is the backend's injected clock: a lease runs out when a check says time passed, at once,
without sleeping. The same checks run against a real Redis in
``tests/integration/test_backend_contract.py``.
"""

from __future__ import annotations

import itertools

import pytest

from celery_singleton_lock.store import KeyLayout, LockKeys, MemoryBackend
from tests.support.contract import CHECKS, holder


class Clock:
    """Seconds that pass only when told to."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class MemoryBench:
    """A fresh ``MemoryBackend`` on its own clock."""

    short_ms = 100

    def __init__(self) -> None:
        self.clock = Clock()
        self.backend = MemoryBackend(clock=self.clock)
        self._layout = KeyLayout("contract")
        self._names = itertools.count()

    def keys(self) -> LockKeys:
        return self._layout.keys("job", f"d{next(self._names)}", "queued")

    def elapse(self, ms: int) -> None:
        self.clock.now += ms / 1000.0


@pytest.mark.parametrize("name", list(CHECKS))
def test_memory_backend_keeps_the_contract(name):
    CHECKS[name](MemoryBench())


def test_a_lease_runs_out_on_the_injected_clock_only():
    # Given a 1 ms lease on a backend whose clock stands still
    bench = MemoryBench()
    keys = bench.keys()
    bench.backend.acquire(keys.lock, "a", 1, holder())
    # When no time passes on that clock, then it is held however long the test takes
    assert bench.backend.holder(keys.lock)["pttl"] == "1"
    # When that 1 ms passes, then it is gone
    bench.elapse(1)
    assert bench.backend.holder(keys.lock) is None
