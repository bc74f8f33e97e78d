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
from typing import Any, ContextManager, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import redis
from redis.cluster import RedisCluster

from . import foreign, places, record, redis_places, scripts
from .places import Limit, renew_args
from .redis_places import RedisPlaces
from .line import RedisLine, line_channel
from .direct import direct_for
from .backend import GRANT, Completion, Conflict, Grant, Holder, NotOurs, Outcome, ReleaseAnswer
from .generations import GenerationStore, RedisGenerations
from .events import LineEvents, PubSubReleaseEvents, line_subscribed, subscribed
from .start_gate import RestartWait
from .errors import STORE_ERRORS
from .redis_calls import UNKNOWN_HOLDER, acquired, adopt_call, adopted, floor_arg, release_call

__all__ = ["RedisBackend", "Client", "RestartWait"]

#: What a backend talks to: one Redis (or Sentinel's master), or a Redis Cluster.
Client = Union[redis.Redis, RedisCluster]

class RedisBackend:
    """:class:`~.backend.LockBackend` on one Redis client (or one Redis Cluster client)."""

    records_completions = True
    counts_places = True
    #: Whether a renewal of singleton locks and places together is one pipelined round trip
    #: (a Cluster batches per master instead; replica acknowledgement waits per script).
    pipelined_renewals = True

    def __init__(self, client: Client, grants: Optional[Client] = None) -> None:
        """``client`` serves the holders' calls; ``grants`` (the same client when not given) the
        acquires and adoptions, behind :func:`~.start_gate.start_gate` when :func:`.connect` built it."""
        self.client = client
        self.grants = client if grants is None else grants
        self._set_get = True  # SET ... NX GET, until the server refuses it (Redis 6.2)
        # A release is posted (its answer read later) only once the server is known to have the
        # script: one it forgot would be asked again only when the answer is read.
        self._release_loaded = False
        self._release = client.register_script(scripts.RELEASE)
        self._mark_redelivered = client.register_script(scripts.MARK_REDELIVERED)
        self._renew = client.register_script(scripts.RENEW)
        self._adopt = client.register_script(scripts.ADOPT)
        self._requeue = client.register_script(scripts.REQUEUE)
        self._fence = client.register_script(scripts.FENCE)
        self._raise_fence = client.register_script(scripts.RAISE_FENCE)
        self._completed = client.register_script(scripts.COMPLETED)
        self._await = client.register_script(scripts.AWAIT)
        self._clear_foreign = client.register_script(scripts.CLEAR_FOREIGN)
        self.generations: Optional[GenerationStore] = RedisGenerations(client)
        self._places = RedisPlaces(client, self._script)
        # Waiting in line (line.py) where a grant is this class's own: a store that adds to each grant (a
        # replica's acknowledgement, a Sentinel promotion's wait) brings a line that adds it too.
        self.line = RedisLine(client, self._script) if type(self).acquire is RedisBackend.acquire else None
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
                    if str(exc).startswith("WRONGTYPE"):  # a value of another Redis type at the lock's name
                        return self.met(key, foreign.holder(self._pttl(key)))
                    if "syntax" not in str(exc).lower():
                        raise
                    self._set_get = False  # Redis 6.2: NX and GET do not go together
                    continue
                if held is None:
                    return GRANT
                replies = [False, held, self._pttl(key)]  # the holder's value came with the refusal
            elif self._set_nx(key, value, ttl_ms, get=False):
                return GRANT
            else:
                pipe = self.client.pipeline(transaction=False)
                pipe.get(key)
                pipe.pttl(key)
                replies = [False, *pipe.execute(raise_on_error=False)]
            result = acquired(replies, token, state)
            if result is not None:
                return self.met(key, result)
        return UNKNOWN_HOLDER  # taken and released under our feet three times: busy

    def _pttl(self, key: str) -> Any:
        return self._ask("PTTL", key) if self._ask is not None else self.client.pttl(key)

    @staticmethod
    def met(key: str, outcome: Outcome) -> Outcome:
        """``outcome``, after telling the operator when it is a key that no lock of ours is."""
        if isinstance(outcome, Conflict) and outcome.state == foreign.STATE:
            foreign.report(key, outcome)
        return outcome

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

    def release(self, key: str, token: str, completion: Optional[Completion] = None,
                state: str = "running") -> bool:
        if places.is_places(key):
            return self._places.release(key, token, completion, state)
        keys, args = release_call(key, token, completion, state)
        released = bool(self._script(self._release, keys, args))
        self._release_loaded = True
        return released

    def post_release(self, key: str, token: str, completion: Optional[Completion],
                     answer: ReleaseAnswer, hold_back: bool = False) -> bool:
        """:class:`~.backend.PostsReleases`: on a kept plain connection (see :mod:`.direct`), for a
        singleton lock.

        Posted on the granting client's connection: the next task's acquire is written behind it
        and one read takes both answers (:meth:`.Direct._after_posted`). A release needs no gate,
        and a kept connection passed it when it was opened."""
        if self._ask_grants is None or not self._release_loaded or places.is_places(key):
            return False
        keys, args = release_call(key, token, completion)

        def answered(reply: Any) -> None:
            # Asked again where a waited-for release would have been: on a store that forgot the
            # script, and on a fresh connection when the kept one broke before the answer.
            if isinstance(reply, (redis.exceptions.NoScriptError, redis.exceptions.ConnectionError)):
                if isinstance(reply, redis.exceptions.NoScriptError):
                    self._release_loaded = False  # until a waited-for release loads it again
                try:
                    reply = self.release(key, token, completion)
                except STORE_ERRORS as exc:
                    reply = exc
            answer(reply if isinstance(reply, BaseException) else bool(reply))

        return self._ask_grants.post(answered, "EVALSHA", self._release.sha, len(keys), *keys, *args,
                                     hold_back=hold_back)

    def settle_posted(self) -> None:
        if self._ask_grants is not None and self._ask_grants.owes:
            self._ask_grants.settle()

    def flush_posted(self) -> None:
        if self._ask_grants is not None and self._ask_grants.owes:
            self._ask_grants.flush()

    def mark_redelivered(self, key: str, task_id: str) -> bool:
        if places.is_places(key):
            return self._places.mark_redelivered(key, task_id)
        return bool(self._mark_redelivered(keys=(key,), args=(task_id,)))

    def completed(self, done_key: str, task_id: str) -> bool:
        return bool(self._completed(keys=(done_key,), args=(task_id,)))

    def release_many(self, items: Sequence[Tuple[str, ...]]) -> List[bool]:
        """One pipelined round trip for all of them."""
        if not items:
            return []
        pipe = self.client.pipeline(transaction=False)
        for key, token, *state in items:
            if places.is_places(key):
                keys, args = redis_places.release_call(key, token, None, *state)
                self._places.release_script(keys=keys, args=args, client=pipe)
                continue
            keys, args = release_call(key, token, None, *state)
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

    def clear_foreign(self, key: str, kind: str) -> bool:
        """Delete a non-lock key at a lock's name while still of ``kind`` (:mod:`.foreign`); ``False``: gone or a lock now."""
        return bool(self._clear_foreign(keys=(key,), args=(kind,)))

    def await_release(self, key: str) -> bool:
        """Ask ``key``'s holder to announce its release (run by a waiter after it subscribed);
        ``False`` when the lock is free (for a places key: when a place is free)."""
        if places.is_places(key):
            return self._places.await_release(key)
        return bool(self._await(keys=(key,)))

    def line_events(self, key: str, token: str) -> ContextManager[LineEvents]:
        """A waiter's news while in ``key``'s line (:mod:`.line_wait`): its turn, and the key's releases."""
        return line_subscribed(self.client, key, line_channel(key, token))

    @contextmanager
    def release_events(self, key: str) -> Iterator[PubSubReleaseEvents]:
        """Subscribe to ``key``'s releases for the block and ask its holder to announce one (:mod:`.events`)."""
        with subscribed(self.client, key) as pubsub:
            events = PubSubReleaseEvents(pubsub, lambda: self.await_release(key))
            events.ask()
            yield events
