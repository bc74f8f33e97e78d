"""The lock protocol on one Redis client (one server, Sentinel's master, or a Redis Cluster).

Each public method is one script call: EVALSHA through redis-py's registered
:class:`~redis.commands.core.Script`, which loads the script again on NOSCRIPT
(after a ``SCRIPT FLUSH`` or a restarted server). :meth:`RedisBackend.holder` is one
pipelined round trip of two reads, :meth:`RedisBackend.release_events` a Pub/Sub
subscription. The backend keeps no lock state of its own: who holds what lives
in Redis and in the caller's :class:`~.heartbeat.Lease`.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import redis
from redis.cluster import RedisCluster

from . import scripts
from .backend import NOT_OURS, Completion, Conflict, Grant, Holder, NotOurs, Outcome

__all__ = ["RedisBackend", "Client", "RestartWait"]

#: What a backend talks to: one Redis (or Sentinel's master), or a Redis Cluster.
Client = Union[redis.Redis, RedisCluster]


def holder_args(token: str, ttl_ms: int, holder: Holder) -> Tuple[Any, ...]:
    """The holder's ARGV as ACQUIRE and ADOPT read it after their tokens (see the .lua headers)."""
    return (token, ttl_ms, holder.task_id, holder.host, holder.pid, holder.since_ms, holder.heartbeat_ms)


def release_call(key: str, token: str, completion: Optional[Completion]) -> Tuple[Tuple[str, ...], Tuple[Any, ...]]:
    """RELEASE's KEYS and ARGV, with the completion note when one is asked for."""
    if completion is None:
        return (key,), (token,)
    return (key, completion.done_key), (token, completion.task_id, completion.remember_ms,
                                        1 if completion.always else 0)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _int_or_none(value: Any) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def floor_arg(fence_floor: int) -> Tuple[int, ...]:
    """The optional fencing floor ARGV (a quorum's proposal); nothing when there is none."""
    return (int(fence_floor),) if fence_floor > 0 else ()


