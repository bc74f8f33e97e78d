"""Acquire, renew and release locks with one round trip each.

:class:`LockStore` is a thin layer over one Redis client: each public method is
one script call (EVALSHA, reloaded on NOSCRIPT, so a ``SCRIPT FLUSH`` or a Redis
restart does not break callers). Acquire and release travel on the process's
:class:`~.lane.Lane`, the rest on the client's pool. It keeps no lock state of its
own; who holds what lives in Redis and in the caller's :class:`~.heartbeat.Lease`.
"""

from __future__ import annotations

from os import urandom
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Union

import redis
from redis.cluster import RedisCluster
from redis.exceptions import NoScriptError

from . import scripts
from .lane import CONNECTION_ERRORS, Lane, pack

__all__ = ["LockStore", "Grant", "Conflict", "Holder", "Completion", "new_token", "Client"]

#: What a store talks to: one Redis (or Sentinel's master), or a Redis Cluster.
Client = Union[redis.Redis, RedisCluster]


def new_token() -> str:
    """A unique per-execution token (128 random bits)."""
    return urandom(16).hex()


@dataclass(frozen=True)
class Holder:
    """Who asks for (or holds) a lock, as written into Redis for diagnostics."""

    task_id: str
    host: str
    pid: int
    since_ms: int
    heartbeat_ms: int


@dataclass(frozen=True)
class Grant:
    """The lock was taken; ``fence`` strictly increases for each new holder of the task's keys."""

    fence: int


@dataclass(frozen=True)
class Conflict:
    """Someone else holds the lock."""

    task_id: str
    host: str
    pid: Optional[int]
    since_ms: Optional[int]
    pttl_ms: int
    heartbeat_ms: Optional[int]
    state: str
    same_token: bool = False


Outcome = Union[Grant, Conflict]

#: What a release notes besides: (the task's completion set, the holder's task id, how long to
#: remember it in ms, whether to note it even if no redelivered copy met the lock).
Completion = Tuple[str, str, int, bool]


def _release_keys_and_args(key: str, token: str, completion: Optional[Completion]) -> Tuple[Any, ...]:
    if completion is None:
        return (1, key, token)
    done_key, task_id, remember_ms, always = completion
    return (2, key, done_key, token, task_id, remember_ms, 1 if always else 0)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _int_or_none(value: Any) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _floor(fence_floor: int) -> Tuple[int, ...]:
    return (int(fence_floor),) if fence_floor > 0 else ()


def _outcome(reply: Sequence[Any]) -> Optional[Outcome]:
    status = int(reply[0])
    if status == 1:
        return Grant(fence=int(reply[1]))
    if status == 0:
        return Conflict(
            task_id=_text(reply[1]),
            host=_text(reply[2]),
            pid=_int_or_none(reply[3]),
            since_ms=_int_or_none(reply[4]),
            pttl_ms=int(reply[5]),
            heartbeat_ms=_int_or_none(reply[6]),
            state=_text(reply[7]),
            same_token=bool(int(reply[8])),
        )
    return None


