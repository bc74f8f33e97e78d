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
_SLOW_TOP_LEVEL = {"test_bench_smoke.py", "test_bench_web.py", "test_compose.py", "test_django_docs.py", "test_docs_examples.py",
                   "test_docs_site.py", "test_flake_finder.py",
                   "test_packaging.py", "test_typing.py"}

#: The everyday tier's real-worker tests (``scripts/test.sh --fast``): one per control, as
#: ``file::function`` under ``tests/integration`` (every parameter of a listed function runs).
#: ``tests/unit/test_everyday_tier.py`` checks that each still names a test.
EVERYDAY = (
    "test_run_lock.py::test_duplicate_storm_never_overlaps",
    "test_run_lock.py::test_released_at_once_after_an_exception",
    "test_run_lock.py::test_on_locked_retry_runs_after_the_holder",
    "test_run_lock.py::test_on_locked_wait_runs_right_after_release",
    "test_run_lock.py::test_on_locked_raise_fails_with_locked_error",
    "test_enqueue_lock.py::test_five_calls_publish_one_message_until_it_has_run",
    "test_enqueue_lock.py::test_queued_scope_keeps_one_running_and_one_waiting",
    "test_enqueue_lock.py::test_beat_job_never_runs_twice_at_once_with_queued",
    "test_limits.py::test_a_storm_over_10_keys_never_runs_more_than_3_of_a_key_and_reaches_3",
    "test_limits.py::test_a_window_of_2s_never_starts_more_than_5_of_a_key_and_starts_5_in_some",
    "test_latest_wins.py::test_a_burst_of_100_debounced_calls_runs_once_with_the_last_arguments",
    "test_latest_wins.py::test_replace_runs_the_newest_of_20_waiting_calls_after_the_running_one",
    "test_shared.py::test_two_tasks_sharing_a_lock_name_never_overlap_per_key_and_do_across_keys",
    "test_shared.py::test_a_shared_lock_of_2_in_three_plain_tasks_is_reached_and_never_exceeded",
    "test_signals.py::test_connected_receivers_hear_acquire_conflict_and_a_prompt_release",
    "test_duplicate_outcome.py::test_a_skipped_duplicate_names_lock_holder_and_policy_in_the_backend_and_in_flower",
    "test_cli.py::test_list_json_shows_the_lock_of_a_running_task",
)

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
    everyday = set(EVERYDAY)
    for item in items:
        path = Path(str(item.fspath))
        if _HERE / "integration" in path.parents:
            item.add_marker(pytest.mark.integration)
            if f"{path.name}::{item.originalname}" in everyday:
                item.add_marker(pytest.mark.everyday)
        elif path.parent == _HERE and path.name in _SLOW_TOP_LEVEL:
            item.add_marker(pytest.mark.integration)
