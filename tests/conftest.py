"""Checks for every run. Fixtures live beside the tests that use them: the Redis and worker ones in
``tests/integration/conftest.py``, so the unit tests load neither."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

import pytest

_HERE = Path(__file__).parent
#: Tests outside ``tests/integration`` that start real servers or workers, or build the package: they
#: belong to the slow tier with the integration tests.
_SLOW_TOP_LEVEL = {"test_bench_smoke.py", "test_compose.py", "test_django_docs.py", "test_packaging.py",
                   "test_typing.py"}

#: The Django project the integration tests drive: its tests run under ``manage.py test`` (with
#: Django set up), never collected by this pytest run.
collect_ignore = ["django_project"]


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("CSL_EXPECT_INSTALLED"):  # a cell of the support matrix tests the built wheel
        import celery_singleton_lock

        where = os.path.dirname(celery_singleton_lock.__file__)
        if "site-packages" not in where.split(os.sep):
            raise pytest.UsageError(f"celery_singleton_lock was imported from {where}, not the installed wheel")


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """Mark the tiers, so ``-m "not integration or everyday"`` (``scripts/test.sh --fast``) picks the everyday one.

    Every test that starts a real server or worker is ``integration``; of those, the ones marked
    ``everyday`` (one real worker per control) also run in the everyday tier.
    """
    integration = pytest.mark.integration
    for item in items:
        path = Path(str(item.fspath))
        if _HERE / "integration" in path.parents or (path.parent == _HERE and path.name in _SLOW_TOP_LEVEL):
            item.add_marker(integration)
