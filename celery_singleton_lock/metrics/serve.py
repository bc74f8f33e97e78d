"""Serve the metrics of a whole worker, its pool processes included, from its main process.

Every pool process keeps its own values, in files of ``PROMETHEUS_MULTIPROC_DIR`` (a private
temporary directory when the environment names none) laid out as prometheus_client's
multiprocess mode lays out its own (:mod:`.tally`); the main process reads them all with its
``MultiProcessCollector`` at each scrape. A process's counters stay counted after it exits (a
child replaced after ``--max-tasks-per-child`` adds its successor's files beside its own;
nothing is counted twice); its share of the held gauge goes as soon as a scrape finds it dead
(also for a child that was killed).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import shutil
import socket
import tempfile
from typing import Any, Iterator, Optional, Tuple

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.multiprocess import mark_process_dead as _mark_process_dead

from ..store import pid_running
from .families import every_family
from .instruments import FAMILIES
from .registry import MULTIPROCESS_ENV as _ENV
from .tally import FILE_SUFFIX

__all__ = ["WorkerServer", "mark_process_dead"]

logger = logging.getLogger("celery_singleton_lock")

_LIVE_FILE = re.compile(r"gauge_live\w*_(\d+)(?:" + re.escape(FILE_SUFFIX) + r"-\d+)?\.db$")


def mark_process_dead(pid: int, path: Optional[str] = None) -> None:
    """Forget a process's live gauges: prometheus_client's, and the library's own file of them.

    Call it where prometheus_client asks you to call its own (a ``child_exit`` hook) when you
    serve a ``MultiProcessCollector`` yourself; the port setting does it at every scrape.
    """
    path = path or os.environ.get(_ENV)
    if not path:
        return
    _mark_process_dead(pid, path)
    for name in glob.glob(os.path.join(path, f"gauge_livesum_{pid}{FILE_SUFFIX}-*.db")):
        with contextlib.suppress(FileNotFoundError):
            os.remove(name)


def all_interfaces() -> str:
    """The address that serves every interface: ``"::"`` where this host's IPv6 sockets take IPv4
    too (dual-stack, Linux's default), else ``"0.0.0.0"``. (prometheus_client given ``""`` asks
    ``getaddrinfo("")``, which glibc refuses: a bare port number would serve nothing.)"""
    if not socket.has_ipv6:
        return "0.0.0.0"
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            if probe.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY):
                return "0.0.0.0"  # an IPv6 socket here would not take IPv4 clients
            probe.bind(("::", 0))
    except (OSError, AttributeError):
        return "0.0.0.0"
    return "::"


class _Aggregate:
    """The pool's processes summed, after forgetting the live gauges of processes that are gone; every
    family listed, those no process counted yet with no sample."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._inner = MultiProcessCollector(None, path)

    def collect(self) -> Iterator[Any]:
        for name in glob.glob(os.path.join(self.path, "gauge_live*_*.db")):
            found = _LIVE_FILE.search(name)
            if found and not pid_running(int(found.group(1))):
                mark_process_dead(int(found.group(1)), self.path)
        return every_family(self._inner.collect(), [(f.name, f.documentation, f.kind) for f in FAMILIES])


class WorkerServer:
    """The worker main process's /metrics endpoint (started before the pool, so children inherit
    the multiprocess directory)."""

    def __init__(self, address: Tuple[str, int]) -> None:
        self.address = address
        self._own_dir: Optional[str] = None
        self._server: Any = None

    def start(self) -> None:
        path = os.environ.get(_ENV)
        if not path:
            path = self._own_dir = tempfile.mkdtemp(prefix="singleton-lock-metrics-")
            os.environ[_ENV] = path
        registry = CollectorRegistry(auto_describe=True)
        registry.register(_Aggregate(path))
        host, port = self.address
        host = host or all_interfaces()  # a bare port (9808, ":9808"): every interface
        try:
            self._server, _ = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:
            logger.error("singleton lock: cannot serve metrics on %s (%s); the worker runs without them",
                         _spelled(host, port), exc)
            return
        logger.info("singleton lock: metrics of this worker and its pool on http://%s/metrics",
                    _spelled(host, self._server.server_port))

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._own_dir is not None:
            if os.environ.get(_ENV) == self._own_dir:
                del os.environ[_ENV]
            shutil.rmtree(self._own_dir, ignore_errors=True)
            self._own_dir = None


def _spelled(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
