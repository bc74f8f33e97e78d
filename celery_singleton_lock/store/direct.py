"""The calls every task makes, on connections taken from redis-py's pool once and kept.

redis-py's client takes a connection from its pool and hands it back around every
command, through its retry, event and metrics layers; for one short command that costs
more client CPU than the round trip (``bench/FINDINGS.md``). :class:`Direct` keeps the
connections it took and asks through redis-py's own
:class:`~redis.connection.Connection`: ``send_command`` packs, ``read_response`` parses,
so the wire format, the replies, the errors and the periodic health check are redis-py's.

A connection serves one call at a time (taken from a free list and put back after its
reply, so threads and greenlets never share one). A broken one is dropped with every idle
one beside it (a restart or a ``CLIENT KILL`` breaks them all), and a call that met it on
a kept connection is asked once more on a fresh one, as redis-py's own retry would. A
fork starts from an empty list: the parent's sockets are not the child's.

A command whose answer can wait (a task's release: Redis applies it as it arrives, and the
worker need not sleep until it hears back) is posted (:meth:`Direct.post`): written now, its
reply read by this process's next call, or by :meth:`Direct.settle` (the heartbeat thread's
tick), and handed to the poster's ``answer``. A post may also be held back: then it is
written in one piece with this process's next call on the connection, which saves the
store's waking up for it alone, or by :meth:`Direct.flush`, whichever comes first; the
poster says when the flush is due.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, List, Optional, Sequence, Tuple

import redis

from . import wire

__all__ = ["Direct", "direct_for", "Answer"]

logger = logging.getLogger("celery_singleton_lock")

#: Told a posted command's reply: the parsed reply, or the exception reading it raised (an
#: error reply, or a connection lost before the reply came).
Answer = Callable[[Any], None]
#: A posted command: its connection, whom to tell its reply, and its bytes while they are held back.
_Owed = Tuple[Any, Answer, bytes]


class _Forks:
    """How many forks made this process (0 in the one that started): a kept connection list made
    under another count is a parent's. Counted by a fork hook, not asked of the kernel per call."""

    count = 0


def _forked() -> None:
    _Forks.count += 1


os.register_at_fork(after_in_child=_forked)


