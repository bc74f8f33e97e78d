"""The locks page in a Django project (tests/django_project, ``proj.settings_web``), served by a real
``manage.py runserver``: staff only, release only with ``celery_singleton_lock.release_lock`` (or as a
superuser), CSRF by Django's middleware, linked from the admin index.

Given a live lock held in the project's lock store, when users log in through the admin, then an
anonymous user or one who is not staff is sent to the admin login, a staff user without the permission
sees the page and the locks but gets 403 on a release (nothing changed), one with it (or a superuser)
releases with the rules of ``celery locks clear``, and a POST without Django's CSRF token is refused.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Iterator

import pytest
import redis

from celery_singleton_lock.store import Holder, RedisBackend
from tests.integration.helpers import lock_field
from tests.support.django_web import Client, DjangoSite
from tests.support.suite_redis import lock_prefix


@pytest.fixture(scope="module")
def site(test_env, suite_servers, tmp_path_factory) -> Iterator[DjangoSite]:
    site = DjangoSite(test_env, str(tmp_path_factory.mktemp("django-web") / "db.sqlite3"))
    try:
        yield site.start()
    finally:
        site.stop()


@pytest.fixture
def held(test_env, suite_servers) -> Iterator[str]:
    """A live lock of the project's sync_order, held by this process (renewal judged by its heartbeat)."""
    suite_servers.clean()
    client = redis.Redis.from_url(test_env["CSL_LOCK_URL"], decode_responses=True)
    key = f"{lock_prefix()}:{{shop.tasks.sync_order:0}}:0123456789abcdef0123456789abcdef"
    RedisBackend(client).acquire(key, "tok-django", 120_000,
                                 Holder("holder-id", socket.gethostname(), os.getpid(), int(time.time() * 1000), 60_000))
    yield key
    client.delete(key)
    client.close()


def _token(test_env, key):
    return lock_field(redis.Redis.from_url(test_env["CSL_LOCK_URL"], decode_responses=True), key, "token")


def test_an_anonymous_user_goes_to_the_admin_login(site):
    for path in ("locks/", "locks/api/locks", "locks/lock?key=x"):
        status, headers, _ = Client(site).request(path)
        assert status == 302 and headers["Location"].startswith("/admin/login/?next=/locks/"), (path, status)


def test_a_staff_user_without_the_permission_sees_the_locks_but_cannot_release(site, held, test_env):
    client = Client(site).login("anna")
    status, headers, page = client.request("locks/")
    assert status == 200 and 'data-release="0"' in page and "script-src 'self'" in headers["Content-Security-Policy"]
    status, _, body = client.request("locks/api/locks")
    assert status == 200 and [r["key"] for r in json.loads(body)] == [held]
    assert client.release(held, force=True)[0] == 403
    assert _token(test_env, held) == "tok-django"  # nothing changed


@pytest.mark.parametrize("user", ["rita", "sam"])  # the permission, or a superuser
def test_a_user_with_the_permission_releases_with_clears_rules(site, held, test_env, user):
    client = Client(site).login(user)
    assert 'data-release="1"' in client.request("locks/")[2]
    assert client.release(held, csrf=False)[0] == 403  # Django's CSRF middleware
    status, body = client.release(held)
    assert status == 409 and json.loads(body)["needs_force"]  # a live holder needs the forced form
    assert _token(test_env, held) == "tok-django"
    status, body = client.release(held, force=True)
    assert status == 200 and json.loads(body)["cleared"], body
    assert _token(test_env, held) is None
    assert f"{user} (Django) asked to release {held}" in site.log()


def test_the_admin_index_links_to_the_locks_page(site):
    client = Client(site).login("anna")
    status, _, index = client.request("admin/")
    assert status == 200 and "/admin/celery_singleton_lock/lock/" in index
    status, headers, _ = client.request("admin/celery_singleton_lock/lock/")
    assert status == 302 and headers["Location"] == "/locks/"
