"""The library in a Django project, as Celery users run it: tests/django_project driven by real
processes (a prefork worker, two ``DatabaseScheduler`` beats, ``manage.py``).

Given the project's settings under Celery's ``CELERY`` namespace, django-celery-results
(``django-db``, ``result_extended``) and a SQLite file database:

- a skipped duplicate's ``get_task_meta`` and ``TaskResult`` row name its holder, and the holder's
  own name none; a superseded call's say so (``superseded()``);
- an order saved in a transaction is synced after the commit (``transaction.on_commit``);
- two beats publishing one ``PeriodicTask`` every 2 s with docs/beat.md's recipe
  (``lock_scope="queued_or_running"``, ``lock_window=0.9 * period``) run it once per tick;
- ``manage.py check`` refuses a misspelled or wrong ``CELERY_SINGLETON_LOCK_*`` setting, and a
  worker refuses to start on a misspelled one, naming it as written;
- the project's own tests pass on the test settings of docs/django.md (``MemoryBackend``, eager
  mode), and docs/testing.md's two lines work over the project's settings, although both name a
  lock URL;
- ``celery report`` and ``celery inspect conf`` show no password of ``CELERY_SINGLETON_LOCK_URL``.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import uuid
from typing import Dict, Iterator

import pytest

from tests.support.servers import RedisServer
from tests.support.waits import wait_for
from tests.support.workers import Beat, Worker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROJECT = os.path.join(ROOT, "tests", "django_project")
SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
PERIOD = 2.0  # shop.tasks.REPORT_EVERY
PASSWORD = "django-lock-pw-7d1a"


def _manage(env: Dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=PROJECT, env=dict(os.environ, **env),
                          capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"manage.py {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def _scenario(env: Dict[str, str], name: str) -> dict:
    return json.loads(_manage(env, "scenario", name).stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def django_env(test_env, suite_servers, tmp_path_factory) -> Dict[str, str]:
    """The project's environment: the suite's Redis, and a migrated SQLite file of its own."""
    suite_servers.clean()
    database = str(tmp_path_factory.mktemp("django") / "db.sqlite3")
    env = dict(test_env, CSL_DJANGO_DB=database, BROKER_REDIS_URL=test_env["CSL_BROKER_URL"],
               LOCK_REDIS_URL=test_env["CSL_LOCK_URL"],
               PYTHONPATH=os.pathsep.join(filter(None, [PROJECT, ROOT, os.environ.get("PYTHONPATH")])))
    _manage(env, "migrate", "-v0")
    with sqlite3.connect(database) as db:  # several processes write: readers never block the writer
        db.execute("PRAGMA journal_mode=WAL")
    return env


@pytest.fixture(scope="module")
def django_worker(django_env) -> Iterator[Worker]:
    worker = Worker("proj", django_env, name=f"django-{uuid.uuid4().hex[:6]}", pool="prefork", concurrency=2)
    try:
        yield worker.start()
    finally:
        worker.stop()


def test_a_skipped_duplicate_names_its_holder_in_django_celery_results(django_env, django_worker):
    seen = _scenario(django_env, "duplicate")

    assert (seen["dup_result"], seen["holder_result"]) == (None, "duplicate")
    assert seen["dup_meta"]["status"] == "SUCCESS"
    assert seen["dup_meta"]["singleton_lock_holder"] == seen["holder"]
    assert seen["dup_meta"]["singleton_lock_policy"] == "skip"
    assert seen["dup_meta"]["singleton_lock_key"]
    assert "singleton_lock_holder" not in seen["holder_meta"]
    row = seen["dup_row"]["meta"]
    assert (row["singleton_lock_holder"], row["singleton_lock_policy"]) == (seen["holder"], "skip")
    assert row["singleton_lock_key"] == seen["dup_meta"]["singleton_lock_key"]
    assert not any(name.startswith("singleton_lock_") for name in seen["holder_row"]["meta"])


def test_a_superseded_call_says_so_in_django_celery_results_and_still_answers_none(django_env, django_worker):
    seen = _scenario(django_env, "superseded_call")

    assert seen["results"] == {"first": 1, "waiting": None, "newest": 3}
    assert seen["superseded"] == {"first": False, "waiting": True, "newest": False}
    assert seen["waiting_meta"]["singleton_lock_superseded_by"] == seen["newest"]
    assert seen["waiting_row"]["meta"]["singleton_lock_superseded_by"] == seen["newest"]


def test_an_order_is_synced_after_its_transaction_commits(django_env, django_worker):
    assert _scenario(django_env, "on_commit") == {"synced": True}


def test_two_database_scheduler_beats_run_a_job_once_per_tick(django_env, django_worker):
    _scenario(django_env, "beat_schedule")
    beats = [Beat("proj", django_env, name=f"django-beat{i}", extra_args=["-S", SCHEDULER]) for i in range(2)]
    try:
        for beat in beats:
            beat.start()
        wait_for(lambda: len(_scenario(django_env, "report_runs")["runs"]) >= 4, 30, interval=0.5,
                 what="four report runs")
    finally:
        for beat in beats:
            beat.stop()
    runs = _scenario(django_env, "report_runs")["runs"]
    published = [len(re.findall(r"Sending due task nightly report", beat.log())) for beat in beats]
    assert all(published), f"each beat published: {published}"
    # one run per tick: runs are at least the window apart (less the run's own start jitter)
    gaps = [later - earlier for earlier, later in zip(runs, runs[1:])]
    assert min(gaps) > 0.9 * PERIOD - 0.5, (gaps, published)
    assert sum(published) > len(runs), (published, len(runs))
    print(f"two beats: {sum(published)} publishes, {len(runs)} runs, gaps {[round(g, 2) for g in gaps]}")


@pytest.mark.parametrize("name, value, check_id, message", [
    ("CELERY_SINGLETON_LOCK_TLL", 5, "E001", "unknown setting CELERY_SINGLETON_LOCK_TLL: did you mean "
                                             "CELERY_SINGLETON_LOCK_TTL?"),
    ("CELERY_SINGLETON_LOCK_ON_LOCKED", "skipp", "E013", "CELERY_SINGLETON_LOCK_ON_LOCKED = 'skipp' is wrong"),
    ("CELERY_SINGLETON_LOCK_URL", "redis:///0", "E002", "names no host"),
])
def test_manage_py_check_refuses_a_wrong_lock_setting(django_env, name, value, check_id, message):
    env = dict(django_env, CSL_WRONG_SETTING=name, CSL_WRONG_VALUE=json.dumps(value))
    done = _manage(env, "check", "--settings=proj.settings_wrong", check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"(celery_singleton_lock.{check_id}) " in done.stderr and message in done.stderr, done.stderr
    assert "no issues" in _manage(django_env, "check").stdout


def test_a_worker_refuses_to_start_on_a_misspelled_namespaced_setting(django_env):
    env = dict(django_env, DJANGO_SETTINGS_MODULE="proj.settings_wrong", CSL_WRONG_SETTING="CELERY_SINGLETON_LOCK_TLL",
               CSL_WRONG_VALUE="5")
    worker = Worker("proj", env, name=f"django-wrong-{uuid.uuid4().hex[:6]}", pool="prefork", concurrency=1)
    with pytest.raises(RuntimeError, match="exited with"):
        worker.start()
    worker.stop()
    assert "unknown setting CELERY_SINGLETON_LOCK_TLL: did you mean CELERY_SINGLETON_LOCK_TTL?" in worker.log()


def test_the_projects_tests_pass_on_the_documented_test_settings(django_env):
    done = _manage(django_env, "test", "shop", "--settings=proj.settings_test", check=False)
    assert done.returncode == 0 and "OK" in done.stderr and "Ran 3 tests" in done.stderr, done.stderr


def test_the_readme_faq_lines_work_over_the_projects_settings_with_a_lock_url(django_env):
    done = _manage(django_env, "test", "shop.test_faq", check=False)
    assert done.returncode == 0 and "OK" in done.stderr and "Ran 1 test" in done.stderr, done.stderr


@pytest.fixture
def guarded_store() -> Iterator[RedisServer]:
    server = RedisServer(extra_args=["--requirepass", PASSWORD])
    server.start(probe_url=f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0")
    yield server
    server.stop()


def test_celery_report_and_inspect_conf_mask_the_namespaced_lock_password(django_env, guarded_store):
    env = dict(django_env, LOCK_REDIS_URL=f"redis://:{PASSWORD}@127.0.0.1:{guarded_store.port}/0",
               CSL_LOCK_TRANSPORT_OPTIONS=json.dumps({"ssl_password": PASSWORD}))
    worker = Worker("proj", env, name=f"django-pw-{uuid.uuid4().hex[:6]}", pool="prefork", concurrency=1)
    try:
        worker.start()
        full = dict(os.environ, **env)
        conf = subprocess.run([sys.executable, "-m", "celery", "-A", "proj", "inspect", "conf", "--json",
                               "--timeout", "10", "-d", f"{worker.name}@{os.uname()[1]}"],
                              cwd=PROJECT, env=full, capture_output=True, text=True, timeout=60)
    finally:
        worker.stop()
    report = subprocess.run([sys.executable, "-m", "celery", "-A", "proj", "report"], cwd=PROJECT, env=full,
                            capture_output=True, text=True, timeout=60)
    for done in (conf, report):
        assert done.returncode == 0, done.stderr
        assert PASSWORD not in done.stdout, done.stdout
        assert f"127.0.0.1:{guarded_store.port}" in done.stdout, done.stdout
    assert "CELERY_SINGLETON_LOCK_URL" in conf.stdout + report.stdout
