"""The history store: what the publisher sent and what every body and signal saw, as JSON lists.

Lists (in the history database): ``published`` (the publisher's calls), ``starts``,
``writes`` and ``ends`` (the bodies), ``conflicts`` and ``lost`` (the library's
signals); in the latest-wins rows also ``intents`` and ``sent`` (:mod:`.publisher`), all with
wall-clock times taken on this one machine.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import redis

__all__ = ["Recorder", "History", "load"]

LISTS = ("published", "starts", "writes", "ends", "conflicts", "lost", "intents", "sent")


class Recorder:
    """Appends records; one client per process (reopened after a fork)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._client: Optional[redis.Redis] = None

    def client(self) -> redis.Redis:
        if self._client is None or self._client.connection_pool.pid != os.getpid():
            self._client = redis.Redis.from_url(self.url, socket_timeout=10)
        return self._client

    def add(self, kind: str, record: Dict[str, Any]) -> None:
        assert kind in LISTS, kind
        self.client().rpush(kind, json.dumps(record))


@dataclass
class History:
    published: List[dict] = field(default_factory=list)
    starts: List[dict] = field(default_factory=list)
    writes: List[dict] = field(default_factory=list)
    ends: List[dict] = field(default_factory=list)
    conflicts: List[dict] = field(default_factory=list)
    lost: List[dict] = field(default_factory=list)
    intents: List[dict] = field(default_factory=list)  # the latest-wins publishers' calls, before apply_async
    sent: List[dict] = field(default_factory=list)  # ... once the broker took their messages


def load(url: str) -> History:
    client = redis.Redis.from_url(url)
    try:
        return History(**{kind: [json.loads(x) for x in client.lrange(kind, 0, -1)] for kind in LISTS})
    finally:
        client.close()
