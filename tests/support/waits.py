"""Bounded waits on observable events (never a bare sleep)."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")

__all__ = ["wait_for", "WaitTimeout"]


class WaitTimeout(AssertionError):
    pass


def wait_for(predicate: Callable[[], T], timeout: float, interval: float = 0.02, what: str = "condition") -> T:
    """Poll ``predicate`` until it returns a truthy value; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
