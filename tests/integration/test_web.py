"""``celery locks web`` against a real Redis and real prefork workers.

Given a task holding its lock in a real worker, when the web view is served (a real ``celery -A proj
locks web`` process), then ``GET /api/locks`` is ``celery locks list --json`` (the same fields and
names), a release is refused with 403 and nothing changed unless ``--allow-release``, with it a live
holder needs the forced form and learns its loss (``singleton lock LOST``), a line in the log names
who released what, the next call then runs; the store's password is nowhere, a store that goes away
is said and the page recovers; a token, when set, is asked of every request.
"""

from __future__ import annotations

import json
import re
import urllib.parse

import pytest

from tests.integration.helpers import lock_field, wait_started
from tests.integration.test_cli import listed
from tests.support.servers import RedisServer
from tests.support.waits import wait_for
from tests.support.web import WebServer, http

#: What changes from one read to the next of a held lock.
MOVING = {"age_ms", "pttl_ms", "since_renewal_ms", "reason"}
PASSWORD = "web-view-pw-5e2c"


@pytest.fixture
def holding(proj, start_worker, events_redis):
    """A quick_ttl execution holding its lock in a real prefork worker (renewed every second)."""
    worker = start_worker(concurrency=2)
    result = proj.quick_ttl.delay("held", duration=30)
    wait_started(events_redis, 1)
    yield worker, result
    result.revoke(terminate=True)


def _api(web: WebServer, path: str = "api/locks"):
    status, _, body = http(web.url + path)
    return status, json.loads(body)


def _held(web: WebServer):
    return wait_for(lambda: (lambda answer: answer[1] if answer[0] == 200 and answer[1] else None)(_api(web)),
                    10, what="a lock in /api/locks")


def _csrf(web: WebServer) -> str:
    return re.search(r'data-csrf="([^"]+)"', http(web.url)[2]).group(1)


def test_api_locks_is_locks_list_json(holding, test_env):
    with WebServer("tests.integration.proj", test_env) as web:
        (served,) = _held(web)
        (printed,) = listed()
        assert list(served) == list(printed)  # the same names, in the same order
        assert {k: v for k, v in served.items() if k not in MOVING} == {
            k: v for k, v in printed.items() if k not in MOVING}
        assert "token" not in served
        status, lock = _api(web, "api/lock?key=" + urllib.parse.quote(served["key"]))
        assert status == 200 and lock["key"] == served["key"] and len(lock["places"]) == 1 and "fence" in lock
        assert _api(web, "api/lock?key=nope")[0] == 404


def test_a_release_is_refused_and_nothing_changes_unless_allowed(holding, test_env, lock_redis):
    with WebServer("tests.integration.proj", test_env) as web:
        (served,) = _held(web)
        token = lock_field(lock_redis, served["key"], "token")
        for force in ("0", "1"):
            status, _, body = http(web.url + "api/release", {"key": served["key"], "force": force,
                                                             "csrf_token": _csrf(web)}, form=True)
            assert status == 403 and "releasing is off" in body
        assert 'data-release="0"' in http(web.url)[2]
        assert lock_field(lock_redis, served["key"], "token") == token


def test_an_allowed_release_has_clears_rules_and_is_logged(holding, proj, test_env, lock_redis):
    worker, _ = holding
    with WebServer("tests.integration.proj", test_env, ["--allow-release"]) as web:
        (served,) = _held(web)
        key, token = served["key"], lock_field(lock_redis, served["key"], "token")
        status, _, body = http(web.url + "api/release", {"key": key})
        assert status == 403 and "CSRF" in body  # no token, no release
        status, _, body = http(web.url + "api/release", {"key": key}, headers={"X-CSRFToken": _csrf(web)})
        answer = json.loads(body)
        assert status == 409 and answer["needs_force"] and "refused" in answer["messages"][0], body
        assert lock_field(lock_redis, key, "token") == token  # a live holder is not taken without force

        status, _, body = http(web.url + "api/release", {"key": key, "force": "1", "csrf_token": _csrf(web)},
                               form=True)
        assert status == 200 and json.loads(body)["cleared"], body
        assert lock_field(lock_redis, key, "token") != token
        wait_for(lambda: "asked to release" in web.log() and "127.0.0.1" in web.log(), 10, what="the release's log line")
        wait_for(lambda: "singleton lock LOST" in worker.log(), 10, what="the holder to learn it lost its lock")
        assert proj.quick_ttl.delay("held", duration=0.1).get(timeout=20)["key"] == "held"  # the next call runs


