"""Wait for replicas to acknowledge a lock before handing it out (Sentinel, or any master with replicas).

Redis replicates asynchronously: a master can take a lock, answer, and die before
the write reaches its replica; Sentinel then promotes the replica, which never
saw the lock, and a second holder takes it. :class:`ReplicaAckBackend` closes that
window: each acquire is followed, on the same connection and in the same round
trip, by ``WAIT replicas timeout``. A lock that fewer replicas acknowledged in
time is released again and the acquire fails with :class:`ReplicaAckError` (a
Redis connection error, so the task's ``on_lock_error`` applies: by default it
is retried, never run unguarded).

Cost: every acquire waits for the replication round trip (typically well under a
millisecond on one host, a network round trip across hosts), and up to
``replica_ack_timeout`` when a replica is slow or gone, after which locks are
refused until the replica is back (or ``replica_ack`` is lowered). Renewals (of
singleton locks and of places alike) are followed by ``WAIT`` as well, so the
replica's copy of a held lock does not lag behind; a renewal that is not
acknowledged in time is logged, not fatal. What a grant asks after its ``WAIT``
(:meth:`ReplicaAckBackend._queue_wait`) is a hook: Sentinel's store also asks the
master which replicas follow it (:mod:`.sentinel`).
``WAIT`` is not consensus: a failover that promotes a replica which did not
acknowledge (there were several and another one answered), or a replica that
restarts empty, can still lose the lock. See ``docs/guarantees.md``.
"""

from __future__ import annotations

import logging
from typing import Any, List, Optional, Sequence, Tuple, Union

import redis
from redis.exceptions import NoScriptError

from . import places, record
from .backend import Conflict, Grant, Holder, NotOurs, Outcome
from .line import LEASE_MS, RedisLine
from .places import Limit
from .redis_places import answer
from .places import renew_args
from .redis_backend import RedisBackend
from .redis_calls import UNKNOWN_HOLDER, acquired, adopt_call, adopted, queue_acquire

__all__ = ["ReplicaAckBackend", "ReplicaAckError"]

logger = logging.getLogger("celery_singleton_lock.replicas")


class ReplicaAckError(redis.exceptions.ConnectionError):
    """The master took the lock but too few replicas acknowledged it in time; it was released."""


