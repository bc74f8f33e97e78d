"""Bounded waits on observable events (never a bare sleep).

A wait's bound is how long the test gives an event that a quiet machine shows well within it. On a
loaded machine (CI shares its cores with the support matrix) everything takes longer, and a bound
only ever matters when the event has not come: so every bound is stretched by ``CSL_TEST_SLACK``
(default 2), which costs a passing test nothing. A bound that is itself a promise of the product
(a place freed within ``lock_ttl``, a revoked lock gone within a second) is passed with
``promise=True`` and kept as written: such tests measure what load cannot stretch (a key's expiry
in Redis, the worker's own timestamps) or leave the figure to the benchmark.
"""

from __future__ import annotations

import os
import time
from typing import Callable, TypeVar

T = TypeVar("T")

__all__ = ["wait_for", "WaitTimeout", "SLACK", "stretched"]


class WaitTimeout(AssertionError):
    pass


def _slack() -> float:
    raw = os.environ.get("CSL_TEST_SLACK", "2")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"CSL_TEST_SLACK must be a number, not {raw!r}") from None
    if not 1 <= value <= 100:
        raise ValueError(f"CSL_TEST_SLACK must be between 1 and 100, not {raw!r}")
    return value


#: How much a wait's bound is stretched (``CSL_TEST_SLACK``).
SLACK = _slack()


def stretched(seconds: float) -> float:
    """A generous bound for an event that a quiet machine shows within ``seconds``."""
    return seconds * SLACK


def wait_for(predicate: Callable[[], T], timeout: float, interval: float = 0.02, what: str = "condition",
             promise: bool = False) -> T:
    """Poll ``predicate`` until it returns a truthy value; fail after ``timeout`` seconds, stretched
    by ``SLACK`` unless the bound is a promise of the product."""
    bound = timeout if promise else stretched(timeout)
    deadline = time.monotonic() + bound
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(f"timed out after {bound:g}s waiting for {what}")
        time.sleep(interval)
