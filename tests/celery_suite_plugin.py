"""Run Celery's own unit tests with ``LockedTask`` as the test app's default task class.

Loaded by ``scripts/celery_suite.sh`` (``pytest -p tests.celery_suite_plugin``) inside an
unpacked Celery sdist. Celery's ``t/unit/conftest.py`` takes its ``celery_parameters``
fixture from :mod:`celery.contrib.pytest` by name; this plugin is imported before that
conftest, so the fixture it finds there is the one below: every ``@self.app.task`` of the
test app becomes a :class:`~celery_singleton_lock.LockedTask` on a fresh
:class:`~celery_singleton_lock.store.MemoryBackend`.

Celery's suite checks after each test that no thread outlived it; the app's lock runtime
(its heartbeat thread) is closed before that check runs.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator

import celery.contrib.pytest
import pytest

from celery_singleton_lock.runtime import peek_runtime
from celery_singleton_lock.store import MemoryBackend

#: The fixture Celery's suite checks for lingering threads with (``t/unit/conftest.py``).
THREAD_CHECK = "threads_not_lingering"


@pytest.fixture
def celery_parameters() -> Dict[str, Any]:
    """The test app's class for every task, and a lock store of its own for each test."""
    return {
        "task_cls": "celery_singleton_lock:LockedTask",
        "changes": {"singleton_lock_backend": MemoryBackend()},
    }


celery.contrib.pytest.celery_parameters = celery_parameters  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def close_lock_runtime(request: pytest.FixtureRequest) -> Iterator[None]:
    """Close the test app's lock runtime after the test, before the lingering-thread check."""
    if THREAD_CHECK in request.fixturenames:
        request.getfixturevalue(THREAD_CHECK)  # set up first, so it is torn down after this
    app = request.getfixturevalue("celery_app")
    yield
    runtime = peek_runtime(app)
    if runtime is not None:
        runtime.close()
