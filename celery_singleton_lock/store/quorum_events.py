"""Release announcements of a quorum's lock: a subscription on every reachable master.

As on one Redis (:mod:`.events`), a waiter subscribes, asks the holder to
announce its release (on every master that answers), then blocks; the first
master's announcement wakes it.
"""

from __future__ import annotations

import select
import threading
import time
from typing import Any, Callable, List

import redis

from .events import Subscription, subscribed

__all__ = ["subscribed", "QuorumReleaseEvents"]


class QuorumReleaseEvents:
    """Release announcements from several masters; the first one wakes the waiter.

    ``ask`` asks every master to announce the release and answers whether any may still hold it;
    the masters' subscriptions are confirmed within ``confirm_s`` in all (a master that does not
    answer in time is one a quorum does without).
    """

    def __init__(self, pubsubs: List[Any], ask: Callable[[], bool], confirm_s: float) -> None:
        self._subscriptions = [Subscription(pubsub) for pubsub in pubsubs]
        self._ask = ask
        self._confirm_s = confirm_s
        self._never = threading.Event()

    def _announced(self) -> bool:
        announced = False
        for subscription in self._subscriptions:
            try:
                subscription.read(0.0)
            except (redis.RedisError, OSError):
                continue
            announced = subscription.take() or announced
        return announced

    def _sockets(self) -> List[Any]:
        socks = []
        for subscription in self._subscriptions:
            sock = getattr(getattr(subscription.pubsub, "connection", None), "_sock", None)
            if sock is not None:
                socks.append(sock)
        return socks

    def ask(self) -> bool:
        """Ask the holder to announce its release; ``False`` when no master holds the lock."""
        deadline = time.monotonic() + self._confirm_s
        for subscription in self._subscriptions:
            try:
                subscription.confirm(max(deadline - time.monotonic(), 0.0))
            except (redis.RedisError, OSError):
                continue
        return self._ask()

    def listen(self, timeout: float) -> bool:
        """As :meth:`wait`: a quorum keeps no line (see line.py), its waiters ask as they wait."""
        return self.wait(timeout)

    def wait(self, timeout: float) -> bool:
        """Ask, then block up to ``timeout`` seconds; ``True`` when any master announced the release."""
        deadline = time.monotonic() + timeout
        if self._announced():
            return True
        if not self.ask():
            return self._announced()  # free everywhere: nothing more will be announced
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