class Direct:
    """Ask one Redis (or Sentinel's master) on kept connections of ``client``'s pool."""

    __slots__ = ("_pool", "_idle", "_owed", "_forks", "_encoding")

    def __init__(self, client: redis.Redis) -> None:
        self._pool = client.connection_pool
        self._idle: List[Any] = []
        #: Connections with a posted command's reply still to read, each with whom to tell (and
        #: the command itself while it is held back).
        self._owed: List[_Owed] = []
        self._forks = _Forks.count
        kwargs = self._pool.connection_kwargs
        # Packed here only as redis-py would pack it: its encoder, strict about bad text.
        strict = kwargs.get("encoding_errors", "strict") == "strict"
        self._encoding: Optional[str] = kwargs.get("encoding", "utf-8") if strict else None

    def __call__(self, *args: Any) -> Any:
        """Send one command and return redis-py's parsed reply; raises redis-py's errors."""
        self._own()
        packed = None if self._encoding is None else wire.pack(args, self._encoding)
        if self._owed:
            if packed is not None:
                done, reply = self._after_posted(packed)
                if done:
                    return reply
            self.settle()
        for last in (False, True):
            connection = None if last else self._kept()
            reused = connection is not None
            if connection is None:
                connection = self._take()
            try:
                if packed is None:
                    connection.send_command(*args)
                    reply = connection.read_response()
                elif wire.speaks_for(connection):
                    reply = wire.ask(connection, packed)
                else:
                    connection.send_packed_command((packed,))
                    reply = connection.read_response()
            except redis.exceptions.ResponseError:
                self._idle.append(connection)  # the server answered: the connection is fine
                raise
            except redis.exceptions.ConnectionError:
                self._drop(connection)
                self.discard()
                if not reused:
                    raise
                continue
            except BaseException:  # a timeout, an interrupt: a reply may still be on its way
                self._drop(connection)
                raise
            self._idle.append(connection)
            return reply
        raise AssertionError("unreachable")  # pragma: no cover

    def _after_posted(self, packed: bytes) -> Tuple[bool, Any]:
        """Send ``packed`` on a connection that owes a posted reply, then read both replies: one
        wait where a posted reply not in yet would take two. ``(False, None)`` when the command is
        still to be asked (none owed here, or the connection broke)."""
        try:
            connection, answer, held = self._owed.pop()
        except IndexError:
            return False, None
        try:
            wire.send(connection, held + packed if held else packed)
            earlier, reply = wire.receive_many(connection, 2)
        except BaseException as exc:
            self._drop(connection)
            _tell(answer, exc)
            if isinstance(exc, redis.exceptions.ConnectionError):
                self.discard()
                return False, None  # asked again on a fresh connection, as for any kept one
            raise
        self._idle.append(connection)
        _tell(answer, earlier)
        if isinstance(reply, redis.exceptions.ResponseError):
            raise reply
        return True, reply

    def post(self, answer: Answer, *args: Any, hold_back: bool = False) -> bool:
        """Write one command now and leave its reply for later (see the module's docstring);
        false, with nothing sent, where that cannot be done (no kept plain RESP2 connection
        idle, arguments redis-py would pack): then ask as usual. ``hold_back``: written with the
        next call instead, or by :meth:`flush`, which the caller must make sure comes soon."""
        self._own()
        if self._owed:
            self.settle()
        packed = None if self._encoding is None else wire.pack(args, self._encoding)
        connection = self._kept() if packed is not None else None
        if connection is None or packed is None:
            return False
        if not wire.speaks_for(connection):
            self._idle.append(connection)
            return False
        if hold_back:
            self._owed.append((connection, answer, packed))
            return True
        try:
            wire.send(connection, packed)
        except BaseException:  # nothing or part of it written: the caller asks again, elsewhere
            self._drop(connection)
            raise
        self._owed.append((connection, answer, b""))
        return True

    def flush(self) -> None:
        """Write every posted command still held back; their replies stay owed, as for any post."""
        self._own()
        written: List[_Owed] = []
        while True:
            try:
                connection, answer, held = self._owed.pop()
            except IndexError:
                break
            if held:
                try:
                    wire.send(connection, held)
                except BaseException as exc:
                    self._drop(connection)
                    _tell(answer, exc)  # its poster asks again, elsewhere, as for a lost reply
                    if not isinstance(exc, Exception):
                        self._owed.extend(written)
                        raise
                    continue
            written.append((connection, answer, b""))
        self._owed.extend(written)

    def settle(self) -> None:
        """Read every posted command's reply and tell its poster (the connections go back to
        work)."""
        self._own()
        while True:
            try:
                connection, answer, held = self._owed.pop()
            except IndexError:
                return
            try:
                if held:
                    wire.send(connection, held)
                reply: Any = wire.receive(connection, posted=not held)
            except redis.exceptions.ResponseError as exc:
                reply = exc  # the server answered: the connection is fine
            except BaseException as exc:  # lost, timed out, interrupted: out of step from here
                self._drop(connection)
                _tell(answer, exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            self._idle.append(connection)
            _tell(answer, reply)

    @property
    def owes(self) -> bool:
        """Whether a posted command's reply is still to read (by this process)."""
        self._own()
        return bool(self._owed)

    @property
    def holds_back(self) -> bool:
        """Whether a posted command is still to write (by this process)."""
        self._own()
        return any(held for _, _, held in self._owed)

    def script(self, script: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """EVALSHA of a registered :class:`~redis.commands.core.Script`, loaded again on NOSCRIPT."""
        try:
            return self("EVALSHA", script.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            self("SCRIPT", "LOAD", script.script)
            return self("EVALSHA", script.sha, len(keys), *keys, *args)

    def short_way(self) -> bool:
        """Whether a kept connection's commands go straight to its socket (:mod:`.wire`) or through
        redis-py's connection (TLS, Sentinel, RESP3): the benchmark says which path it measured."""
        self("PING")
        return any(wire.speaks_for(connection) for connection in self._idle)

    def discard(self) -> None:
        """Close every kept connection (they are made again on the next call); a posted
        command's reply is read first."""
        if self._owed:
            self.settle()
        idle, self._idle = self._idle, []
        for connection in idle:
            self._drop(connection)

    def _own(self) -> None:
        """After a fork, start from nothing: the parent's sockets, and the replies owed on them,
        are the parent's (a child reading one would take it from the parent)."""
        if self._forks != _Forks.count:
            self._idle, self._owed, self._forks = [], [], _Forks.count

    def _kept(self) -> Any:
        """An idle kept connection, or ``None``; one pop, so two threads never get the same one."""
        try:
            return self._idle.pop()
        except IndexError:
            return None

    def _take(self) -> Any:
        try:
            return self._pool.get_connection()
        except TypeError:  # redis-py 5 wants a command name it does not use
            return self._pool.get_connection("_")

    def _drop(self, connection: Any) -> None:
        connection.disconnect()
        self._pool.release(connection)


def _tell(answer: Answer, reply: Any) -> None:
    """Hand a posted command's reply over; what its handler raises is its own (logged), never the
    failure of the call that happened to read it."""
    try:
        answer(reply)
    except Exception:
        logger.exception("singleton lock: handling the answer to a command sent earlier failed")


def direct_for(client: Any) -> Optional[Direct]:
    """A :class:`Direct` for a client with one connection pool; ``None`` for a Redis Cluster
    client, whose commands go to the node that owns each key."""
    return Direct(client) if isinstance(client, redis.Redis) else None
