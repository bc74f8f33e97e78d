"""Sentinel: every call goes to the master the sentinels name now, and a new master grants nothing at first.

A failover promotes a replica while the old master keeps answering as a master (the
sentinels demote it only at a later look of theirs: docs/guarantees.md has the measure).
redis-py's Sentinel client asks the sentinels only when it opens a connection, so a
worker's kept connections would go on renewing on the old master while the lock's copy on
the new one runs out, and go on granting there locks the new master never sees. Here instead:

- :class:`~.sentinel_watch.MasterWatch` asks *every* sentinel (one pipelined round trip
  each) and follows the one with the newest configuration epoch: the sentinel that led the
  failover names the new master first. It is asked by every grant whose last answer is
  older than :data:`~.sentinel_watch.FRESH_S`, by the renewal thread at each of its looks
  for a restarted store (:meth:`FollowsMaster.epoch`, which the heartbeat polls while locks
  are held), and after every store error. When the answer changes, each connection of the
  store is closed before its next command and opened to the new master.
- A holder whose lock reached the new master renews it there at once (the changed epoch makes
  the heartbeat renew every lease), and keeps it; one whose lock did not reach it is told
  (its renewal finds the token gone: flag, ``LockLostError``, ``lock_lost``, an ERROR line).
- A master the sentinels took less than :data:`~.sentinel_watch.WINDOW_S` ago grants nothing
  yet (:class:`~.sentinel_watch.PromotionWait`, waited out as a young server's
  :class:`~.start_gate.RestartWait`): by then every live holder has asked the sentinels and
  renewed on it or been told. The age is the sentinels' own (``role-reported-time``), so a
  process that starts after the failover waits as one that saw it.
- With ``replica_ack``, a grant also asks the master which replicas follow it (``ROLE``, in
  the same round trip as the grant and its ``WAIT``) and is refused when one that the
  sentinels count as a healthy replica does not: a replica promoted a moment ago, before any
  sentinel noticed, has left the old master, which must not grant on the word of the replicas
  left behind (they are about to follow the new master and drop what it never had).

What no client can close: between the promotion and the moment the first sentinel notices
it (at its next look), the old master still grants without ``replica_ack``, and those locks
are not on the new master. Their holders are told before the new master grants anything.
``docs/guarantees.md`` gives the measured figures.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from .backend import Conflict, Grant, Holder, NotOurs, Outcome
from .errors import STORE_ERRORS
from .line import LEASE_MS as LINE_LEASE_MS, RedisLine
from .places import Limit
from .redis_backend import RedisBackend
from .replicas import ReplicaAckBackend
from .sentinel_watch import Address, FollowingSentinel, MasterWatch, PromotionWait, text

__all__ = ["SentinelBackend", "SentinelAckBackend", "FollowsMaster", "FollowingLine", "sentinel_store"]


class FollowsMaster:
    """What a store on Sentinel's master does beyond :class:`~.redis_backend.RedisBackend`."""

    watch: MasterWatch
    client: Any
    grants: Any
    line: Any

    def _follow(self, watch: MasterWatch) -> None:
        self.watch = watch
        watch.on_switch(self._disconnect)
        line = getattr(self, "line", None) or RedisLine(self.client, self._script)  # type: ignore[attr-defined]
        self.line = FollowingLine(line, self)

    def _disconnect(self) -> None:
        """Close the idle connections to the old master; one in use is closed by its own thread before
        its next command (:class:`~.sentinel_watch.FollowingConnection`)."""
        for client in {id(self.client): self.client, id(self.grants): self.grants}.values():
            client.connection_pool.disconnect(inuse_connections=False)

    def _granting(self) -> None:
        address = self.watch.master()
        wait_ms = self.watch.wait_ms()
        if wait_ms:
            raise PromotionWait(wait_ms, address)

    def _riding(self, call: Callable[[], Any]) -> Any:
        """``call()``, asked once more on the new master when it failed because the master changed."""
        try:
            return call()
        except PromotionWait:
            raise  # the sentinels were asked a moment ago: this is their answer
        except STORE_ERRORS:
            before = self.watch.address
            after: Optional[Address]
            try:
                after = self.watch.ask()
            except STORE_ERRORS:
                after = before
            if after == before:
                raise
            return call()

    def acquire(self, key: str, token: str, ttl_ms: int, holder: Holder, state: str = "running",
                limit: Optional[Limit] = None) -> Outcome:
        def grant() -> Outcome:
            self._granting()  # again after a switch: the new master may not grant yet
            return super(FollowsMaster, self).acquire(key, token, ttl_ms, holder, state, limit)  # type: ignore[misc]

        return self._riding(grant)

    def adopt(self, queued_key: str, key: str, queued_token: str, token: str, ttl_ms: int,
              holder: Holder, limit: Optional[Limit] = None) -> Union[Grant, Conflict, NotOurs]:
        def grant() -> Union[Grant, Conflict, NotOurs]:
            self._granting()
            return super(FollowsMaster, self).adopt(  # type: ignore[misc]
                queued_key, key, queued_token, token, ttl_ms, holder, limit)

        return self._riding(grant)

    def renew(self, items: Sequence[Tuple[Any, ...]]) -> List[bool]:
        return self._riding(lambda: super(FollowsMaster, self).renew(items))  # type: ignore[misc]

    def release(self, key: str, token: str, completion: Any = None, state: str = "running") -> bool:
        return self._riding(lambda: super(FollowsMaster, self).release(  # type: ignore[misc]
            key, token, completion, state))

    def release_many(self, items: Sequence[Tuple[str, ...]]) -> List[bool]:
        return self._riding(lambda: super(FollowsMaster, self).release_many(items))  # type: ignore[misc]

    def close(self) -> None:
        super().close()  # type: ignore[misc]
        self.watch.close()

    def epoch(self) -> Optional[str]:
        """The named master's address and run id: asked of the sentinels at every look (the renewal
        thread looks at each restart check while locks are held), so a failover renews every lease at once."""
        host, port = self.watch.ask()
        run_id = self._riding(lambda: super(FollowsMaster, self).epoch())  # type: ignore[misc]
        return f"{host}:{port} {run_id}"


