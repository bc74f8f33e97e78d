"""Operating the library in a Django project: tests/django_project with a real prefork worker.

- ``python manage.py singleton_locks list|show|clear`` is ``celery locks`` on the project's app,
  with its options and its safety: a live lock is cleared only with ``--force``, ``--stale``
  leaves it alone;
- the worker's ``/metrics`` lists every family of the library (help and type) from the first
  scrape, before any lock event, and counts once events come;
- the admin's ``TaskResult`` list (``results_admin.LockedTaskResultAdmin``, registered as
  docs/django.md says) shows a skipped duplicate's outcome in a column and filters by it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
import uuid
from typing import Dict, Iterator, List

import pytest
from prometheus_client.parser import text_string_to_metric_families

from celery_singleton_lock.metrics.instruments import METRIC_NAMES
from tests.integration.test_django import PROJECT, _manage, django_env, django_worker  # noqa: F401
from tests.support.servers import free_port
from tests.support.waits import wait_for
from tests.support.workers import Worker


def _locks(env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return _manage(env, "singleton_locks", *args, check=False)


def _listed(env: Dict[str, str]) -> List[dict]:
    done = _locks(env, "list", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _hold(env: Dict[str, str], seconds: float, queue: str = "celery") -> str:
    """Publish a ``sync_order`` that holds its order's lock for ``seconds``; its task id."""
    code = ("from shop.models import Order; from shop.tasks import sync_order; "
            "order = Order.objects.create(name='held'); "
            f"print(sync_order.apply_async((order.pk,), {{'duration': {seconds}}}, queue={queue!r}).id)")
    return _manage(env, "shell", "-c", code).stdout.strip().splitlines()[-1]


def test_manage_py_singleton_locks_lists_shows_and_clears_with_the_clis_safety(django_env, django_worker):  # noqa: F811
    holder = _hold(django_env, 25.0)
    held = wait_for(lambda: [r for r in _listed(django_env) if r.get("task_id") == holder], 30,
                    what="the holder's lock listed")[0]
    digest = held["digest"][:12]

    table = _locks(django_env, "list", "--task", "shop.tasks.sync_order")
    assert table.returncode == 0 and holder in table.stdout and "shop.tasks.sync_order" in table.stdout, table
    shown = _locks(django_env, "show", digest)
    assert shown.returncode == 0 and holder in shown.stdout, shown

    refused = _locks(django_env, "clear", digest)
    assert refused.returncode == 1 and "--force" in refused.stderr, refused
    stale = _locks(django_env, "clear", "--stale")
    assert stale.returncode == 0 and "cleared 0 stale lock(s)" in stale.stdout, stale
    assert [r["task_id"] for r in _listed(django_env)] == [holder]

    usage = _locks(django_env, "clear", digest, "--stale", "--force")
    assert usage.returncode == 2, usage

    forced = _locks(django_env, "clear", digest, "--force")
    assert forced.returncode == 0, forced
    assert _listed(django_env) == []
    assert "no locks held" in _locks(django_env, "list").stdout
    _manage(django_env, "shell", "-c", _END_HOLDER.format(holder=holder))


#: The holder's body still runs after its lock was cleared: end it, so the worker's processes are free.
_END_HOLDER = """
import time
from celery.result import AsyncResult
from proj.celery import app
app.control.revoke({holder!r}, terminate=True)
deadline = time.monotonic() + 30
while AsyncResult({holder!r}).state != "REVOKED" and time.monotonic() < deadline:
    time.sleep(0.1)
print(AsyncResult({holder!r}).state)
"""


def _scrape(port: int) -> Dict[str, List]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)
            if family.name.startswith("singleton_lock_")}


@pytest.fixture
def metrics_worker(django_env) -> Iterator[Worker]:  # noqa: F811
    port = free_port()
    env = dict(django_env, DJANGO_SETTINGS_MODULE="proj.settings_metrics", CSL_METRICS_PORT=str(port))
    name = f"django-metrics-{uuid.uuid4().hex[:6]}"
    worker = Worker("proj", env, name=name, pool="prefork", concurrency=2, extra_args=["-Q", name])
    worker.port, worker.queue = port, name  # its own queue: the module's other worker takes none of its tasks
    try:
        yield worker.start()
    finally:
        worker.stop()


def test_metrics_lists_every_family_before_the_first_lock_event(django_env, metrics_worker):  # noqa: F811
    first = _scrape(metrics_worker.port)

    families = {name: family.type for name, family in first.items()}
    expected = {(name[:-len("_total")] if name.endswith("_total") else name): kind for name, kind in METRIC_NAMES.items()}
    assert families == expected, (families, expected)
    assert all(not family.samples for family in first.values()), first

    env = dict(django_env, DJANGO_SETTINGS_MODULE="proj.settings_metrics", CSL_METRICS_PORT="0")
    holder = _hold(env, 0.0, queue=metrics_worker.queue)
    wait_for(lambda: any(sample.value >= 1 for sample in _scrape(metrics_worker.port)["singleton_lock_acquired"].samples),
             30, what=f"the lock of {holder} counted")


_ADMIN_PAGE = """
import json, re
from django.contrib.auth.models import User
from django.test import Client
user = User.objects.filter(username="ops").first() or User.objects.create_superuser("ops", "ops@example.com", "pw")
client = Client(HTTP_HOST="localhost")
client.force_login(user)
seen = {}
for value in ("", "duplicate", "ran", "skip", "raise"):
    page = client.get("/admin/django_celery_results/taskresult/", {"singleton_lock": value} if value else {})
    text = page.content.decode()
    seen[value or "all"] = {"status": page.status_code, "text": text}
print(json.dumps(seen))
"""


def test_the_admins_task_result_list_shows_and_filters_a_duplicates_outcome(django_env, django_worker):  # noqa: F811
    """django-celery-results' admin, registered as docs/django.md says (shop/admin.py), under the
    project's settings with the admin (proj/settings_web.py)."""
    _manage(django_env, "migrate", "-v0", "--settings=proj.settings_web")
    seen = json.loads(_manage(django_env, "scenario", "duplicate").stdout.strip().splitlines()[-1])
    holder, dup = seen["holder"], seen["dup"]
    assert seen["dup_meta"].get("singleton_lock_holder") == holder, seen  # the duplicate was turned away

    pages = json.loads(_manage(django_env, "shell", "--settings=proj.settings_web", "-c", _ADMIN_PAGE)
                       .stdout.strip().splitlines()[-1])

    assert all(page["status"] == 200 for page in pages.values()), {k: v["status"] for k, v in pages.items()}
    everything = pages["all"]["text"]
    assert "singleton lock" in everything  # the column and the filter's title
    assert f"duplicate (skip) of {holder}" in everything
    assert dup in pages["duplicate"]["text"] and holder not in pages["duplicate"]["text"].replace(
        f"duplicate (skip) of {holder}", "")
    assert holder in pages["ran"]["text"] and dup not in pages["ran"]["text"]
    assert dup in pages["skip"]["text"]
    assert dup not in pages["raise"]["text"]
