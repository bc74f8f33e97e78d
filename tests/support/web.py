"""A real ``celery locks web`` process started from a test, and plain HTTP calls to it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Optional, Sequence, Tuple

__all__ = ["WebServer", "http"]

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class WebServer:
    """``celery -A APP locks web --bind 127.0.0.1:0 ARGS``; its address is read from its first line."""

    def __init__(self, app: str, env: Dict[str, str], args: Sequence[str] = ()) -> None:
        self.app, self.env, self.args = app, env, list(args)
        self.process: Optional[subprocess.Popen] = None
        self.url = ""
        self.log_path = tempfile.mktemp(prefix="csl-web-", suffix=".log")

    def start(self, timeout: float = 30.0) -> "WebServer":
        env = dict(os.environ, **self.env)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_ROOT, env.get("PYTHONPATH")]))
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", self.app, "locks", "web", "--bind", "127.0.0.1:0", *self.args],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=_ROOT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(r"serving (http://\S+/)", self.log())
            if found:
                self.url = found.group(1)
                return self
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"celery locks web did not start:\n{self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        with open(self.log_path, "r", errors="replace") as handle:
            return handle.read()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        if getattr(self, "_log", None):
            self._log.close()

    def __enter__(self) -> "WebServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def http(url: str, data: Optional[Dict[str, Any]] = None, headers: Optional[Dict[str, str]] = None,
         form: bool = False) -> Tuple[int, Dict[str, str], str]:
    """One request (a POST when ``data`` is given, as JSON or a form): status, headers, body."""
    body = None
    headers = dict(headers or {})
    if data is not None:
        if form:
            from urllib.parse import urlencode

            body = urlencode(data).encode()
            headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
        else:
            body = json.dumps(data).encode()
            headers.setdefault("Content-Type", "application/json")
    request = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()
