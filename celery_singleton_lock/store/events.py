"""Release announcements on Redis Pub/Sub: what a waiter for a lock blocks on.

A release is published on the channel named like the lock key, and only when a
waiter asked for it (``lua/await.lua`` flags the lock's value; ``release.lua``
and ``requeue.lua`` publish when they find the flag): an uncontended release
publishes nothing. A waiter subscribes, reads the server's confirmation and
asks; every wait asks again (the holder may have changed) before it blocks. A
release after an ask is published on a channel the server already counts the
waiter on, so no announcement is missed; a lock found free when asked has
nothing to announce, and the waiter is told at once.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Set

__all__ = ["subscribed", "line_subscribed", "Subscription", "PubSubReleaseEvents", "LineEvents", "CONFIRM_S"]

#: How long a waiter waits for the server to confirm its subscription before it asks anyway.
CONFIRM_S = 2.0


@contextmanager
def subscribed(client: Any, channel: str) -> Iterator[Any]:
    """A redis-py ``PubSub`` subscribed to ``channel`` for the block (closed after it)."""
    pubsub = client.pubsub()
    try:
        pubsub.subscribe(channel)
        yield pubsub
    finally:
        try:
            pubsub.close()
        except Exception:  # pragma: no cover - closing a broken connection
            pass


def arrived(pubsub: Any, timeout: float) -> Iterator[Any]:
    """The messages ``pubsub`` has, waiting up to ``timeout`` seconds for the first, then none more."""
    message = pubsub.get_message(timeout=max(timeout, 0.0))
    while message is not None:
        yield message
        message = pubsub.get_message(timeout=0.0)


class Subscription:
    """One ``PubSub``'s news: whether the server confirmed it, and whether a release was announced."""

    def __init__(self, pubsub: Any) -> None:
        self.pubsub = pubsub
        self.confirmed = False
        self.announced = False

    def read(self, timeout: float) -> None:
        """Read what has arrived, waiting up to ``timeout`` seconds for the first message."""
        for message in arrived(self.pubsub, timeout):
            kind = message.get("type")
            if kind == "subscribe":
                self.confirmed = True
            elif kind == "message":
                self.announced = True

    def confirm(self, limit: float = CONFIRM_S) -> None:
        """Wait (up to ``limit`` seconds) until the server counts this subscription."""
        deadline = time.monotonic() + limit
        while not self.confirmed:
            self.read(max(deadline - time.monotonic(), 0.0))
            if time.monotonic() >= deadline:
                return  # a slow server: ask anyway; the holder's TTL still bounds the wait

    def take(self) -> bool:
        """Whether a release was announced since the last call."""
        announced, self.announced = self.announced, False
        return announced


class PubSubReleaseEvents:
    """A subscription to one lock's release announcements (see :class:`~.backend.ReleaseEvents`).

    ``ask`` runs the store's ``AWAIT`` and answers whether the lock is held.
    """

    def __init__(self, pubsub: Any, ask: Callable[[], bool]) -> None:
        self._subscription = Subscription(pubsub)
        self._ask = ask

    def ask(self) -> bool:
        """Ask the holder to announce its release; ``False`` when the lock is free."""
        self._subscription.confirm()
        return self._ask()

    def listen(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds without asking (a waiter in line asked with its ask, once
        the server counted its subscription); ``True`` when a release was announced."""
        deadline = time.monotonic() + timeout
        subscription = self._subscription
        subscription.confirm()
        while not subscription.take():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            subscription.read(remaining)
        return True

    def wait(self, timeout: float) -> bool:
        """Ask, then block up to ``timeout`` seconds; ``True`` when a release was announced."""
        deadline = time.monotonic() + timeout
        subscription = self._subscription
        subscription.read(0.0)
        if subscription.take():
            return True
        if not self.ask():
            subscription.read(0.0)  # a release announced just before the ask found the lock free
            return subscription.take()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return subscription.take()
            subscription.read(remaining)
            if subscription.take():
                return True


def _name(channel: Any) -> str:
    return channel.decode("utf-8", "surrogateescape") if isinstance(channel, bytes) else str(channel)


class LineEvents:
    """A waiter's news while in line (:mod:`.line`), on one ``PubSub``: its own channel always, on
    which it is told that it became one of the first in line; the key's release channel only while
    it is one of those, so that a release wakes the first waiters alone, however long the line."""

    def __init__(self, pubsub: Any, key: str, own: str) -> None:
        self.pubsub = pubsub
        self._key = key
        self._own = own
        self._confirmed: Set[str] = set()
        self._on_key = True  # subscribed to both at first (see :func:`line_subscribed`)
        self._announced = False

    def read(self, timeout: float) -> None:
        """Read what has arrived, waiting up to ``timeout`` seconds for the first message."""
        for message in arrived(self.pubsub, timeout):
            kind = message.get("type")
            if kind == "subscribe":
                self._confirmed.add(_name(message.get("channel")))
            elif kind == "message":
                self._announced = True

    def confirm(self, limit: float = CONFIRM_S) -> None:
        """Wait (up to ``limit`` seconds) until the server counts every subscription, before an ask."""
        deadline = time.monotonic() + limit
        wanted = {self._own, self._key} if self._on_key else {self._own}
        while not wanted <= self._confirmed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return  # a slow server: ask anyway; the waiter asks again within a third of its lease
            self.read(remaining)

    def follow(self, first: bool) -> bool:
        """Listen for the key's releases while this waiter is among the first in line, not otherwise;
        ``True`` when it just began to: it asks again before it blocks (a release between its last
        ask and the subscription was not heard)."""
        if first == self._on_key:
            return False
        self._on_key = first
        if not first:
            self.pubsub.unsubscribe(self._key)
            self._confirmed.discard(self._key)
            return False
        self.pubsub.subscribe(self._key)
        self.confirm()
        return True

    def listen(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; ``True`` when a release or this waiter's turn was announced."""
        deadline = time.monotonic() + timeout
        while not self._announced:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.read(remaining)
        self._announced = False
        return True


@contextmanager
def line_subscribed(client: Any, key: str, own: str) -> Iterator[LineEvents]:
    """A waiter's :class:`LineEvents` for the block: subscribed to the key's channel and its own,
    both counted by the server before it first asks (so no release after that ask is missed)."""
    with subscribed(client, key) as pubsub:
        pubsub.subscribe(own)
        events = LineEvents(pubsub, key, own)
        events.confirm()
        yield events
