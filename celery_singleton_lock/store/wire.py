"""One packed command and its reply straight on a kept connection's socket.

Every task sends the lock two short commands. Through redis-py's connection each one
also passes its parser's buffer, its health and error bookkeeping and, on the way out,
its health check: layers that cost the worker more CPU than the command itself
(``bench/FINDINGS.md``). Here the command is written to the socket redis-py opened, and
the reply is parsed from what one read brings, as redis-py's RESP2 parser would return it
(errors become redis-py's own exception classes).

Only a connection this can speak for takes it: redis-py's plain TCP or Unix socket
connection, already connected, speaking RESP2, with no health check due. Any other
(TLS, Sentinel's, RESP3, one idle past its health check interval) goes through redis-py
as before.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, List, Optional, Sequence, Tuple

import redis
from redis.connection import Connection, UnixDomainSocketConnection

__all__ = ["pack", "speaks_for", "ask", "send", "receive", "receive_many"]

_PLAIN = (Connection, UnixDomainSocketConnection)
_READ = 65536
_CRLF = b"\r\n"
#: What :func:`_short` answers for a reply it leaves to the parser.
_NOT_SHORT = object()


class _Short(Exception):
    """The reply is not all here yet."""


def pack(args: Sequence[Any], encoding: str) -> Optional[bytes]:
    """A command of text and whole numbers in RESP, in one pass (redis-py's packer encodes each
    argument through a call of its own); ``None`` for any other argument (a subclass of ``str``
    or ``int`` too), which redis-py packs."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        kind = type(arg)
        if kind is str:
            data = arg.encode(encoding)
        elif kind is int:
            data = b"%d" % arg
        elif kind is bytes:
            data = arg
        else:
            return None
        parts.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(parts)


def speaks_for(connection: Any) -> bool:
    """Whether :func:`ask` can take ``connection``'s next command in redis-py's place."""
    if type(connection) not in _PLAIN or connection._sock is None:
        return False
    if getattr(connection, "protocol", 2) not in (2, "2", None):
        return False
    interval = connection.health_check_interval
    return not interval or time.monotonic() <= connection.next_health_check


def ask(connection: Any, packed: bytes) -> Any:
    """Send ``packed`` and return its reply as redis-py's ``read_response`` would; raises what it
    would (``TimeoutError``, ``ConnectionError``, a ``ResponseError`` for an error reply)."""
    send(connection, packed)
    return receive(connection)


def _short(data: bytes) -> Any:
    """The reply ``data`` holds when it is one whole integer or null reply (a grant, a release),
    else ``_NOT_SHORT``: every task reads these, and they need no parser."""
    if data[-2:] == _CRLF and data.find(_CRLF) == len(data) - 2:
        kind = data[0]
        if kind == 0x3A:  # : integer
            return int(data[1:-2])
        if data == b"$-1\r\n":  # null bulk string
            return None
    return _NOT_SHORT


def send(connection: Any, packed: bytes) -> None:
    """Write ``packed`` whole; its reply is :func:`receive`'s to read.

    Written to the descriptor first: a socket with a timeout polls before every send, and a
    command this short fits in the socket's buffer whole; only what did not fit goes through
    the socket's own ``sendall``, which waits for room."""
    sock = connection._sock
    try:
        try:
            done = os.write(sock.fileno(), packed)
        except BlockingIOError:
            done = 0
        if done < len(packed):
            sock.sendall(packed[done:])
    except socket.timeout:
        raise redis.exceptions.TimeoutError("Timeout writing to socket") from None
    except OSError as exc:
        raise redis.exceptions.ConnectionError(f"Error while talking to Redis: {exc}") from None


def receive(connection: Any, posted: bool = False) -> Any:
    """The reply to the one command sent and not yet answered, as :func:`ask` returns it;
    ``posted``: a command sent a while ago, whose reply is most likely in already."""
    data = _read(connection._sock, posted)
    reply = _short(data) if data else _NOT_SHORT
    if reply is _NOT_SHORT:
        reply = receive_many(connection, 1, data)[0]
        if isinstance(reply, redis.exceptions.ResponseError):
            raise reply
    else:
        _answered(connection)
    return reply


def _read(sock: Any, ready: bool = False) -> bytes:
    """What one read brings, its failures as redis-py names them; ``ready``: the data is most
    likely in, so it is read from the descriptor without the poll a socket with a timeout makes
    first (and waited for only when it is not)."""
    try:
        if ready:
            try:
                return os.read(sock.fileno(), _READ)
            except BlockingIOError:
                pass
        return sock.recv(_READ)
    except socket.timeout:
        raise redis.exceptions.TimeoutError("Timeout reading from socket") from None
    except OSError as exc:
        raise redis.exceptions.ConnectionError(f"Error while talking to Redis: {exc}") from None


def _answered(connection: Any) -> None:
    """The server answered: no health check is due before another interval, as in redis-py."""
    if connection.health_check_interval:
        connection.next_health_check = time.monotonic() + connection.health_check_interval


def receive_many(connection: Any, count: int, data: Optional[bytes] = None) -> List[Any]:
    """The replies to the ``count`` commands sent and not yet answered, in order; an error reply is
    returned as its ``ResponseError``, not raised (it answers one command, not the others).
    ``data``: what a read has already brought of them."""
    sock = connection._sock
    replies: List[Any] = []
    at = 0
    if data is None:
        data = _read(sock)
    while True:
        if not data:
            raise redis.exceptions.ConnectionError("Connection closed by server.")
        try:
            while len(replies) < count:
                reply, at = _parse(data, at, connection)
                replies.append(reply)
            break
        except _Short:
            more = _read(sock)
            data = data + more if more else b""
    if at != len(data):  # a reply nobody asked for: the connection is out of step
        raise redis.exceptions.ConnectionError("Protocol error: more replies than commands")
    _answered(connection)
    return replies


def _parse(data: bytes, at: int, connection: Any) -> Tuple[Any, int]:
    """The RESP2 value starting at ``at`` and where it ends; raises :class:`_Short` when cut off."""
    eol = data.find(_CRLF, at)
    if eol < 0:
        raise _Short()
    kind, line, at = data[at], data[at + 1:eol], eol + 2
    if kind == 0x24:  # $ bulk string
        size = int(line)
        if size < 0:
            return None, at
        end = at + size
        if len(data) < end + 2:
            raise _Short()
        return _text(data[at:end], connection), end + 2
    if kind == 0x3A:  # : integer
        return int(line), at
    if kind == 0x2A:  # * array
        size = int(line)
        if size < 0:
            return None, at
        items = []
        for _ in range(size):
            item, at = _parse(data, at, connection)
            items.append(item)
        return items, at
    if kind == 0x2B:  # + simple string
        return _text(line, connection), at
    if kind == 0x2D:  # - error
        return _error(line.decode("utf-8", errors="replace"), connection), at
    raise redis.exceptions.InvalidResponse(f"Protocol error: {bytes(data[at - len(line) - 3:eol])!r}")


def _text(value: bytes, connection: Any) -> Any:
    encoder = connection.encoder
    return encoder.decode(value) if encoder.decode_responses else value


def _error(text: str, connection: Any) -> BaseException:
    """The exception redis-py's parser makes of an error reply (``NOSCRIPT`` is ``NoScriptError``...)."""
    error: BaseException = connection._parser.parse_error(text)
    if isinstance(error, redis.exceptions.ConnectionError):  # redis-py raises these even inside arrays
        raise error
    return error
