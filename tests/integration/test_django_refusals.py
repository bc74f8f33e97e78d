"""Refused settings and task options in the Django project (tests/django_project), as a team meets them.

Given the project's settings with lock settings wrong (``proj.settings_wrong``), or with the ``clash``
app installed (two tasks sharing ``lock_name="account"`` but not its ``lock_limit``, and one whose
``lock_heartbeat`` is a picosecond):

- a web-like process that skipped ``manage.py check`` gets the same ``ConfigurationError`` at every
  call of every refused task, never Celery's ``NotRegistered``, and Django's debug page renders each;
- ``manage.py check`` reports every wrong setting at once, each under its own check id, warns on a
  setting written without the ``CELERY_`` namespace, and reports the refused tasks' options;
- a worker or beat refusing a setting or a task option ends with one line naming it as written
  (no traceback) and exit status 65, the lock store's refusal keeping 78.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Dict

import pytest
import redis

from celery_singleton_lock.config.refused import EXIT_SETTINGS
from tests.integration.test_django import SCHEDULER, _manage, django_env  # noqa: F401 - the project's fixture
from tests.support.workers import Beat, Worker

WRONG = "proj.settings_wrong"


def _published_and_locked(env: Dict[str, str]) -> tuple:
    """Messages waiting in the broker's default queue, and the lock store's keys under the run's prefix."""
    broker = redis.Redis.from_url(env["CSL_BROKER_URL"])
    store = redis.Redis.from_url(env["CSL_LOCK_URL"])
    try:
        return (broker.llen(env.get("CSL_BROKER_PREFIX", "") + "celery"),
                sorted(store.scan_iter(match=env["CSL_TEST_PREFIX"] + "*", count=500)))
    finally:
        broker.close()
        store.close()


def _wrong(env: Dict[str, str], settings: Dict[str, object], clash: bool = False) -> Dict[str, str]:
    wrong = dict(env, CSL_WRONG_SETTINGS=json.dumps(settings))
    if clash:
        wrong["CSL_CLASH"] = "1"
    return wrong


@pytest.mark.parametrize("settings, clash, tasks, message", [
    ({"CELERY_SINGLETON_LOCK_URL": "redis:///0"}, False, ["shop.tasks.sync_order", "shop.tasks.nightly_report"],
     "CELERY_SINGLETON_LOCK_URL 'redis:///0' names no host"),
    ({"CELERY_SINGLETON_LOCK_DESCRIBE": "yes"}, False, ["shop.tasks.sync_order", "shop.tasks.nightly_report"],
     "CELERY_SINGLETON_LOCK_DESCRIBE must be True or False, not 'yes'"),
    ({}, True, ["clash.tasks.delete_account", "clash.tasks.sync_account"],
     "share lock_name='account' but disagree on lock_limit"),
], ids=["url", "describe", "lock_name"])
def test_every_call_of_a_refused_task_raises_the_same_refusal_and_the_debug_page_renders(
        django_env, settings, clash, tasks, message):
    env = dict(_wrong(django_env, settings, clash), DJANGO_SETTINGS_MODULE=WRONG)
    before = _published_and_locked(django_env)
    calls = json.loads(_manage(env, "refusal", *tasks).stdout.strip().splitlines()[-1])
    assert _published_and_locked(django_env) == before  # nothing published, no lock taken

    assert len(calls) == 3 * len(tasks)
    assert {call["error"] for call in calls} == {"ConfigurationError"}, calls
    # The first call finalizes the app and meets the first refusal there (of whichever task Celery built
    # first: the clash app refuses two); every call after it raises its own task's, the same every time.
    later = {call["message"] for call in calls[1:]}
    assert len(later) == 1 and message in later.pop(), calls
    assert all(call["page"] == {"status": 500, "names_error": True} for call in calls), calls


