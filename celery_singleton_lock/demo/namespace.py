"""The demo's keys on a Redis it may share: claim the namespace for one run, keep the claim, delete the keys.

A run owns its namespace through an ``owner`` key that expires unless renewed, so a
second run on the same Redis and namespace is refused while the first is alive,
and a crashed run's keys are deleted by the next one. Beside a worker and beat
that the demo did not start (``--external``), only the demo's own records are
touched: the broker's queues and the locks belong to that worker. Only keys that start with
one of the prefixes the demo writes under are deleted, never another key of the namespace.
"""

from __future__ import annotations

import os
import time
from typing import Collection, Iterator, List

import redis

from .config import DemoConfig

__all__ = ["Namespace"]

#: Seconds the claim lives without renewal, and how often it is renewed.
CLAIM_TTL = 30
RENEW_EVERY = 5.0


class Namespace:
    """The keys of one demo run under ``config.namespace``."""

    def __init__(self, client: "redis.Redis", config: DemoConfig, external: bool) -> None:
        self.client = client
        self.config = config
        self.external = external
        self.claimed = False
        self._renewed = 0.0

    @property
    def pattern(self) -> str:
        """What SCAN matches: the namespace, or beside a worker and beat we did not start, our records."""
        return self.config.key("*") if self.external else f"{self.config.namespace}:*"

    def _ours(self, key: str) -> bool:
        return key.startswith(self.config.key("") if self.external else self.config.key_prefixes)

    def _keys(self) -> Iterator[str]:
        return (key for key in self.client.scan_iter(match=self.pattern, count=500) if self._ours(key))

    def claim(self) -> int:
        """Own the namespace for this run (``RuntimeError`` when another live run owns it), then
        delete what an earlier run left; returns how many keys that was."""
        owner = self.config.key("owner")
        if not self.client.set(owner, str(os.getpid()), nx=True, ex=CLAIM_TTL):
            raise RuntimeError(f"another demo run (pid {self.client.get(owner)!s}) is using namespace "
                               f"{self.config.namespace!r} on this Redis; wait for it or set CSL_DEMO_NAMESPACE")
        self.claimed = True
        return self.delete(keep={owner})

    def keep_claim(self) -> None:
        """Renew the claim, at most every few seconds (called as often as the view refreshes)."""
        if time.monotonic() - self._renewed > RENEW_EVERY:
            self.client.expire(self.config.key("owner"), CLAIM_TTL)
            self._renewed = time.monotonic()

    def delete(self, keep: Collection[str] = ()) -> int:
        """Delete the run's keys but ``keep``; returns how many were deleted."""
        deleted = 0
        batch: List[str] = []
        for key in self._keys():
            if key in keep:
                continue
            batch.append(key)
            if len(batch) >= 500:
                deleted += self.client.unlink(*batch)
                batch = []
        if batch:
            deleted += self.client.unlink(*batch)
        return deleted

    def left(self) -> int:
        """How many of the run's keys are there."""
        return sum(1 for _ in self._keys())
