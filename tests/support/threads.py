"""The library's own threads must not outlive a test: an autouse fixture for the conftests to take in.

It imports nothing but the standard library and pytest, so the unit tests can use it without
loading Redis or the worker helpers.
"""

from __future__ import annotations

import threading
from typing import Iterator

import pytest

__all__ = ["no_thread_leaks", "LIBRARY_THREADS"]

#: Names of the threads the library starts.
LIBRARY_THREADS = ("singleton-lock-heartbeat", "singleton-lock-childwatch")


@pytest.fixture(autouse=True)
def no_thread_leaks() -> Iterator[None]:
    """No heartbeat or child-watch thread may outlive the test that started it."""
    before = {t.ident for t in threading.enumerate()}
    yield
    leaked = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()
              and t.name in LIBRARY_THREADS]
    for thread in leaked:
        thread.join(10.0)  # a thread still winding down is not a leak; one that never stops is
    assert not [t for t in leaked if t.is_alive()], f"library threads left running: {leaked}"