def test_a_hostile_argument_is_data_not_markup(proj, start_worker, events_redis, test_env):
    hostile = "<img src=x onerror=pwn()><script>"  # a description keeps the first characters of a call
    start_worker(app="tests.integration.proj_describe")
    result = proj.sync.delay(hostile, duration=12.0)
    wait_started(events_redis, 1)
    with WebServer("tests.integration.proj_describe", test_env) as web:
        (served,) = _held(web)
        assert hostile in served["describe"]  # the JSON carries it as a string...
        status, headers, page = http(web.url)
        assert "onerror" not in page and "pwn" not in page  # ...the page holds no data, only the scripts
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        _, headers, _ = http(web.url + "api/locks")
        assert headers["Content-Type"] == "application/json" and headers["X-Content-Type-Options"] == "nosniff"
    result.revoke(terminate=True)


def test_the_password_is_nowhere_and_a_store_away_is_said_then_recovered(proj, test_env):
    store = RedisServer(extra_args=["--requirepass", PASSWORD])
    store.start(probe_url=f"redis://:{PASSWORD}@127.0.0.1:{store.port}/0")
    env = dict(test_env, CSL_LOCK_URL=f"redis://:{PASSWORD}@127.0.0.1:{store.port}/0")
    try:
        with WebServer("tests.integration.proj", env) as web:
            assert _api(web) == (200, [])
            store.stop()
            status, away = _api(web)
            assert status == 503 and f"127.0.0.1:{store.port}" in away["error"] and PASSWORD not in away["error"]
            assert PASSWORD not in http(web.url)[2] + http(web.url + "lock?key=x")[2]
            store.start(probe_url=f"redis://:{PASSWORD}@127.0.0.1:{store.port}/0")
            wait_for(lambda: _api(web) == (200, []), 10, what="the page to read the store again")
            assert PASSWORD not in web.log()
    finally:
        store.stop()


def test_a_token_is_asked_of_every_request(proj, test_env):
    with WebServer("tests.integration.proj", dict(test_env, CELERY_SINGLETON_LOCK_WEB_TOKEN="t0k-en")) as web:
        assert http(web.url + "api/locks")[0] == 401
        assert http(web.url)[0] == 401
        assert http(web.url + "api/locks", headers={"Authorization": "Bearer t0k-en"})[:1] == (200,)
    with WebServer("tests.integration.proj", test_env, ["--token", "other"]) as web:
        assert http(web.url + "api/locks", headers={"Authorization": "Bearer t0k-en"})[0] == 401
        assert http(web.url + "api/locks", headers={"Authorization": "Bearer other"})[0] == 200


def test_a_wrong_bind_is_named_before_serving(proj, test_env):
    from tests.integration.test_cli import run_cli

    done = run_cli("web", "--bind", "localhost:http")
    assert done.returncode == 2 and "is no HOST:PORT" in done.stderr


def test_a_copy_waiting_for_the_release_is_shown(proj, start_worker, events_redis, test_env):
    from tests.integration import proj_waits

    start_worker(app="tests.integration.proj_waits", concurrency=2)
    holder = proj_waits.wait_raise.delay("w", duration=8.0)
    wait_started(events_redis, 1)
    waiter = proj_waits.wait_raise.delay("w", duration=0.1)  # waits in the other pool process
    with WebServer("tests.integration.proj_waits", test_env) as web:
        wait_for(lambda: (lambda answer: answer[1] and answer[1][0]["waiting"])(_api(web)), 15,
                 what="the holder's lock to say a copy waits")
        (printed,) = listed()
        assert printed["waiting"] is True  # the same field in locks list --json
    assert holder.get(timeout=30)["key"] == "w" and waiter.get(timeout=30)["key"] == "w"
