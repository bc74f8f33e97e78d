"""Release announcements of a quorum's lock: a subscription on every reachable master."""

from __future__ import annotations

import select
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, List

import redis

from .redis_backend import RedisBackend

__all__ = ["subscribed", "QuorumReleaseEvents"]


@contextmanager
def subscribed(node: RedisBackend, key: str) -> Iterator[Any]:
    pubsub = node.client.pubsub(ignore_subscribe_messages=True)
    try:
        pubsub.subscribe(key)
        yield pubsub
    finally:
        try:
            pubsub.close()
        except Exception:  # pragma: no cover
            pass


class QuorumReleaseEvents:
    """Release announcements from several masters; the first one wakes the waiter."""

    def __init__(self, pubsubs: List[Any]) -> None:
        self._pubsubs = pubsubs
        self._never = threading.Event()

    def _announced(self) -> bool:
        for pubsub in self._pubsubs:
            try:
                while True:
                    message = pubsub.get_message(timeout=0)
                    if message is None:
                        break
                    if message.get("type") == "message":
                        return True
            except (redis.RedisError, OSError):
                continue
        return False

    def _sockets(self) -> List[Any]:
        socks = []
        for pubsub in self._pubsubs:
            sock = getattr(getattr(pubsub, "connection", None), "_sock", None)
            if sock is not None:
                socks.append(sock)
        return socks

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; ``True`` when any master announced the release."""
        deadline = time.monotonic() + timeout
        while True:
            if self._announced():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            socks = self._sockets()
            if not socks:  # no master reachable: the caller's next acquire will say so
                self._never.wait(remaining)
                return False
            try:
                select.select(socks, [], [], min(remaining, 0.5))
            except (OSError, ValueError):
                self._never.wait(min(remaining, 0.05))
