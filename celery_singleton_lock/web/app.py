"""``wsgi_app(app)``: the operator's page for any WSGI host (``celery locks web``, gunicorn, a Flask or a
FastAPI mount).

Routes, relative to where the app is mounted::

    GET  /                 the page: every lock, grouped by lock name, refreshed every second
    GET  /lock?key=KEY     one lock's page: its places and fence
    GET  /api/locks        ``celery locks list --json`` (``?task=NAME`` as ``--task``)
    GET  /api/lock?key=KEY one lock's places and the last fence of its bucket
    POST /api/release      ``key`` (and ``force``), with the page's CSRF token; 403 unless allow_release
    GET  /static/NAME      the page's scripts and style

A lock store that does not answer is a 503 with one line saying so (the page shows it and keeps asking).
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple
from urllib.parse import parse_qs

from . import pages
from .guard import Guard
from .locks import Answer, LockView

__all__ = ["wsgi_app", "WebApp", "read_post"]

StartResponse = Callable[..., Any]
Headers = List[Tuple[str, str]]

#: The largest request body read (a key and a token fit many times over).
MAX_BODY = 64 * 1024


def _json(answer: Answer) -> Tuple[str, Headers, bytes]:
    body = json.dumps(answer.body, separators=(",", ":")).encode()  # compact: the C encoder, not indent's Python one
    return _status(answer.status), [("Content-Type", "application/json"), ("Cache-Control", "no-store"),
                                    ("X-Content-Type-Options", "nosniff")], body


def _status(code: int) -> str:
    return f"{code} {HTTPStatus(code).phrase}"


def read_post(content_type: str, body: bytes) -> Dict[str, str]:
    """The fields of a form or JSON body (the last value of a repeated form field)."""
    if content_type.split(";")[0].strip().lower() == "application/json":
        data = json.loads(body.decode("utf-8") or "{}")
        if not isinstance(data, dict):
            raise ValueError("the JSON body is no object")
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}
    return {k: v[-1] for k, v in parse_qs(body.decode("utf-8"), keep_blank_values=True).items()}


def _forced(value: Optional[str]) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


class WebApp:
    """The WSGI callable; one per app (its CSRF secret lives as long as it does)."""

    def __init__(self, app: Any, *, allow_release: bool = False, token: Optional[str] = None) -> None:
        self.view = LockView(app)
        self.allow_release = allow_release
        self.guard = Guard.from_environment(token)

    def __call__(self, environ: Dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        status, headers, body = self.respond(environ)
        start_response(status, headers + [("Content-Length", str(len(body)))])
        return [body]

    def respond(self, environ: Dict[str, Any]) -> Tuple[str, Headers, bytes]:
        path = environ.get("PATH_INFO") or ""
        method = environ.get("REQUEST_METHOD", "GET").upper()
        query = {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True).items()}
        if not self.guard.admits(environ, query.get("token")):
            return _status(401), [("Content-Type", "text/plain; charset=utf-8"),
                                  ("WWW-Authenticate", 'Bearer realm="celery locks"')], (
                b"a token is needed: send Authorization: Bearer TOKEN, or open the page once with ?token=TOKEN\n")
        if path == "":
            return self._redirect(environ, "/")
        if "token" in query and self.guard.token is not None and method == "GET" and not path.startswith("/api/"):
            return self._redirect(environ, path, cookie=self.guard.cookie())  # the token leaves the address bar
        if method == "POST" and path == "/api/release":
            return self._release(environ)
        if method not in ("GET", "HEAD"):
            return _json(Answer(405, {"error": f"{method} {path}: only GET here (POST /api/release releases)"}))
        if path in ("/", "/lock"):
            html = pages.page("index" if path == "/" else "lock", csrf=self.guard.csrf,
                              allow_release=self.allow_release)
            return "200 OK", [("Content-Type", "text/html; charset=utf-8"), *pages.SECURITY_HEADERS], html.encode()
        if path == "/api/locks":
            return _json(self.view.locks(query.get("task") or None))
        if path == "/api/lock":
            return _json(self.view.lock(query.get("key", "")))
        if path.startswith("/static/"):
            found = pages.static(path[len("/static/"):])
            if found is not None:
                return "200 OK", [("Content-Type", found[1]), ("Cache-Control", "no-cache"),
                                  ("X-Content-Type-Options", "nosniff")], found[0].encode()
        return _json(Answer(404, {"error": f"nothing at {path}"}))

    def _redirect(self, environ: Dict[str, Any], path: str, cookie: Optional[str] = None) -> Tuple[str, Headers, bytes]:
        headers: Headers = [("Location", (environ.get("SCRIPT_NAME") or "") + path)]
        if cookie:
            headers.append(("Set-Cookie", cookie))
        return _status(303), headers, b""

    def _release(self, environ: Dict[str, Any]) -> Tuple[str, Headers, bytes]:
        if not self.allow_release:
            return _json(Answer(403, {"error": "releasing is off: start the page with --allow-release "
                                               "(wsgi_app(app, allow_release=True))"}))
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            if length > MAX_BODY:
                return _json(Answer(413, {"error": "the request body is too large"}))
            fields = read_post(environ.get("CONTENT_TYPE", ""), environ["wsgi.input"].read(length) if length else b"")
        except (ValueError, UnicodeDecodeError) as exc:
            return _json(Answer(400, {"error": f"the request body cannot be read: {exc}"}))
        if not self.guard.csrf_ok(environ.get("HTTP_X_CSRFTOKEN") or fields.get("csrf_token")):
            return _json(Answer(403, {"error": "the CSRF token is missing or wrong: reload the page"}))
        who = f"{environ.get('REMOTE_ADDR') or '?'} (web view)"
        return _json(self.view.release(fields.get("key", ""), force=_forced(fields.get("force")), who=who))


def wsgi_app(app: Any, *, allow_release: bool = False, token: Optional[str] = None) -> WebApp:
    """The operator's page of ``app``'s locks as a WSGI application.

    ``allow_release`` shows a Release button and accepts ``POST /api/release``; ``token`` (or the
    environment variable ``CELERY_SINGLETON_LOCK_WEB_TOKEN``) makes every request show it.
    """
    return WebApp(app, allow_release=allow_release, token=token)
