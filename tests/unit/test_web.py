"""The web view's pieces that need no store: the bind address, the token and CSRF guard, the page
files filled with escaped values, request bodies, and the routes a refused request never passes."""

from __future__ import annotations

import io
import json

import pytest

from celery_singleton_lock.web import pages
from celery_singleton_lock.web.app import WebApp, read_post
from celery_singleton_lock.web.guard import COOKIE, TOKEN_ENV, Guard
from celery_singleton_lock.web.serve import is_loopback, parse_bind


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:8040", ("127.0.0.1", 8040)), ("8041", ("127.0.0.1", 8041)), ("0.0.0.0:80", ("0.0.0.0", 80)),
    ("[::1]:8040", ("::1", 8040)), ("localhost:0", ("localhost", 0)),
])
def test_a_bind_is_host_and_port_or_a_bare_port(text, expected):
    assert parse_bind(text) == expected


@pytest.mark.parametrize("text", ["", "host:", ":80", "127.0.0.1:http", "99999", "[::1]"])
def test_a_wrong_bind_is_named(text):
    with pytest.raises(ValueError, match="is no HOST:PORT"):
        parse_bind(text)


def test_loopback_is_told_apart():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3") and not is_loopback("example.com")


def test_the_token_comes_from_the_option_or_the_environment(monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, "from-env")
    assert Guard.from_environment(None).token == "from-env"
    assert Guard.from_environment("given").token == "given"
    monkeypatch.delenv(TOKEN_ENV)
    assert Guard.from_environment(None).token is None
    with pytest.raises(ValueError, match="token is empty"):
        Guard(" ")


def test_a_token_is_asked_as_a_header_a_cookie_or_once_in_the_address():
    guard = Guard("s3cret")
    assert not guard.admits({}, None)
    assert guard.admits({"HTTP_AUTHORIZATION": "Bearer s3cret"}, None)
    assert not guard.admits({"HTTP_AUTHORIZATION": "Bearer wrong"}, None)
    assert guard.admits({}, "s3cret")
    kept = guard.cookie().split(";")[0]
    assert kept.startswith(f"{COOKIE}=") and "s3cret" not in kept and "HttpOnly" in guard.cookie()
    assert guard.admits({"HTTP_COOKIE": kept}, None)
    assert not guard.admits({"HTTP_COOKIE": f"{COOKIE}=s3cret"}, None)
    assert Guard(None).admits({}, None)


def test_csrf_tokens_differ_per_app_and_are_checked():
    one, two = Guard(None), Guard(None)
    assert one.csrf != two.csrf
    assert one.csrf_ok(one.csrf) and not one.csrf_ok(two.csrf) and not one.csrf_ok(None)


def test_the_page_escapes_what_it_is_filled_with():
    html = pages.page("index", csrf='x"><script>alert(1)</script>', allow_release=True,
                      back='javascript:"><img src=x onerror=alert(1)>', back_label="<b>admin</b>")
    assert "<script>alert(1)" not in html and "<img" not in html and "<b>" not in html
    assert 'data-release="1"' in html and "&lt;script&gt;" in html


@pytest.mark.parametrize("name", ["../app.py", "..\\app.py", ".hidden.js", "locks.py", "nope.js", "sub/locks.js"])
def test_only_the_pages_own_static_files_are_served(name):
    assert pages.static(name) is None
    assert pages.static("locks.js") is not None


def test_a_post_body_is_a_form_or_json():
    assert read_post("application/x-www-form-urlencoded", b"key=a%3Ab&force=1") == {"key": "a:b", "force": "1"}
    assert read_post("application/json; charset=utf-8", b'{"key": "k", "force": true}') == {"key": "k", "force": "true"}
    with pytest.raises(ValueError):
        read_post("application/json", b"[1]")


def _call(app, method, path, body=b"", headers=None, query=""):
    seen = {}
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query, "wsgi.input": io.BytesIO(body),
               "CONTENT_LENGTH": str(len(body)), "CONTENT_TYPE": "application/json", **(headers or {})}
    out = b"".join(app(environ, lambda status, hdrs: seen.update(status=status, headers=dict(hdrs))))
    return seen["status"], seen["headers"], out


def test_a_release_is_refused_before_the_store_is_asked_when_it_is_off():
    app = WebApp(object(), allow_release=False)  # no Celery app: a refusal never reaches it
    status, _, body = _call(app, "POST", "/api/release", json.dumps({"key": "k", "csrf_token": app.guard.csrf}).encode())
    assert status.startswith("403") and b"releasing is off" in body


def test_a_release_without_the_csrf_token_is_refused_before_the_store_is_asked():
    app = WebApp(object(), allow_release=True)
    status, _, body = _call(app, "POST", "/api/release", b'{"key": "k"}')
    assert status.startswith("403") and b"CSRF" in body


def test_without_the_token_nothing_is_served():
    app = WebApp(object(), token="s3cret")
    for path in ("/", "/api/locks", "/static/locks.js"):
        assert _call(app, "GET", path)[0].startswith("401")
    status, headers, _ = _call(app, "GET", "/", query="token=s3cret")
    assert status.startswith("303") and headers["Location"] == "/" and COOKIE in headers["Set-Cookie"]


def test_the_page_runs_only_its_own_scripts():
    status, headers, body = _call(WebApp(object()), "GET", "/")
    assert status.startswith("200") and "script-src 'self'" in headers["Content-Security-Policy"]
    assert b"<script>" not in body  # no inline script: data reaches the page as JSON only
    assert _call(WebApp(object()), "GET", "", )[1]["Location"] == "/"


def test_under_a_prefix_the_app_sends_the_browser_to_its_own_root():
    app = WebApp(object())
    status, headers, _ = _call(app, "GET", "", headers={"SCRIPT_NAME": "/locks"})
    assert status.startswith("303") and headers["Location"] == "/locks/"
    _, _, page = _call(app, "GET", "/", headers={"SCRIPT_NAME": "/locks"})
    assert b'href="static/locks.css"' in page and b'src="static/locks.js"' in page  # relative: under any prefix
