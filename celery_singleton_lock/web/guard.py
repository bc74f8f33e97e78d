"""Who may read the standalone page and who may post to it: an optional bearer token, a CSRF token.

The bearer token (``--token``, or the environment variable :data:`TOKEN_ENV`) is asked of every
request when set: as an ``Authorization: Bearer`` header (scripts), or once as ``?token=`` in the
page's address, which a browser then keeps as an HTTP-only, same-site cookie. The CSRF token is a
secret of the app made when it is built and written into the page; a POST must send it back
(``X-CSRFToken`` header, or a ``csrf_token`` form or JSON field), which another site's page cannot read.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from http.cookies import SimpleCookie
from typing import Dict, Optional

__all__ = ["Guard", "TOKEN_ENV", "COOKIE"]

#: The environment variable that sets the bearer token when ``--token`` is not given.
TOKEN_ENV = "CELERY_SINGLETON_LOCK_WEB_TOKEN"
#: The cookie a browser keeps the bearer token in, after one visit with ``?token=``.
COOKIE = "celery_singleton_lock_token"


def _same(given: Optional[str], expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())


class Guard:
    """The app's bearer token (``None``: none asked) and its CSRF secret."""

    def __init__(self, token: Optional[str]) -> None:
        if token is not None and not token.strip():
            raise ValueError("the web view's token is empty: give a secret, or no token at all")
        self.token = token
        self.csrf = secrets.token_urlsafe(32)

    @classmethod
    def from_environment(cls, token: Optional[str]) -> "Guard":
        return cls(token if token is not None else (os.environ.get(TOKEN_ENV) or None))

    def admits(self, environ: Dict[str, object], query_token: Optional[str]) -> bool:
        """Whether the request carries the bearer token (always, when none is set)."""
        if self.token is None:
            return True
        header = str(environ.get("HTTP_AUTHORIZATION") or "")
        if header[:7].lower() == "bearer " and _same(header[7:].strip(), self.token):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(str(environ.get("HTTP_COOKIE") or ""))
        except Exception:  # a malformed cookie header is no token
            return False
        if COOKIE in cookie and _same(cookie[COOKIE].value, self._kept()):
            return True
        return _same(query_token, self.token)

    def cookie(self) -> str:
        """The ``Set-Cookie`` value that keeps the token in the browser that gave it in the address."""
        return f"{COOKIE}={self._kept()}; Path=/; HttpOnly; SameSite=Strict"

    def _kept(self) -> str:
        """What the cookie holds: a digest of the token (any characters), never the token itself."""
        return hashlib.sha256(f"celery_singleton_lock web {self.token}".encode()).hexdigest()

    def csrf_ok(self, given: Optional[str]) -> bool:
        return _same(given, self.csrf)
