"""Release without waiting for Redis's answer.

A finishing task has no use for the reply to its compare-and-delete at that
instant: Redis applies the release as soon as the command arrives, and the
reply only says whether the token was still there (for loss reporting). The
lane sends the release on a connection of its own and reads the reply later:
before the process's next acquire (by then it has long arrived, so reading it
costs no round trip) or from the heartbeat thread when the process goes idle.
A release is therefore never delayed; only its report is.

Releases go as ``EVAL`` with the script text, never ``EVALSHA``: a NOSCRIPT
error read later would mean a release that did not happen.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import Any, Callable, Deque, Optional

import redis

__all__ = ["ReleaseLane"]

Done = Callable[[Any], None]  # called with True/False, or the exception that replaced the reply


class ReleaseLane:
    """One connection per process for fire-now, read-later releases."""

    def __init__(self, pool: Any, script: str) -> None:
        self._pool = pool
        self._script = script
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._connection: Optional[Any] = None
        self._pending: Deque[Done] = deque()

    def _checked(self) -> None:
        if self._pid != os.getpid():  # forked: the parent's connection and replies are not ours
            self._reset()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def send(self, key: str, token: str, done: Done) -> None:
        """Send the compare-and-delete now; ``done`` gets its reply when it is read."""
        self._checked()
        with self._lock:
            if self._connection is None:
                self._connection = self._pool.get_connection()
            try:
                self._connection.send_command("EVAL", self._script, 1, key, token)
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                self._broken()
                raise
            self._pending.append(done)

    def drain(self) -> None:
        """Read every reply still owed (waits at most one round trip for the last one)."""
        if not self._pending:
            return
        self._checked()
        with self._lock:
            while self._pending:
                done = self._pending.popleft()
                try:
                    reply: Any = bool(self._connection.read_response())  # type: ignore[union-attr]
                except redis.ResponseError as exc:
                    reply = exc
                except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                    owed = [done, *self._pending]
                    self._pending.clear()
                    self._broken()
                    for each in owed:
                        each(exc)
                    return
                done(reply)

    def _broken(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.disconnect()
            self._pool.release(connection)

    def close(self) -> None:
        try:
            self.drain()
        finally:
            with self._lock:
                self._broken()
