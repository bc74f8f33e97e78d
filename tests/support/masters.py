"""Quorum masters in memory: each keeps its locks and fencing counters in dicts and can be set down.

They let the quorum's decisions be tested, and searched, without a server. No expiry: a test
releases or drops a lock itself.
"""

from __future__ import annotations

from typing import Dict, Sequence, Tuple

import redis

from celery_singleton_lock.store import Conflict, Grant, Holder, RedisBackend
from celery_singleton_lock.store.quorum import QuorumBackend

HOLDER = Holder(task_id="me", host="h", pid=1, since_ms=0, heartbeat_ms=1000)


class MemoryMaster(RedisBackend):
    """A master's lock protocol in memory (no expiry: tests release explicitly)."""

    def __init__(self, counter: int = 0) -> None:  # no redis client
        self.locks: Dict[str, Tuple[str, str]] = {}
        self.counters: Dict[str, int] = {}
        self.start_counter = counter
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise redis.exceptions.ConnectionError("master down")

    def acquire(self, key, token, ttl_ms, holder, state="running", limit=None):
        self._check()
        if key in self.locks:
            held_token, task_id = self.locks[key]
            return Conflict(task_id=task_id, host="h", pid=1, since_ms=0, pttl_ms=ttl_ms, heartbeat_ms=1000,
                            state="running", same_token=held_token == token)
        self.locks[key] = (token, holder.task_id)
        return Grant()

    def fence(self, key, fence_key, token, *, floor=0):
        self._check()
        if self.locks.get(key, (None,))[0] != token:
            return None
        fence = max(self.counters.get(fence_key, self.start_counter) + 1, floor)
        self.counters[fence_key] = fence
        return fence

    def raise_fence(self, fence_key, floor):
        self._check()
        self.counters[fence_key] = max(self.counters.get(fence_key, self.start_counter), floor)
        return self.counters[fence_key]

    def release(self, key, token, completion=None, state="running"):
        self._check()
        if self.locks.get(key, (None,))[0] == token:
            del self.locks[key]
            return True
        return False

    def release_many(self, items):
        return [self.release(key, token) for key, token, *_ in items]

    def renew(self, items):
        self._check()
        return [self.locks.get(key, (None,))[0] == token for key, token, _ in items]

    def holder(self, key):
        self._check()
        return {"token": self.locks[key][0]} if key in self.locks else None

    def close(self):
        pass


def quorum(masters: Sequence[MemoryMaster]) -> QuorumBackend:
    return QuorumBackend(list(masters), node_timeout=2.0, split_retry_delay=0.001)
