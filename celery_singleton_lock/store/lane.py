"""One connection per process for the hot path: commands go out at once, replies are read in order.

redis-py's ``execute_command`` spends more CPU than the round trip itself on a
small machine (pool checkout, argument encoding, retry and event layers:
about 40-50 µs of the ~90 µs a ``PING`` costs from Python here). The lane keeps
one connection from the client's pool for the lock's own commands, writes
pre-packed RESP, and reads the replies in the order they were sent. That also
pipelines for free:

* a finishing task's release is *sent* and applied by Redis at once, but its
  reply (was the token still ours?) is read later: by the process's next acquire,
  which finds it already arrived, or by the heartbeat thread when the process goes
  idle. A release is never delayed; only its report is;
* a publisher sends its enqueue-lock acquire first and reads the answer only
  when the message is ready to go (:meth:`Lane.begin`), so the round trip overlaps
  Celery building the message.

Releases go as ``EVAL`` with the script text, never ``EVALSHA``: a NOSCRIPT
error read later would mean a release that did not happen. A caller that gets
NOSCRIPT back from its own ``EVALSHA`` loads the script and asks again.

Reply callbacks run after the lane's lock is let go, so a callback (a signal
receiver, say) may itself use the lane; a :class:`Pending` is filled under the
lock, so whoever waits for it finds it filled once the lock is free.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import Any, Callable, Deque, List, Optional, Tuple

import redis

from .compat import checkout

__all__ = ["Lane", "Pending", "pack", "CONNECTION_ERRORS"]

Done = Callable[[Any], None]  # called with the reply, or the exception that replaced it

#: What a broken connection raises; the caller retries on the client's own path.
CONNECTION_ERRORS = (redis.ConnectionError, redis.TimeoutError, OSError)


def pack(*args: Any) -> bytes:
    """One command in RESP (an array of bulk strings), as redis-py would encode it, cheaper."""
    parts = [b"*%d\r\n" % len(args)]
    append = parts.append
    for arg in args:
        kind = type(arg)  # exact types first: this runs twice per task
        if kind is str:
            data = arg.encode()
        elif kind is bytes:
            data = arg
        elif kind is int:
            data = b"%d" % arg
        elif isinstance(arg, bytes):
            data = bytes(arg)
        elif isinstance(arg, str):
            data = str.encode(arg)
        elif isinstance(arg, int):
            data = b"%d" % arg
        else:
            data = str(arg).encode()
        append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(parts)


class Pending:
    """A reply that will be read later; :meth:`result` reads up to it if nobody has yet."""

    __slots__ = ("_lane", "_value", "_ready")

    def __init__(self, lane: "Lane") -> None:
        self._lane = lane
        self._value: Any = None
        self._ready = False

    def __call__(self, value: Any) -> None:
        self._value = value
        self._ready = True

    @property
    def ready(self) -> bool:
        return self._ready

    def result(self) -> Any:
        """The reply; an error reply or a broken connection is raised here."""
        if not self._ready:
            self._lane.drain(always=True)
        if not self._ready:  # pragma: no cover - drain reads every owed reply
            raise redis.ConnectionError("reply never read")
        if isinstance(self._value, BaseException):
            raise self._value
        return self._value


class Lane:
    """The process's hot-path connection (re-made after a fork: replies are not inherited)."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._connection: Optional[Any] = None
        self._owed: Deque[Done] = deque()

    def _checked(self) -> None:
        if self._pid != os.getpid():  # forked: the parent's connection and replies are not ours
            self._reset()

    @property
    def pending(self) -> int:
        """Replies sent for and not read yet."""
        return len(self._owed) if self._pid == os.getpid() else 0

    def send(self, packed: bytes, done: Done) -> None:
        """Write one packed command now; ``done`` gets its reply when it is read.

        Raises a connection error (nothing was queued for ``done``) when the write fails.
        """
        self._checked()
        with self._lock:
            if self._connection is None:
                self._connection = checkout(self._pool)
            try:
                self._connection.send_packed_command([packed])
            except BaseException as exc:  # a broken socket, or a soft time limit mid-write
                error = exc
                failed = self._settle(self._broken(redis.ConnectionError(f"lock lane: write failed ({exc!r})")))
            else:
                self._owed.append(done)
                return
        self._deliver(failed)
        if isinstance(error, CONNECTION_ERRORS):
            raise redis.ConnectionError("lock lane: the write failed") from error
        raise error

    def begin(self, packed: bytes) -> Pending:
        """Send one command and return its reply-to-be."""
        pending = Pending(self)
        self.send(packed, pending)
        return pending

    def call(self, packed: bytes) -> Any:
        """Send one command and wait for its reply (earlier owed replies are read on the way)."""
        return self.begin(packed).result()

    def drain(self, always: bool = False) -> None:
        """Read every reply still owed (waits at most one round trip for the last one).

        ``always`` takes the lock even when nothing looks owed: another thread may be
        reading our reply right now, and has filled it once the lock is free.
        """
        if not always and not self.pending:
            return
        self._checked()
        delivered: List[Tuple[Done, Any]] = []
        interrupted: Optional[BaseException] = None
        with self._lock:
            while self._owed:
                done = self._owed.popleft()
                try:
                    reply: Any = self._connection.read_response()  # type: ignore[union-attr]
                except redis.ResponseError as exc:  # an error reply: the stream is still in step
                    reply = exc
                except BaseException as exc:
                    # A broken socket, or an exception raised into us mid-read (a soft time
                    # limit): the stream is out of step, so every reply still owed is lost.
                    # redis-py has dropped the socket; a reply must never reach the wrong caller.
                    if isinstance(exc, CONNECTION_ERRORS):
                        lost: BaseException = exc
                    else:
                        lost, interrupted = redis.ConnectionError(f"lock lane: read interrupted ({exc!r})"), exc
                    delivered.append((done, lost))
                    delivered.extend(self._broken(lost))
                    break
                delivered.append((done, reply))
            delivered = self._settle(delivered)
        self._deliver(delivered)
        if interrupted is not None:
            raise interrupted

    @staticmethod
    def _settle(replies: List[Tuple[Done, Any]]) -> List[Tuple[Done, Any]]:
        """Fill the :class:`Pending` replies now (lock held); return the callbacks to run after."""
        later = []
        for done, reply in replies:
            if type(done) is Pending:
                done(reply)
            else:
                later.append((done, reply))
        return later

    @staticmethod
    def _deliver(delivered: List[Tuple[Done, Any]]) -> None:
        for done, reply in delivered:
            done(reply)

    def _broken(self, exc: Optional[BaseException] = None) -> List[Tuple[Done, Any]]:
        """Drop the connection (lock held); every reply still owed becomes ``exc``."""
        error = exc or redis.ConnectionError("lock lane: connection lost")
        owed = [(done, error) for done in self._owed]
        self._owed.clear()
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.disconnect()
            self._pool.release(connection)
        return owed

    def close(self) -> None:
        try:
            self.drain()
        finally:
            with self._lock:
                failed = self._settle(self._broken())
            self._deliver(failed)
