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
refused until the replica is back (or ``replica_ack`` is lowered). Renewals are
followed by ``WAIT`` as well, so the replica's copy of a held lock does not lag
behind; a renewal that is not acknowledged in time is logged, not fatal.
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

    def _then_wait(self, script: Any, keys: Sequence[Any], args: Sequence[Any], client: Any = None) -> Tuple[Any, int]:
        """Run ``script`` and ``WAIT`` on one connection, in one round trip: (reply, replicas that acked)."""
        client = self.client if client is None else client
        for _ in range(2):
            pipe = client.pipeline(transaction=False)
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
            pipe.execute_command("WAIT", self.replicas, self.timeout_ms)
            reply, acked = pipe.execute(raise_on_error=False)
            if isinstance(reply, NoScriptError):
                script.sha = client.script_load(script.script)  # after a restart or SCRIPT FLUSH
                continue
            if isinstance(reply, Exception):
                raise reply
            if isinstance(acked, Exception):
                raise acked
            return reply, int(acked)
        raise NoScriptError("the lock script could not be loaded")  # pragma: no cover

    def _acknowledged(self, key: str, token: str, result: Union[Grant, Conflict, NotOurs],
                      acked: int, state: str = "running") -> Union[Grant, Conflict, NotOurs]:
        if isinstance(result, Grant) and acked < self.replicas:
            try:
                self.release(key, token, None, state)
            finally:
                raise ReplicaAckError(
                    f"lock {key}: taken on the master but acknowledged by {acked} of {self.replicas} "
                    f"replica(s) within {self.timeout_ms} ms; released again (replica_ack)")
        return result

    def acquire(self, key: str, token: str, ttl_ms: int, holder: Holder, state: str = "running",
                limit: Optional[Limit] = None) -> Outcome:
        if places.is_places(key):
            reply, acked = self._then_wait(*self._places.acquire_call(key, token, ttl_ms, holder, state, limit),
                                           client=self.grants)
            taken = self._acknowledged(key, token, answer(reply, token, limit), acked)
            assert not isinstance(taken, NotOurs)
            return taken
        value = record.encode(token, state, ttl_ms, holder)
        for _ in range(3):
            pipe = self.grants.pipeline(transaction=False)
            queue_acquire(pipe, key, value, ttl_ms)
            pipe.execute_command("WAIT", self.replicas, self.timeout_ms)
            replies = pipe.execute(raise_on_error=False)
            result = acquired(replies, token, state)
            if result is not None:
                if isinstance(replies[3], Exception):
                    raise replies[3]
                acknowledged = self._acknowledged(key, token, result, int(replies[3]), state)
                assert not isinstance(acknowledged, NotOurs)
                return self.met(key, acknowledged)
        return UNKNOWN_HOLDER

    def adopt(self, queued_key: str, key: str, queued_token: str, token: str,
              ttl_ms: int, holder: Holder, limit: Optional[Limit] = None) -> Union[Grant, Conflict, NotOurs]:
        if places.is_places(key):
            call = self._places.adopt_call(queued_key, key, queued_token, token, ttl_ms, holder, limit)
            reply, acked = self._then_wait(*call, client=self.grants)
            return self._acknowledged(key, token, answer(reply, queued_token if queued_key == key else None, limit),
                                      acked)
        reply, acked = self._then_wait(self._adopt, *adopt_call(queued_key, key, queued_token, token, ttl_ms, holder),
                                       client=self.grants)
        return self._acknowledged(key, token, adopted(reply, queued_key, key, queued_token), acked)

    def _renew_locks(self, items: Sequence[Tuple[Any, ...]]) -> List[Any]:
        if not items:
            return []
        keys, args = renew_args(items)
        reply, acked = self._then_wait(self._renew, keys, args)
        if acked < self.replicas:
            logger.warning("singleton lock: renewal of %d lock(s) acknowledged by %d of %d replica(s); a "
                           "failover now could shorten them", len(items), acked, self.replicas)
        return list(reply)