class FollowingLine:
    """Waiting in line on the master the sentinels name now: an ask waits out a promotion's window
    and rides a switch of master as an acquire does; the line itself starts anew on a new master
    (the waiters join it again in the order they next ask)."""

    def __init__(self, line: Any, store: FollowsMaster) -> None:
        self._line = line
        self._store = store

    def acquire(self, key: str, token: str, ttl_ms: int, holder: Holder, limit: Optional[Limit] = None,
                lease_ms: int = LINE_LEASE_MS) -> Outcome:
        def grant() -> Outcome:
            self._store._granting()
            return self._line.acquire(key, token, ttl_ms, holder, limit=limit, lease_ms=lease_ms)  # type: ignore[no-any-return]

        return self._store._riding(grant)  # type: ignore[no-any-return]

    def leave(self, key: str, token: str, limit: Optional[Limit] = None) -> None:
        self._store._riding(lambda: self._line.leave(key, token, limit))


class SentinelBackend(FollowsMaster, RedisBackend):
    """:class:`~.redis_backend.RedisBackend` on the master the sentinels name now."""

    def __init__(self, client: Any, grants: Any, watch: MasterWatch) -> None:
        RedisBackend.__init__(self, client, grants)
        self._follow(watch)


class SentinelAckBackend(FollowsMaster, ReplicaAckBackend):
    """:class:`~.replicas.ReplicaAckBackend` on the master the sentinels name now, whose grants are
    refused when a replica the sentinels count on has left it (it was promoted)."""

    def __init__(self, client: Any, grants: Any, watch: MasterWatch, *, replicas: int = 1,
                 timeout: float = 1.0) -> None:
        ReplicaAckBackend.__init__(self, client, grants, replicas=replicas, timeout=timeout)
        self._follow(watch)

    def _queue_wait(self, pipe: Any) -> int:
        super()._queue_wait(pipe)
        pipe.execute_command("ROLE")
        return 2

    def _acks(self, replies: Sequence[Any]) -> Tuple[int, str]:
        acked, refused = super()._acks(replies)
        role = replies[1]
        if isinstance(role, Exception) or refused:
            return acked, refused
        if text(role[0]) != "master":
            return acked, "the server answered as a replica"
        following = {(text(r[0]), int(r[1])) for r in role[2]}
        gone = sorted(self.watch.replicas - following)
        if gone:
            return acked, (f"replica(s) {', '.join(f'{h}:{p}' for h, p in gone)} that the sentinels count on "
                           f"no longer follow it (promoted a moment ago?)")
        return acked, ""


def sentinel_store(manager: FollowingSentinel, client: Any, grants: Any, replicas: int,
                   timeout: float) -> Union[SentinelBackend, SentinelAckBackend]:
    """The store on ``manager``'s master: with ``replicas`` > 0, grants acknowledged by that many."""
    if replicas > 0:
        return SentinelAckBackend(client, grants, manager.watch, replicas=replicas, timeout=timeout)
    return SentinelBackend(client, grants, manager.watch)

