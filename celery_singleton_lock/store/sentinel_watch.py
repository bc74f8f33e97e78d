"""Which server the sentinels name as master now, since when, and which replicas follow it.

redis-py's :class:`~redis.sentinel.Sentinel` asks the sentinels one after the other and takes
the first answer, and only when a connection opens. :class:`MasterWatch` asks every sentinel
(one pipelined round trip each) and follows the one with the newest configuration epoch: the
sentinel that led a failover names the promoted replica first, the others learn it from it a
moment later. The stores of :mod:`.sentinel` ask it on their own cadence; the connections
(:class:`FollowingConnection`) ask it whenever they connect, also when redis-py connects a
dropped connection again (redis-py's own would go back to the address it had).

It also says since when the named master is the master (the sentinels' ``role-reported-time``,
counted again when a failover gives them a new master), so that a process that starts after a
failover waits out the new master's first seconds as one that saw the failover does.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

import redis
from redis.sentinel import MasterNotFoundError, Sentinel, SentinelManagedConnection, SentinelManagedSSLConnection

from .errors import STORE_ERRORS
from .start_gate import RestartWait

__all__ = ["MasterWatch", "FollowingSentinel", "FollowingConnection", "PromotionWait", "FRESH_S", "WINDOW_S",
           "Address", "text"]

#: A grant asks the sentinels again when their last answer is older than this (seconds).
FRESH_S = 0.25
#: Seconds after the sentinels took a new master before it grants: a holder asks them at each of
#: its renewal thread's restart checks and renews at once on a change, so by then each live holder
#: has renewed there or been told (the same wait as a restarted server's, :mod:`.start_gate`).
WINDOW_S = 3.0

Address = Tuple[str, int]

#: Seconds a sentinel that did not answer is not asked again (while another one answers).
QUIET_S = 5.0

#: The age given to a master that no failover made: older than any wait.
NEVER_PROMOTED_MS = 1 << 40


class PromotionWait(RestartWait):
    """The sentinels took this master a moment ago: grants open once every holder has followed it."""

    def __init__(self, wait_ms: int, address: Address) -> None:
        redis.exceptions.ConnectionError.__init__(
            self, f"a lock store promoted by Sentinel less than {WINDOW_S:g} s ago ({address[0]}:{address[1]}): "
                  f"grants open in at most {wait_ms / 1000:g} s, once every holder has renewed on it or been told "
                  f"it lost its lock")
        self.wait_ms = wait_ms


class MasterWatch:
    """Which server the sentinels name as ``name``'s master now, since when, and its healthy replicas."""

    def __init__(self, sentinels: Sequence[redis.Redis], name: str, min_other_sentinels: int = 0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._sentinels = list(sentinels)
        self._name = name
        self._min_other = min_other_sentinels
        self._clock = clock
        self._lock = threading.Lock()
        self._quiet_until = [float("-inf")] * len(self._sentinels)
        self._switched: List[Callable[[], None]] = []
        self.address: Optional[Address] = None
        self.asked_at = float("-inf")
        #: When the current master was taken (this process's clock): grants wait until WINDOW_S after.
        self.taken_at = float("-inf")
        #: Replicas the sentinels see following the current master with a working link.
        self.replicas: FrozenSet[Address] = frozenset()

    def on_switch(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` whenever the named master changes."""
        self._switched.append(callback)

    def master(self) -> Address:
        """The named master, asked again when the last answer is older than :data:`FRESH_S`."""
        if self.address is not None and self._clock() - self.asked_at < FRESH_S:
            return self.address
        return self.ask()

    def ask(self) -> Address:
        """Ask every sentinel now; follow the newest configuration. Raises ``MasterNotFoundError``."""
        now = self._clock()
        best: Optional[Tuple[int, Address, Optional[int], FrozenSet[Address]]] = None
        problems: List[str] = []
        # A sentinel that did not answer is left out for a while (unless none answers): one cut off
        # by a firewall would hold every grant up for its connect timeout.
        answering = [i for i in range(len(self._sentinels)) if self._quiet_until[i] <= now]
        for index in answering or range(len(self._sentinels)):
            sentinel = self._sentinels[index]
            try:
                seen = self._ask_one(sentinel)
            except STORE_ERRORS as exc:
                where = getattr(getattr(sentinel, "connection_pool", None), "connection_kwargs", {})
                problems.append(f"sentinel {where.get('host', '?')}:{where.get('port', index + 1)}: {exc}")
                self._quiet_until[index] = self._clock() + QUIET_S
                continue
            if seen is not None and (best is None or seen[0] > best[0]):
                best = seen
        if best is None:
            raise MasterNotFoundError(f"no sentinel names a master for {self._name!r}"
                                      + (f" ({'; '.join(problems)})" if problems else ""))
        _, address, age_ms, replicas = best
        with self._lock:
            changed = self.address is not None and address != self.address
            taken = now - (age_ms / 1000.0 if age_ms is not None else 0.0)
            if changed or self.address is None:
                self.taken_at = taken if not changed else max(taken, self.taken_at)
            self.address, self.asked_at, self.replicas = address, now, replicas
        if changed:
            for callback in self._switched:
                callback()
        return address

    def _ask_one(self, sentinel: redis.Redis) -> Optional[Tuple[int, Address, Optional[int], FrozenSet[Address]]]:
        """(configuration epoch, named address, ms since that master was taken (``None``: only just),
        healthy replicas) as one sentinel sees them; ``None`` when it names no usable master."""
        pipe = sentinel.pipeline(transaction=False)
        pipe.sentinel_get_master_addr_by_name(self._name)
        pipe.sentinel_master(self._name)
        pipe.sentinel_slaves(self._name)
        named, state, replicas = pipe.execute()
        if not named or state.get("is_sdown") or state.get("is_odown"):
            return None
        if int(state.get("num-other-sentinels", 0)) < self._min_other:
            return None
        address = (text(named[0]), int(named[1]))
        # During a failover the leader names the promoted replica before its own record moves to it:
        # then the master was taken only just now.
        epoch = int(state.get("config-epoch", 0))
        settled = (str(state.get("ip")), int(state.get("port", 0))) == address
        # Epoch 0: no failover ever made this master (the sentinels' clock of it starts at their own start).
        age = (NEVER_PROMOTED_MS if epoch == 0 else int(state.get("role-reported-time", 0))) if settled else None
        healthy = frozenset((str(r["ip"]), int(r["port"])) for r in (replicas or ())
                            if not r.get("is_sdown") and not r.get("is_odown") and r.get("master-link-status") == "ok"
                            and int(r.get("master-port", 0) or 0) == address[1]) if settled else frozenset()
        return epoch, address, age, healthy

    def close(self) -> None:
        for sentinel in self._sentinels:
            sentinel.connection_pool.disconnect()

    def wait_ms(self) -> int:
        """How long grants must still wait on the current master (0: they may go ahead)."""
        left = self.taken_at + WINDOW_S - self._clock()
        return int(left * 1000) + 1 if left > 0 else 0


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class FollowingConnection(SentinelManagedConnection):
    """Sentinel's connection, which sends each command to the master named *now*: one still open
    to another server is closed (by the thread that uses it) and opened again to the named one,
    where redis-py's goes on talking to the server it connected to, and connects a dropped
    connection again to the address it had."""

    def _connect(self) -> Any:
        if self.connection_pool.is_master:
            self.host, self.port = self.connection_pool.get_master_address()
        return super()._connect()

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if self._sock is not None and self.connection_pool.is_master:
            named = self.connection_pool.sentinel_manager.watch.address
            if named is not None and (self.host, self.port) != named:
                self.disconnect()
        super().send_packed_command(command, check_health)


class FollowingSSLConnection(FollowingConnection, SentinelManagedSSLConnection):
    """:class:`FollowingConnection` over TLS."""


class FollowingSentinel(Sentinel):
    """redis-py's :class:`~redis.sentinel.Sentinel` whose connections open to :class:`MasterWatch`'s answer."""

    watch: MasterWatch
    #: The master's credentials and db, as the lock URL gives them (every client of the store uses them).
    master_kwargs: Dict[str, Any]

    def discover_master(self, service_name: str) -> Address:
        return self.watch.master()

    def master_for(self, service_name: str, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("connection_class", FollowingSSLConnection if kwargs.get("ssl") else FollowingConnection)
        return super().master_for(service_name, *args, **kwargs)
