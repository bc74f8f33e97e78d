"""Checks for every run. Fixtures live beside the tests that use them: the Redis and worker ones in
``tests/integration/conftest.py``, so the unit tests load neither."""

from __future__ import annotations

import os

import pytest

#: The Django project the integration tests drive: its tests run under ``manage.py test`` (with
#: Django set up), never collected by this pytest run.
collect_ignore = ["django_project"]


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("CSL_EXPECT_INSTALLED"):  # a cell of the support matrix tests the built wheel
        import celery_singleton_lock

        where = os.path.dirname(celery_singleton_lock.__file__)
        if "site-packages" not in where.split(os.sep):
            raise pytest.UsageError(f"celery_singleton_lock was imported from {where}, not the installed wheel")