def renew_args(items: Sequence[Tuple[Any, ...]]) -> Tuple[List[str], List[Any]]:
    """RENEW's KEYS and ARGV for ``(key, token, ttl_ms[, heartbeat_ms])`` items (heartbeat
    defaults to a third of the ttl, as a task's does)."""
    keys = [item[0] for item in items]
    args = ([item[1] for item in items] + [item[2] for item in items]
            + [item[3] if len(item) > 3 else item[2] // 3 for item in items])
    return keys, args


class RestartWait(redis.exceptions.ConnectionError):
    """The server started without its data less than a lease ago: no grant until every lock it
    may have lost has expired or been taken back by its live holder (an outage: it passes)."""

    def __init__(self, wait_ms: int) -> None:
        super().__init__(f"the lock store started without its data less than a lease ago: grants wait "
                         f"{wait_ms} ms more, until every lock it may have lost has expired or been taken back")
        self.wait_ms = wait_ms


def outcome(reply: Sequence[Any]) -> Union[Grant, Conflict, NotOurs]:
    """ACQUIRE's and ADOPT's reply: {1, fence}, {0, holder...}, {2} (not ours) or {3, ms} (raised:
    :class:`RestartWait`)."""
    status = int(reply[0])
    if status == 3:
        raise RestartWait(int(reply[1]))
    if status == 1:
        return Grant(fence=int(reply[1]))
    if status == 0:
        return Conflict(task_id=_text(reply[1]), host=_text(reply[2]), pid=_int_or_none(reply[3]),
                        since_ms=_int_or_none(reply[4]), pttl_ms=int(reply[5]),
                        heartbeat_ms=_int_or_none(reply[6]), state=_text(reply[7]), same_token=bool(int(reply[8])))
    return NOT_OURS


class RedisBackend:
    """:class:`~.backend.LockBackend` on one Redis client (or one Redis Cluster client)."""

    records_completions = True

    def __init__(self, client: Client) -> None:
        self.client = client
        self._acquire = client.register_script(scripts.ACQUIRE)
        self._release = client.register_script(scripts.RELEASE)
        self._mark_redelivered = client.register_script(scripts.MARK_REDELIVERED)
        self._renew = client.register_script(scripts.RENEW)
        self._adopt = client.register_script(scripts.ADOPT)
        self._requeue = client.register_script(scripts.REQUEUE)
        self._raise_fence = client.register_script(scripts.RAISE_FENCE)
        self._completed = client.register_script(scripts.COMPLETED)

    def acquire(self, key: str, fence_key: str, token: str, ttl_ms: int, holder: Holder,
                state: str = "running", *, fence_floor: int = 0) -> Outcome:
        """Take ``key`` if free; ``fence_floor`` (a quorum's proposal) lifts the fencing counter."""
        reply = self._acquire(keys=(key, fence_key),
                              args=(*holder_args(token, ttl_ms, holder), state, *floor_arg(fence_floor)))
        result = outcome(reply)
        assert not isinstance(result, NotOurs)
        return result

    def adopt(self, queued_key: str, key: str, fence_key: str, queued_token: str, token: str, ttl_ms: int,
              holder: Holder, *, fence_floor: int = 0) -> Union[Grant, Conflict, NotOurs]:
        """Turn an enqueue lock handed over by token into a running lock."""
        reply = self._adopt(keys=(queued_key, key, fence_key),
                            args=(queued_token, *holder_args(token, ttl_ms, holder), *floor_arg(fence_floor)))
        return outcome(reply)

    def requeue(self, key: str, token: str, ttl_ms: int) -> bool:
        return bool(self._requeue(keys=(key,), args=(token, ttl_ms)))

    def raise_fence(self, fence_key: str, floor: int) -> int:
        """Move the fencing counter up to at least ``floor`` (a quorum's second round)."""
        return int(self._raise_fence(keys=(fence_key,), args=(floor,)))

    def release(self, key: str, token: str, completion: Optional[Completion] = None) -> bool:
        keys, args = release_call(key, token, completion)
        return bool(self._release(keys=keys, args=args))

    def mark_redelivered(self, key: str, task_id: str) -> bool:
        return bool(self._mark_redelivered(keys=(key,), args=(task_id,)))

    def completed(self, done_key: str, task_id: str) -> bool:
        return bool(self._completed(keys=(done_key,), args=(task_id,)))

    def release_many(self, items: Sequence[Tuple[str, str]]) -> List[bool]:
        """One pipelined round trip for all of them."""
        if not items:
            return []
        pipe = self.client.pipeline(transaction=False)
        for key, token in items:
            self._release(keys=(key,), args=(token,), client=pipe)
        return [bool(r) for r in pipe.execute()]

    def renew(self, items: Sequence[Tuple[Any, ...]]) -> List[bool]:
        """All of them in one script call."""
        if not items:
            return []
        keys, args = renew_args(items)
        return [bool(r) for r in self._renew(keys=keys, args=args)]

    def epoch(self) -> Optional[str]:
        """The server's run id: a new one after every restart."""
        run_id = self.client.info("server").get("run_id")
        return str(run_id) if run_id else None

    def close(self) -> None:
        pool = getattr(self.client, "connection_pool", None)
        if pool is not None:
            pool.disconnect()
        else:
            self.client.close()

    def holder(self, key: str) -> Optional[Dict[str, str]]:
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
    def release_events(self, key: str) -> Iterator["PubSubReleaseEvents"]:
        """Subscribe to ``key``'s release announcements for the duration of the block.

        Subscribe first, then try to acquire: a release between the two is not missed.
        """
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(key)
            yield PubSubReleaseEvents(pubsub)
        finally:
            try:
                pubsub.close()
            except Exception:  # pragma: no cover - closing a broken connection
                pass


class PubSubReleaseEvents:
    """A subscription to one lock's release announcements (see :class:`~.backend.ReleaseEvents`)."""

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