class LockStore:
    """The lock protocol on one Redis client (or one Redis Cluster client)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._acquire = client.register_script(scripts.ACQUIRE)
        self._release = client.register_script(scripts.RELEASE)
        self._mark_redelivered = client.register_script(scripts.MARK_REDELIVERED)
        self._renew = client.register_script(scripts.RENEW)
        self._adopt = client.register_script(scripts.ADOPT)
        self._requeue = client.register_script(scripts.REQUEUE)
        self._raise_fence = client.register_script(scripts.RAISE_FENCE)
        # Cluster clients route per slot and have no single pool: they use the client's own path.
        pool = getattr(client, "connection_pool", None)
        self._pool = pool
        self._lane = Lane(pool) if isinstance(client, redis.Redis) and pool else None
        self._release_text = scripts.RELEASE.encode()

    def _evalsha(self, script: Any, *keys_and_args: Any, numkeys: int) -> Any:
        """EVALSHA straight on the client (the hot path skips ``Script.__call__``'s layers);
        on NOSCRIPT (a flush or a restarted server) the script object reloads it and retries."""
        try:
            return self.client.execute_command("EVALSHA", script.sha, numkeys, *keys_and_args)
        except NoScriptError:
            self.client.script_load(script.script)
            return self.client.execute_command("EVALSHA", script.sha, numkeys, *keys_and_args)

    def _call(self, script: Any, numkeys: int, *keys_and_args: Any) -> Any:
        """EVALSHA on the lane (the hot path: no pool checkout, no redis-py command layers).

        NOSCRIPT loads the script and asks again; a broken lane connection falls back to
        the client's own path, with its reconnect and retry (the scripts are idempotent
        for the same token, so a repeat after a lost reply is harmless).
        """
        lane = self._lane
        if lane is None:
            return self._evalsha(script, *keys_and_args, numkeys=numkeys)
        packed = pack(b"EVALSHA", script.sha, numkeys, *keys_and_args)
        try:
            try:
                return lane.call(packed)
            except NoScriptError:
                self.client.script_load(script.script)
                return lane.call(packed)
        except CONNECTION_ERRORS:
            return self._evalsha(script, *keys_and_args, numkeys=numkeys)

    def acquire(self, key: str, fence_key: str, token: str, ttl_ms: int, holder: Holder,
                state: str = "running", *, fence_floor: int = 0) -> Outcome:
        """Take ``key`` if free; ``fence_floor`` (a quorum's proposal) lifts the fencing counter."""
        reply = self._call(self._acquire, 2, key, fence_key, token, ttl_ms, holder.task_id, holder.host,
                           holder.pid, holder.since_ms, holder.heartbeat_ms, state, *_floor(fence_floor))
        outcome = _outcome(reply)
        assert outcome is not None
        return outcome

    def acquire_soon(self, key: str, fence_key: str, token: str, ttl_ms: int, holder: Holder,
                     state: str = "running") -> Callable[[], Outcome]:
        """Send an acquire now and read its answer when the returned function is called.

        A publisher builds its message meanwhile, so the round trip costs it little.
        Errors may come from either call; a lost answer is asked again on the client's path.
        """
        args = (key, fence_key, token, ttl_ms, holder.task_id, holder.host, holder.pid, holder.since_ms,
                holder.heartbeat_ms, state)
        if self._lane is None:
            outcome = self.acquire(key, fence_key, token, ttl_ms, holder, state)
            return lambda: outcome
        try:
            pending = self._lane.begin(pack(b"EVALSHA", self._acquire.sha, 2, *args))
        except CONNECTION_ERRORS:
            fallback = _outcome(self._evalsha(self._acquire, *args, numkeys=2))
            return lambda: fallback  # type: ignore[return-value]

        def answer() -> Outcome:
            try:
                reply = pending.result()
            except NoScriptError:
                reply = self._evalsha(self._acquire, *args, numkeys=2)  # loads the script
            except CONNECTION_ERRORS:
                reply = self._evalsha(self._acquire, *args, numkeys=2)
            outcome = _outcome(reply)
            assert outcome is not None
            return outcome

        return answer

    def adopt(self, queued_key: str, key: str, fence_key: str, queued_token: str, token: str,
              ttl_ms: int, holder: Holder, *, fence_floor: int = 0) -> Optional[Outcome]:
        """Turn an enqueue lock handed over by token into a running lock; ``None`` if it is not ours."""
        reply = self._call(self._adopt, 3, queued_key, key, fence_key, queued_token, token, ttl_ms,
                           holder.task_id, holder.host, holder.pid, holder.since_ms, holder.heartbeat_ms,
                           *_floor(fence_floor))
        return _outcome(reply)

    def requeue(self, key: str, token: str, ttl_ms: int) -> bool:
        """Hand a running lock back to the queue (same token) for the next delivery to adopt."""
        return bool(self._requeue(keys=(key,), args=(token, ttl_ms)))

    def raise_fence(self, fence_key: str, floor: int) -> int:
        """Move the fencing counter up to at least ``floor``; returns its value afterwards."""
        return int(self._raise_fence(keys=(fence_key,), args=(floor,)))

    #: Whether :meth:`release` can note completions and :meth:`completed` can find them.
    records_completions = True

    def release_nowait(self, key: str, token: str, done: Callable[[Any], object],
                       completion: Optional[Completion] = None) -> None:
        """Compare-and-delete without waiting for the reply (see :mod:`.lane`); ``done`` gets it later."""
        if self._lane is None:
            done(self.release(key, token, completion))
            return
        numkeys, *keys_and_args = _release_keys_and_args(key, token, completion)

        def settled(reply: Any) -> None:
            if isinstance(reply, CONNECTION_ERRORS):
                # Written to a connection that broke: maybe never applied. Send it again; a 0 now
                # may only mean the first one was applied, so it is no sign of a lost lock.
                try:
                    self._evalsha(self._release, *keys_and_args, numkeys=numkeys)
                    reply = True
                except CONNECTION_ERRORS as exc:
                    reply = exc
            done(bool(reply) if not isinstance(reply, BaseException) else reply)

        try:
            self._lane.send(pack(b"EVAL", self._release_text, numkeys, *keys_and_args), settled)
        except CONNECTION_ERRORS:
            done(self.release(key, token, completion))  # the lane's connection broke: once more, the usual way

    @property
    def owes_replies(self) -> bool:
        """Whether replies of :meth:`release_nowait` calls are still unread."""
        return self._lane is not None and self._lane.pending > 0

    def drain(self) -> None:
        """Read the replies of earlier :meth:`release_nowait` calls."""
        if self._lane is not None:
            self._lane.drain()

    def release(self, key: str, token: str, completion: Optional[Completion] = None) -> bool:
        """Compare-and-delete: never removes a lock held under another token (``completion``: see
        :data:`Completion`)."""
        numkeys, *keys_and_args = _release_keys_and_args(key, token, completion)
        return bool(self._call(self._release, numkeys, *keys_and_args))

    def mark_redelivered(self, key: str, task_id: str) -> bool:
        """Note on the lock that a redelivered copy of its holder's message met it."""
        return bool(self._call(self._mark_redelivered, 1, key, task_id))

    def completed(self, done_key: str, task_id: str) -> bool:
        """Whether a release noted that ``task_id`` ran to the end (and it is still remembered)."""
        return self.client.zscore(done_key, task_id) is not None

    def release_many(self, items: Sequence[Tuple[str, str]]) -> List[bool]:
        """Release several (key, token) pairs in one pipelined round trip."""
        if not items:
            return []
        pipe = self.client.pipeline(transaction=False)
        for key, token in items:
            self._release(keys=(key,), args=(token,), client=pipe)
        return [bool(r) for r in pipe.execute()]

    def renew(self, items: Sequence[Tuple[str, str, int]]) -> List[bool]:
        """Compare-and-extend every (key, token, ttl_ms) in one round trip."""
        if not items:
            return []
        keys = [key for key, _, _ in items]
        args = [token for _, token, _ in items] + [ttl for _, _, ttl in items]
        return [bool(r) for r in self._evalsha(self._renew, *keys, *args, numkeys=len(keys))]

    def close(self) -> None:
        if self._lane is not None:
            try:
                self._lane.close()
            except redis.RedisError:
                pass
        if self._pool is not None:
            self._pool.disconnect()

    def holder(self, key: str) -> Optional[dict]:
        """The lock's fields with its remaining ttl, for diagnostics; ``None`` when free."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(key)
        pipe.pttl(key)
        fields, pttl = pipe.execute()
        if not fields:
            return None
        info = {_text(k): _text(v) for k, v in fields.items()}
        info["pttl"] = str(pttl)
        return info

    @contextmanager
    def release_events(self, key: str) -> Iterator["ReleaseEvents"]:
        """Subscribe to ``key``'s release announcements for the duration of the block.

        Subscribe first, then try to acquire: a release between the two is not missed.
        """
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(key)
            yield ReleaseEvents(pubsub)
        finally:
            try:
                pubsub.close()
            except Exception:  # pragma: no cover - closing a broken connection
                pass


class ReleaseEvents:
    """A subscription to one lock's release announcements."""

    def __init__(self, pubsub: Any) -> None:
        self._pubsub = pubsub

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; ``True`` when a release was announced."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            # An ignored subscribe confirmation also returns None early: loop to the deadline.
            message = self._pubsub.get_message(timeout=remaining)
            if message is not None and message.get("type") == "message":
                return True
