"""No lock is granted by a server that started less than a restart window ago.

A Redis that restarts without its data (no persistence, or a lost AOF tail) forgets
the locks it held while their holders keep running. Those holders take their locks
back with their next renewal (``renew.lua`` re-creates a missing lock under its
token while the server is young), which comes within a second or so of the start.
Until then no one else may be granted a lock. Grants are refused, with
:class:`RestartWait`, on every connection opened to a server whose uptime is below
:data:`WINDOW_S`.

A restart drops every connection, so every grant after it goes through a new
connection, and each new connection reads the server's uptime once (``INFO
server``), on connecting, before any command of its caller. Grants and the
holders' own calls (renew, release) therefore go through two clients: only the
granting one carries the gate, so a holder can renew and release while grants
wait. The check costs one ``INFO`` per connection, nothing per lock.

A young server is no outage: it is reachable, and grants open within the window.
:func:`wait_for_gate` runs a grant again as the window closes, so a caller waits
(at most the window) where it stands instead of treating the refusal as a failure.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional, TypeVar

import redis

__all__ = ["RestartWait", "WINDOW_S", "start_gate", "young_store", "wait_for_gate"]

T = TypeVar("T")

#: How often a grant refused by a young server is asked again (each ask opens a connection and
#: reads ``INFO``): the wait ends within this of the window's end.
POLL_S = 0.2

#: Whole seconds of uptime (as ``INFO`` counts them) before a server may grant: the longest
#: ``restart_window`` of ``lua/_common.lua`` (3,000 ms) in the same unit, so a grant never
#: comes while a renewal may still take a lock back.
WINDOW_S = 3


class RestartWait(redis.exceptions.ConnectionError):
    """The server started less than a restart window ago: no grant until every lock it may have
    lost has been taken back by its live holder or has expired (a short wait: see :func:`wait_for_gate`).

    A ``ConnectionError`` still, so a caller that does not wait treats it as an outage that passes."""

    def __init__(self, wait_ms: int) -> None:
        super().__init__(f"a young lock store (it started less than {WINDOW_S} s ago: a restart or a fresh "
                         f"start): grants open in at most {wait_ms / 1000:g} s, once every lock it may have "
                         f"lost is taken back by its live holder")
        self.wait_ms = wait_ms


def _uptime_s(info: Any) -> int:
    text = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
    for line in text.splitlines():
        if line.startswith("uptime_in_seconds:"):
            return int(line.split(":", 1)[1].strip())
    return WINDOW_S  # a server that does not say is taken as old (nothing to wait for)


def start_gate(initialise: bool = True) -> Callable[[Any], None]:
    """A redis-py ``redis_connect_func``: set the connection up, then refuse it if the server is young.

    ``initialise`` is false under ``RedisCluster``, which sets the connection up itself
    before it calls the user's function.
    """

    def on_connect(connection: Any) -> None:
        if initialise:
            connection.on_connect()
        connection.send_command("INFO", "server")
        uptime = _uptime_s(connection.read_response())
        if uptime < WINDOW_S:
            raise RestartWait((WINDOW_S - uptime) * 1000)

    return on_connect


def young_store(exc: BaseException) -> Optional[RestartWait]:
    """The wait ``exc`` stands for when only young servers refused (one server, or each master of a
    quorum that failed: its ``errors``); ``None`` when anything else failed."""
    if isinstance(exc, RestartWait):
        return exc
    errors = getattr(exc, "errors", None)
    if isinstance(errors, dict) and errors and all(isinstance(e, RestartWait) for e in errors.values()):
        return RestartWait(max(e.wait_ms for e in errors.values()))
    return None


def wait_for_gate(grant: Callable[[], T], on_wait: Optional[Callable[[RestartWait], None]] = None,
                  clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> T:
    """``grant()``, asked again until a young server's window has passed; ``on_wait`` is told once.

    The wait is bounded by the window the first refusal named, plus a second (``INFO`` counts
    whole seconds): a server that refuses longer (it restarted again meanwhile) raises its
    :class:`RestartWait`, an outage for the caller. Any other error is raised at once.
    """
    deadline: Optional[float] = None
    while True:
        try:
            return grant()
        except redis.exceptions.ConnectionError as exc:
            young = young_store(exc)
            if young is None:
                raise
            now = clock()
            if deadline is None:
                deadline = now + young.wait_ms / 1000.0 + 1.0
                if on_wait is not None:
                    on_wait(young)
            if now >= deadline:
                raise
            sleep(min(POLL_S, deadline - now))
