"""The lock protocol on one Redis client (one server, Sentinel's master, or a Redis Cluster).

A free lock is taken with one ``SET key value NX PX ttl GET``, which answers the
holder's value when the lock is not free (Redis 7 and Valkey; Redis 6.2 refuses ``NX``
with ``GET``, so there the holder is read by a second call, only on a conflict). No
script, no pipeline: one command on the hot path. Every change to a held lock compares its token first, in a script
(``lua/``): EVALSHA through redis-py's registered :class:`~redis.commands.core.Script`,
which loads the script again on NOSCRIPT (after a ``SCRIPT FLUSH`` or a restart).
Grants go through their own client, guarded by :mod:`.start_gate`; the holders'
calls (renew, release, fence) through another. The backend keeps no lock state of
its own: who holds what lives in Redis and in the caller's :class:`~.heartbeat.Lease`.
A key with a limit or a window is a room of places (:mod:`.places`): every call on a
places key goes to :class:`~.redis_places.RedisPlaces`, one script each.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import redis
from redis.cluster import RedisCluster

from . import places, record, scripts
from .places import Limit, renew_args
from .redis_places import RedisPlaces
from .direct import direct_for
from .backend import GRANT, NOT_OURS, Completion, Conflict, Grant, Holder, NotOurs, Outcome
from .events import PubSubReleaseEvents, subscribed
from .start_gate import RestartWait

__all__ = ["RedisBackend", "Client", "RestartWait"]

#: What a backend talks to: one Redis (or Sentinel's master), or a Redis Cluster.
Client = Union[redis.Redis, RedisCluster]

#: A conflict whose holder cannot be read (the key holds something that is not a lock value,
#: e.g. a lock written by an older release): someone holds it, for an unknown time.
UNKNOWN_HOLDER = Conflict(task_id="", host="", pid=None, since_ms=None, pttl_ms=0, heartbeat_ms=None,
                          state="running")


def release_call(key: str, token: str, completion: Optional[Completion]) -> Tuple[Tuple[str, ...], Tuple[Any, ...]]:
    """RELEASE's KEYS and ARGV, with the completion note when one is asked for."""
    start = record.head(token, "running")
    if completion is None:
        return (key,), (start,)
    return (key, completion.done_key), (start, completion.task_id, completion.remember_ms,
                                        1 if completion.always else 0)


def floor_arg(fence_floor: int) -> Tuple[int, ...]:
    """The optional fencing floor ARGV (a quorum's proposal); nothing when there is none."""
    return (int(fence_floor),) if fence_floor > 0 else ()


def adopt_call(queued_key: str, key: str, queued_token: str, token: str, ttl_ms: int,
               holder: Holder) -> Tuple[Tuple[str, ...], Tuple[Any, ...]]:
    """ADOPT's KEYS and ARGV: the running lock's value is written whole, as an acquire writes it."""
    return (queued_key, key), (record.head(queued_token, "queued"), token,
                               record.encode(token, "running", ttl_ms, holder), ttl_ms)


def queue_acquire(pipe: Any, key: str, value: str, ttl_ms: int) -> None:
    """The acquire's three commands, on a pipeline: take if free, then read the holder."""
    pipe.set(key, value, nx=True, px=ttl_ms)
    pipe.get(key)
    pipe.pttl(key)


def acquired(replies: Sequence[Any], token: str, state: str) -> Optional[Outcome]:
    """The outcome of :func:`queue_acquire`'s replies; ``None`` when the lock was released
    between the ``SET`` and the ``GET`` (ask again)."""
    taken, value, pttl = replies[:3]
    if isinstance(taken, Exception):
        raise taken
    if taken:
        return GRANT
    if isinstance(value, Exception):
        return UNKNOWN_HOLDER
    if value is None:
        return None
    fields = record.decode(value)
    if fields["token"] == token and fields["state"] == state:
        return GRANT  # ours already: a repeated ask after a reply lost to a broken connection
    return record.conflict(value, pttl if isinstance(pttl, int) else 0, token)


def adopted(reply: Any, queued_key: str, key: str, queued_token: str) -> Union[Grant, Conflict, NotOurs]:
    """ADOPT's reply: 1, {0, value, pttl} or 2."""
    if isinstance(reply, (list, tuple)):
        return record.conflict(reply[1], reply[2], queued_token if queued_key == key else None)
    return GRANT if int(reply) == 1 else NOT_OURS


