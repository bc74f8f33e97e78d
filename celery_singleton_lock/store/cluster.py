"""The lock protocol on a Redis Cluster, through redis-py's ``RedisCluster``.

Everything one lock touches (lock key, enqueue key, its bucket's fencing counter,
and the Pub/Sub channel named like the lock key) carries its bucket's hash tag,
``{task:b}`` (:mod:`.keys`), so each script runs on one slot while one task's
locks spread over sixteen slots and ``MOVED``/``ASK``
redirections, ``TRYAGAIN`` during a migration and a master's failover are handled
by redis-py's cluster client.

What differs from one Redis: a script may only touch keys of one slot, so the
renewal of many locks is sent as one ``RENEW`` per slot, pipelined per master by
redis-py's cluster pipeline (one round trip per master that holds any of them);
a batch refused mid-migration (``TRYAGAIN``: its keys are split between two
masters) is retried one key at a time, which redis-py redirects with ``ASK``. A key's
places (:mod:`.places`) carry its lock key's hash tag: one slot, like the lock itself.

A master that dies is asked again on a reloaded slot map until its replica serves the
slot, within each call's budget (:mod:`.cluster_routing`).
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Optional, Any, Dict, Iterator, List, Sequence, Tuple

from redis.cluster import RedisCluster
from redis.exceptions import RedisError

from . import places, redis_places
from .places import renew_args
from .redis_backend import RedisBackend
from .cluster_routing import BUDGET, ClusterSlotUnavailable, healed, reloading
from .events import LineEvents, PubSubReleaseEvents
from .redis_calls import release_call

__all__ = ["ClusterBackend"]


class ClusterBackend(RedisBackend):
    """A :class:`RedisBackend` over a ``redis.cluster.RedisCluster`` client."""

    client: RedisCluster
    pipelined_renewals = False

    def _script(self, script: Any, keys: Sequence[Any], args: Sequence[Any], grants: bool = False,
                budget: float = BUDGET) -> Any:
        return healed(self.grants if grants else self.client,
                      lambda: super(ClusterBackend, self)._script(script, keys, args, grants),
                      keys[0] if keys else None, budget)

    def _set_nx(self, key: str, value: str, ttl_ms: int, get: bool) -> Any:
        return healed(self.grants, lambda: super(ClusterBackend, self)._set_nx(key, value, ttl_ms, get), key)

    def _pttl(self, key: str) -> Any:
        return healed(self.client, lambda: super(ClusterBackend, self)._pttl(key), key)

    def await_release(self, key: str) -> bool:
        return healed(self.client, lambda: super(ClusterBackend, self).await_release(key), key)

    @contextmanager
    def release_events(self, key: str) -> Iterator[PubSubReleaseEvents]:
        with reloading(self.client), super().release_events(key) as events:
            yield events

    @contextmanager
    def line_events(self, key: str, token: str) -> Iterator[LineEvents]:
        with reloading(self.client), super().line_events(key, token) as events:
            yield events

    def _batched(self, script: Any, calls: Sequence[Tuple[Sequence[str], Sequence[Any]]]) -> List[Any]:
        """One script call per entry (each within one slot), pipelined per master.

        An entry the pipeline could not run (redirected mid-migration, script not
        loaded on a new master) is run again on its own through the cluster client,
        which follows ``MOVED``/``ASK``, waits out ``TRYAGAIN`` and loads the script.
        """
        pipe = self.client.pipeline()
        for keys, args in calls:
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        try:
            replies = pipe.execute(raise_on_error=False)
        except RedisError:
            replies = [None] * len(calls)
        out: List[Any] = []
        deadline = time.monotonic() + BUDGET  # one budget for the batch, not one per entry
        for (keys, args), reply in zip(calls, replies):
            if reply is None or isinstance(reply, Exception):
                reply = self._script(script, keys, args, budget=max(deadline - time.monotonic(), 0.0))
            out.append(reply)
        return out

    def release_many(self, items: Sequence[Tuple[str, ...]]) -> List[bool]:
        if not items:
            return []
        plain, placed = places.split(items)
        locks = [release_call(items[i][0], items[i][1], None, *items[i][2:]) for i in plain]
        rooms = [redis_places.release_call(items[i][0], items[i][1], None, *items[i][2:]) for i in placed]
        return places.merge(len(items), (plain, self._batched(self._release, locks) if locks else []),
                            (placed, self._batched(self._places.release_script, rooms) if rooms else []))

    def _renew_places(self, items: Sequence[Tuple[Any, ...]]) -> List[Any]:
        """One ``PLACE_RENEW`` per key (a key's places share its slot), pipelined per master."""
        if not items:
            return []
        replies = self._batched(self._places.renew_script, [places.renew_args([item]) for item in items])
        return [reply[0] for reply in replies]

    def _renew_locks(self, items: Sequence[Tuple[Any, ...]]) -> List[Any]:
        """Compare-and-extend: one ``RENEW`` per slot, pipelined per master."""
        if not items:
            return []
        by_slot: Dict[int, List[int]] = defaultdict(list)
        for index, item in enumerate(items):
            by_slot[self.client.keyslot(item[0])].append(index)
        groups = list(by_slot.values())
        calls = [renew_args([items[i] for i in group]) for group in groups]
        results: List[bool] = [False] * len(items)
        for group, reply in zip(groups, self._renew_batches(calls)):
            for index, ok in zip(group, reply):
                results[index] = bool(ok)
        return results

    def _renew_batches(self, calls: List[Tuple[List[str], List[Any]]]) -> List[List[Any]]:
        try:
            return self._batched(self._renew, calls)
        except ClusterSlotUnavailable:
            raise  # a master that stayed away the whole budget: key by key would only wait longer
        except RedisError:
            # A slot's keys are split between two masters (migration in progress): key by key.
            out = []
            for keys, args in calls:
                n = len(keys)
                out.append([self._script(self._renew, [keys[i]], args[i::n])[0]
                            for i in range(n)])
            return out

    def epoch(self) -> Optional[str]:
        return None  # many servers: a restarted one is noticed at the next renewal

