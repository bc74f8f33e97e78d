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
"""

from __future__ import annotations

from typing import Any, Callable

import redis

__all__ = ["RestartWait", "WINDOW_S", "start_gate"]

#: Whole seconds of uptime (as ``INFO`` counts them) before a server may grant: the longest
#: ``restart_window`` of ``lua/_common.lua`` (3,000 ms) in the same unit, so a grant never
#: comes while a renewal may still take a lock back.
WINDOW_S = 3


class RestartWait(redis.exceptions.ConnectionError):
    """The server started less than a restart window ago: no grant until every lock it may have
    lost has been taken back by its live holder or has expired (an outage: it passes)."""

    def __init__(self, wait_ms: int) -> None:
        super().__init__(f"the lock store started less than {WINDOW_S} s ago: grants wait {wait_ms} ms more, "
                         f"until every lock it may have lost is taken back by its live holder")
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
