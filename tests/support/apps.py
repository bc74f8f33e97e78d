"""Apps a unit test makes, each with its runtime closed after the test (a run starts a heartbeat).

A test module's app factory appends to :data:`MADE`; the autouse fixture closes what a test
made. It imports nothing but the standard library and pytest at import, so the unit tests'
conftest can take it in without loading Celery.
"""

from __future__ import annotations

from typing import Any, Iterator, List

import pytest

from tests.support.threads import no_thread_leaks  # noqa: F401 - closed runtimes are checked for leaks after

__all__ = ["MADE", "close_made_apps"]

#: The apps made by the running test.
MADE: List[Any] = []


@pytest.fixture(autouse=True)
def close_made_apps(no_thread_leaks: None) -> Iterator[None]:  # noqa: F811 - the leak check runs after
    yield
    if MADE:
        from celery_singleton_lock.runtime import runtime_for

        for app in MADE:
            if "_singleton_lock_runtime" in app.__dict__:
                runtime_for(app).close()
        MADE.clear()
