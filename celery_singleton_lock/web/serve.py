"""``celery locks web``'s server: the WSGI app on the standard library's ``wsgiref``, a thread per request.

It binds loopback (``127.0.0.1:8040``) unless told otherwise: the page shows who runs what on which
host, and with ``--allow-release`` it changes locks, so another address should come with a token.
"""

from __future__ import annotations

import ipaddress
import socket
from socketserver import ThreadingMixIn
from typing import Any, Tuple
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from .locks import logger

__all__ = ["parse_bind", "DEFAULT_BIND", "make_web_server", "is_loopback"]

DEFAULT_BIND = "127.0.0.1:8040"


def parse_bind(text: str) -> Tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or a bare ``PORT`` (on loopback); a clear error for anything else."""
    text = text.strip()
    host, port = "127.0.0.1", text
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif ":" in text:
        host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535 or not host:
        raise ValueError(f"--bind {text!r} is no HOST:PORT (e.g. 127.0.0.1:8040, [::1]:8040, or 8040)")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _V6Server(_Server):
    address_family = socket.AF_INET6


class _Handler(WSGIRequestHandler):
    """Requests logged through the package's logger, not printed to stderr."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        logger.debug("%s %s", self.address_string(), format % args)


def make_web_server(wsgi: Any, host: str, port: int) -> WSGIServer:
    """A server of ``wsgi`` bound to ``host:port`` (port 0: a free one), not yet serving."""
    server_class = _V6Server if ":" in host else _Server
    return make_server(host, port, wsgi, server_class=server_class, handler_class=_Handler)