class ReplicaAckBackend(RedisBackend):
    """A :class:`RedisBackend` whose acquires are acknowledged by ``replicas`` replicas (``WAIT``)."""

    pipelined_renewals = False

    def __init__(self, client: Any, grants: Any = None, *, replicas: int = 1, timeout: float = 1.0) -> None:
        super().__init__(client, grants)
        if replicas < 1:
            raise ValueError("replica_ack must be >= 1 (0 means: do not wait, use RedisBackend)")
        self.replicas = replicas
        self.timeout_ms = max(1, int(timeout * 1000))
        self.line = AcknowledgedLine(self)

    def _queue_wait(self, pipe: Any) -> int:
        """Queue what follows a write on its connection (``WAIT``); returns how many replies it adds."""
        pipe.execute_command("WAIT", self.replicas, self.timeout_ms)
        return 1

    def _acks(self, replies: Sequence[Any]) -> Tuple[int, str]:
        """The replies of :meth:`_queue_wait`'s commands: (replicas that acknowledged, why a grant is
        refused all the same, ``""`` when it is not)."""
        acked = replies[0]
        if isinstance(acked, Exception):
            raise acked
        return int(acked), ""

    def _then_wait(self, script: Any, keys: Sequence[Any], args: Sequence[Any],
                   client: Any = None) -> Tuple[Any, int, str]:
        """Run ``script`` and ``WAIT`` on one connection, in one round trip: (reply, replicas that
        acked, why a grant is refused all the same)."""
        client = self.client if client is None else client
        for _ in range(2):
            pipe = client.pipeline(transaction=False)
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
            self._queue_wait(pipe)
            reply, *after = pipe.execute(raise_on_error=False)
            if isinstance(reply, NoScriptError):
                script.sha = client.script_load(script.script)  # after a restart or SCRIPT FLUSH
                continue
            if isinstance(reply, Exception):
                raise reply
            return (reply, *self._acks(after))
        raise NoScriptError("the lock script could not be loaded")  # pragma: no cover

    def _acknowledged(self, key: str, token: str, result: Union[Grant, Conflict, NotOurs],
                      acked: int, state: str = "running", refused: str = "") -> Union[Grant, Conflict, NotOurs]:
        if isinstance(result, Grant) and (acked < self.replicas or refused):
            try:
                self.release(key, token, None, state)
            finally:
                why = refused or (f"acknowledged by {acked} of {self.replicas} replica(s) within "
                                  f"{self.timeout_ms} ms")
                raise ReplicaAckError(f"lock {key}: taken on the master but {why}; released again (replica_ack)")
        return result

    def acquire(self, key: str, token: str, ttl_ms: int, holder: Holder, state: str = "running",
                limit: Optional[Limit] = None) -> Outcome:
        if places.is_places(key):
            reply, acked, refused = self._then_wait(
                *self._places.acquire_call(key, token, ttl_ms, holder, state, limit), client=self.grants)
            taken = self._acknowledged(key, token, answer(reply, token, limit), acked, refused=refused)
            assert not isinstance(taken, NotOurs)
            return taken
        value = record.encode(token, state, ttl_ms, holder)
        for _ in range(3):
            pipe = self.grants.pipeline(transaction=False)
            queue_acquire(pipe, key, value, ttl_ms)
            self._queue_wait(pipe)
            replies = pipe.execute(raise_on_error=False)
            result = acquired(replies, token, state)
            if result is not None:
                acked, refused = self._acks(replies[3:])
                acknowledged = self._acknowledged(key, token, result, acked, state, refused)
                assert not isinstance(acknowledged, NotOurs)
                return self.met(key, acknowledged)
        return UNKNOWN_HOLDER

    def adopt(self, queued_key: str, key: str, queued_token: str, token: str,
              ttl_ms: int, holder: Holder, limit: Optional[Limit] = None) -> Union[Grant, Conflict, NotOurs]:
        if places.is_places(key):
            call = self._places.adopt_call(queued_key, key, queued_token, token, ttl_ms, holder, limit)
            reply, acked, refused = self._then_wait(*call, client=self.grants)
            return self._acknowledged(key, token, answer(reply, queued_token if queued_key == key else None, limit),
                                      acked, refused=refused)
        reply, acked, refused = self._then_wait(
            self._adopt, *adopt_call(queued_key, key, queued_token, token, ttl_ms, holder), client=self.grants)
        return self._acknowledged(key, token, adopted(reply, queued_key, key, queued_token), acked, refused=refused)

    def _renew_locks(self, items: Sequence[Tuple[Any, ...]]) -> List[Any]:
        if not items:
            return []
        return self._renew_waited(self._renew, items)

    def _renew_places(self, items: Sequence[Tuple[Any, ...]]) -> List[Any]:
        return self._renew_waited(self._places.renew_script, items) if items else []

    def _renew_waited(self, script: Any, items: Sequence[Tuple[Any, ...]]) -> List[Any]:
        keys, args = renew_args(items)
        reply, acked, _ = self._then_wait(script, keys, args)
        if acked < self.replicas:
            logger.warning("singleton lock: renewal of %d lock(s) acknowledged by %d of %d replica(s); a "
                           "failover now could shorten them", len(items), acked, self.replicas)
        return list(reply)


class AcknowledgedLine(RedisLine):
    """Waiting in line on a :class:`ReplicaAckBackend`: a waiter's grant is acknowledged by the
    replicas as every acquire is (the ask and ``WAIT`` in one round trip), or given back and refused."""

    def __init__(self, backend: ReplicaAckBackend) -> None:
        super().__init__(backend.client, backend._script)
        self._backend = backend

    def acquire(self, key: str, token: str, ttl_ms: int, holder: Holder, limit: Optional[Limit] = None,
                lease_ms: int = LEASE_MS) -> Outcome:
        backend = self._backend
        script, keys, args, limit = self.call(key, token, ttl_ms, holder, limit, lease_ms)
        reply, acked, refused = backend._then_wait(script, keys, args, client=backend.grants)
        taken = backend._acknowledged(key, token, self.outcome(reply, token, limit), acked, refused=refused)
        assert not isinstance(taken, NotOurs)
        return taken