class RedisBackend:
    """:class:`~.backend.LockBackend` on one Redis client (or one Redis Cluster client)."""

    records_completions = True
    #: Whether a renewal of singleton locks and places together is one pipelined round trip
    #: (a Cluster batches per master instead; replica acknowledgement waits per script).
    pipelined_renewals = True

    def __init__(self, client: Client, grants: Optional[Client] = None) -> None:
        """``client`` serves the holders' calls; ``grants`` (the same client when not given) the
        acquires and adoptions, behind :func:`~.start_gate.start_gate` when :func:`.connect` built it."""
        self.client = client
        self.grants = client if grants is None else grants
        self._set_get = True  # SET ... NX GET, until the server refuses it (Redis 6.2)
        self._release = client.register_script(scripts.RELEASE)
        self._mark_redelivered = client.register_script(scripts.MARK_REDELIVERED)
        self._renew = client.register_script(scripts.RENEW)
        self._adopt = client.register_script(scripts.ADOPT)
        self._requeue = client.register_script(scripts.REQUEUE)
        self._fence = client.register_script(scripts.FENCE)
        self._raise_fence = client.register_script(scripts.RAISE_FENCE)
        self._completed = client.register_script(scripts.COMPLETED)
        self._await = client.register_script(scripts.AWAIT)
        self._places = RedisPlaces(client, self._script)
        # The calls on every task's path skip redis-py's per-command pool round (see .direct).
        self._ask = direct_for(client)
        self._ask_grants = self._ask if grants is None else direct_for(grants)

    def _script(self, script: Any, keys: Sequence[Any], args: Sequence[Any], grants: bool = False) -> Any:
        ask = self._ask_grants if grants else self._ask
        if ask is None:
            return script(keys=keys, args=args, client=self.grants if grants else self.client)
        return ask.script(script, keys, args)

    def _set_nx(self, key: str, value: str, ttl_ms: int, get: bool) -> Any:
        """``SET key value NX PX ttl [GET]``. Without ``get``: true when taken. With ``get``: ``None``
        when taken, else the holder's value."""
        if self._ask_grants is None:
            return self.grants.set(key, value, nx=True, px=ttl_ms, get=get)
        return self._ask_grants("SET", key, value, "NX", "PX", ttl_ms, *(("GET",) if get else ()))

    def acquire(self, key: str, token: str, ttl_ms: int, holder: Holder, state: str = "running",
                limit: Optional[Limit] = None) -> Outcome:
        """Take ``key`` if free: one command, no script (a places key: one script)."""
        if places.is_places(key):
            return self._places.acquire(key, token, ttl_ms, holder, state, limit)
        value = record.encode(token, state, ttl_ms, holder)
        for _ in range(3):
            if self._set_get:
                try:
                    held = self._set_nx(key, value, ttl_ms, get=True)
                except redis.exceptions.ResponseError as exc:
                    if str(exc).startswith("WRONGTYPE"):
                        return UNKNOWN_HOLDER  # not a lock value: someone holds it, in another format
                    if "syntax" not in str(exc).lower():
                        raise
                    self._set_get = False  # Redis 6.2: NX and GET do not go together
                    continue
                if held is None:
                    return GRANT
                pttl = self._ask("PTTL", key) if self._ask is not None else self.client.pttl(key)
                replies = [False, held, pttl]  # the holder's value came with the refusal
            elif self._set_nx(key, value, ttl_ms, get=False):
                return GRANT
            else:
                pipe = self.client.pipeline(transaction=False)
                pipe.get(key)
                pipe.pttl(key)
                replies = [False, *pipe.execute(raise_on_error=False)]
            result = acquired(replies, token, state)
            if result is not None:
                return result
        return UNKNOWN_HOLDER  # taken and released under our feet three times: busy

    def adopt(self, queued_key: str, key: str, queued_token: str, token: str, ttl_ms: int,
              holder: Holder, limit: Optional[Limit] = None) -> Union[Grant, Conflict, NotOurs]:
        """Turn an enqueue lock handed over by token into a running lock."""
        if places.is_places(key):
            return self._places.adopt(queued_key, key, queued_token, token, ttl_ms, holder, limit)
        keys, args = adopt_call(queued_key, key, queued_token, token, ttl_ms, holder)
        reply = self._script(self._adopt, keys, args, grants=True)
        return adopted(reply, queued_key, key, queued_token)

    def fence(self, key: str, fence_key: str, token: str, *, floor: int = 0) -> Optional[int]:
        """The fencing token of the holder of ``key`` under ``token``; ``None`` when it does not hold it.
        ``floor`` (a quorum's proposal) lifts the counter."""
        if places.is_places(key):
            return self._places.fence(key, fence_key, token, floor_arg(floor))
        return int(self._script(self._fence, (key, fence_key), (token, *floor_arg(floor)))) or None

    def requeue(self, key: str, token: str, ttl_ms: int) -> bool:
        if places.is_places(key):
            return self._places.requeue(key, token, ttl_ms)
        return bool(self._requeue(keys=(key,), args=(token, ttl_ms)))

    def raise_fence(self, fence_key: str, floor: int) -> int:
        """Move the fencing counter up to at least ``floor`` (a quorum's second round)."""
        return int(self._raise_fence(keys=(fence_key,), args=(floor,)))

    def release(self, key: str, token: str, completion: Optional[Completion] = None) -> bool:
        if places.is_places(key):
            return self._places.release(key, token, completion)
        keys, args = release_call(key, token, completion)
        return bool(self._script(self._release, keys, args))

    def mark_redelivered(self, key: str, task_id: str) -> bool:
        if places.is_places(key):
            return self._places.mark_redelivered(key, task_id)
        return bool(self._mark_redelivered(keys=(key,), args=(task_id,)))

    def completed(self, done_key: str, task_id: str) -> bool:
        return bool(self._completed(keys=(done_key,), args=(task_id,)))

    def release_many(self, items: Sequence[Tuple[str, str]]) -> List[bool]:
        """One pipelined round trip for all of them."""
        if not items:
            return []
        pipe = self.client.pipeline(transaction=False)
        for key, token in items:
            if places.is_places(key):
                self._places.release_script(keys=(key,), args=(token,), client=pipe)
                continue
            keys, args = release_call(key, token, None)
            self._release(keys=keys, args=args, client=pipe)
        return [bool(r) for r in pipe.execute()]

    def renew(self, items: Sequence[Tuple[Any, ...]]) -> List[bool]:
        """All the singleton locks in one script call, all the places in another: one round trip."""
        if not items:
            return []
        plain, placed = places.split(items)
        locks, rooms = [items[i] for i in plain], [items[i] for i in placed]
        if locks and rooms and self.pipelined_renewals:
            pipe = self.client.pipeline(transaction=False)
            self._renew(*renew_args(locks), client=pipe)
            self._places.renew_script(*renew_args(rooms), client=pipe)
            locked, roomed = pipe.execute()
        else:
            locked, roomed = self._renew_locks(locks), self._renew_places(rooms)
        return places.merge(len(items), (plain, locked), (placed, roomed))

    def _renew_locks(self, items: Sequence[Tuple[Any, ...]]) -> List[Any]:
        if not items:
            return []
        keys, args = renew_args(items)
        return list(self._renew(keys=keys, args=args))

    def _renew_places(self, items: Sequence[Tuple[Any, ...]]) -> List[Any]:
        return self._places.renew(items) if items else []

    def epoch(self) -> Optional[str]:
        """The server's run id: a new one after every restart."""
        run_id = self.client.info("server").get("run_id")
        return str(run_id) if run_id else None

    def close(self) -> None:
        for ask in (self._ask, self._ask_grants):
            if ask is not None:
                ask.discard()
        for client in {id(self.client): self.client, id(self.grants): self.grants}.values():
            pool = getattr(client, "connection_pool", None)
            if pool is not None:
                pool.disconnect()
            else:
                client.close()

    def holder(self, key: str) -> Optional[Dict[str, str]]:
        """The lock's fields with its remaining ttl, for diagnostics; ``None`` when free. For a
        places key: the place that frees soonest, with ``held`` and ``limit`` (:mod:`.places`)."""
        if places.is_places(key):
            return self._places.holder(key)
        pipe = self.client.pipeline(transaction=False)
        pipe.get(key)
        pipe.pttl(key)
        value, pttl = pipe.execute(raise_on_error=False)
        if value is None:
            return None
        info = {"token": "", "state": "unreadable"} if isinstance(value, Exception) else record.decode(value)
        info["pttl"] = str(pttl)
        return info

    def await_release(self, key: str) -> bool:
        """Ask ``key``'s holder to announce its release (run by a waiter after it subscribed);
        ``False`` when the lock is free (for a places key: when a place is free)."""
        if places.is_places(key):
            return self._places.await_release(key)
        return bool(self._await(keys=(key,)))

    @contextmanager
    def release_events(self, key: str) -> Iterator[PubSubReleaseEvents]:
        """Subscribe to ``key``'s release announcements for the duration of the block, and ask the
        holder to announce its release (see :mod:`.events`); each wait asks again before it blocks."""
        with subscribed(self.client, key) as pubsub:
            events = PubSubReleaseEvents(pubsub, lambda: self.await_release(key))
            events.ask()
            yield events
