"""Real ``celery worker`` processes started from a test, stopped (or killed) by it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

__all__ = ["Worker", "Beat"]

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Worker:
    """One worker process (with its pool children); always stopped by the fixture that made it."""

    ready_marker = " ready."

    def __init__(self, app: str, env: Dict[str, str], name: str, pool: str = "prefork", concurrency: int = 2,
                 extra_args: Sequence[str] = (), root: str = _ROOT) -> None:
        self.app = app
        self.env = env
        self.name = name
        self.pool = pool
        self.concurrency = concurrency
        self.extra_args = list(extra_args)
        #: The directory the process starts in, first on its PYTHONPATH: another tree's package (an
        #: older version's, say) is imported from there, the tests' modules still from the repository.
        self.root = root
        self.process: Optional[subprocess.Popen] = None
        self.log_path = tempfile.mktemp(prefix=f"csl-{type(self).__name__.lower()}-{name}-", suffix=".log")

    def command(self) -> List[str]:
        return [sys.executable, "-m", "celery", "-A", self.app, "worker", "-P", self.pool,
                "-c", str(self.concurrency), "-n", f"{self.name}@%h", "--without-mingle", "--without-gossip",
                "--without-heartbeat", "-l", "info", *self.extra_args]

    def start(self, timeout: float = 60.0) -> "Worker":
        cmd = self.command()
        env = dict(os.environ, **self.env)
        paths = [self.root, _ROOT, env.get("PYTHONPATH")]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(filter(None, paths)))
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=self.root,
                                        start_new_session=True)
        deadline = time.monotonic() + timeout
        while self.ready_marker not in self.log():
            if self.process.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited with {self.process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"worker {self.name} not ready after {timeout}s:\n{self.log()}")
            time.sleep(0.05)
        return self

    def log(self) -> str:
        try:
            with open(self.log_path, "r", errors="replace") as handle:
                return handle.read()
        except FileNotFoundError:
            return ""

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def children(self) -> List[int]:
        """Pids of the pool processes."""
        try:
            with open(f"/proc/{self.pid}/task/{self.pid}/children") as handle:
                return [int(p) for p in handle.read().split()]
        except FileNotFoundError:
            return []

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def stop(self, timeout: float = 20.0) -> None:
        """Warm shutdown (TERM), then KILL of the whole process group if it lingers."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def kill(self) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        self._log.close()


class Beat(Worker):
    """A real ``celery beat`` process with its schedule file in a temporary directory."""

    ready_marker = "beat: Starting..."

    def command(self) -> List[str]:
        schedule = tempfile.mktemp(prefix="csl-beat-schedule-")
        return [sys.executable, "-m", "celery", "-A", self.app, "beat", "-s", schedule, "--max-interval", "1",
                "-l", "info", *self.extra_args]