def test_manage_py_check_reports_every_wrong_setting_and_task_option_at_once(django_env):
    env = _wrong(django_env, {"CELERY_SINGLETON_LOCK_TLL": 5, "CELERY_SINGLETON_LOCK_URL": "redis:///0",
                              "CELERY_SINGLETON_LOCK_DESCRIBE": "yes", "CELERY_SINGLETON_LOCK_ON_LOCKED": "skipp",
                              "CELERY_SINGLETON_LOCK_GUARD_OLD_KEYS": "False",
                              "CELERY_SINGLETON_LOCK_METRICS_PORT": "nine", "SINGLETON_LOCK_TTL": 5}, clash=True)
    done = _manage(env, "check", f"--settings={WRONG}", check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    found = dict(re.findall(r"\(celery_singleton_lock\.([EW]\d{3})\) (.*)", done.stderr))
    assert found.keys() == {"E001", "E002", "E006", "E008", "E009", "E013", "E030", "E031", "W001"}, done.stderr
    assert found["E001"].startswith("unknown setting CELERY_SINGLETON_LOCK_TLL: did you mean "
                                    "CELERY_SINGLETON_LOCK_TTL?")
    assert found["E002"].startswith("CELERY_SINGLETON_LOCK_URL 'redis:///0' names no host")
    assert found["E006"].startswith("CELERY_SINGLETON_LOCK_METRICS_PORT must be a port number")
    assert found["E008"] == "CELERY_SINGLETON_LOCK_DESCRIBE must be True or False, not 'yes'"
    assert found["E009"] == "CELERY_SINGLETON_LOCK_GUARD_OLD_KEYS must be True or False, not 'False'"
    assert "CELERY_SINGLETON_LOCK_ON_LOCKED = 'skipp' is wrong" in found["E013"]
    assert "clash.tasks.busy_heartbeat" in found["E030"] and "lock_heartbeat=1e-12 is below" in found["E030"]
    assert ("'clash.tasks.delete_account'" in found["E031"] and "'clash.tasks.sync_account'" in found["E031"]
            and "lock_limit" in found["E031"])
    assert found["W001"].startswith("SINGLETON_LOCK_TTL is not read") and "CELERY_SINGLETON_LOCK_TTL" in found["W001"]
    assert "singleton_lock_" not in done.stderr.replace("celery_singleton_lock", ""), done.stderr


def test_a_setting_without_the_namespace_is_only_a_warning(django_env):
    done = _manage(_wrong(django_env, {"SINGLETON_LOCK_TTL": 5}), "check", f"--settings={WRONG}")
    assert "(celery_singleton_lock.W001) SINGLETON_LOCK_TTL is not read" in done.stderr, done.stderr


@pytest.mark.parametrize("settings, clash, message", [
    ({"CELERY_SINGLETON_LOCK_DESCRIBE": "yes"}, False, "CELERY_SINGLETON_LOCK_DESCRIBE must be True or False"),
    ({"CELERY_SINGLETON_LOCK_URL": "redis:///0"}, False, "CELERY_SINGLETON_LOCK_URL 'redis:///0' names no host"),
    # the first refusal met ends it: of the tasks sharing a lock, or of the one with a picosecond heartbeat
    ({}, True, "share lock_name='account' but disagree on lock_limit|lock_heartbeat=1e-12 is below the 1 ms"),
], ids=["describe", "url", "task_options"])
@pytest.mark.parametrize("program", [Worker, Beat], ids=["worker", "beat"])
def test_a_worker_or_beat_refusing_ends_with_one_line_and_its_own_exit_status(django_env, program, settings, clash,
                                                                              message):
    env = dict(_wrong(django_env, settings, clash), DJANGO_SETTINGS_MODULE=WRONG)
    extra = ["-S", SCHEDULER] if program is Beat else []
    process = program("proj", env, name=f"django-refuse-{uuid.uuid4().hex[:6]}", concurrency=1, extra_args=extra)
    with pytest.raises(RuntimeError, match="exited with"):
        process.start()
    process.stop()
    log = process.log()
    assert process.process is not None and process.process.returncode == EXIT_SETTINGS == 65, log
    assert "Traceback" not in log, log
    refusals = [line for line in log.splitlines() if re.search(message, line)]
    assert len(refusals) == 1 and "refusing to start" in refusals[0], log
