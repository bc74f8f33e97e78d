"""Every answer the result backend stored, overwritten ones included.

Celery's Redis result backend publishes each result it stores on a channel named after its key
(``celery-task-meta-<id>``). The latest-wins rows listen from before the workers start, so an
answer a later one overwrote (a call answered ``None`` as superseded, then by its own body) is
still seen.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from typing import Dict, List

import redis

from .leftovers import stored_meta

__all__ = ["Answers", "final_results"]

_PREFIX = "celery-task-meta-"


class Answers:
    """A listener thread; :meth:`close` stops it and returns what it heard, by task id."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        self.pubsub.psubscribe(f"{_PREFIX}*")
        self.heard: Dict[str, List[dict]] = defaultdict(list)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="faults-answers", daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            message = self.pubsub.get_message(timeout=0.5)
            if not message or message.get("type") != "pmessage":
                continue
            try:
                meta = json.loads(message["data"])
            except ValueError:
                continue
            channel = message["channel"].decode()
            self.heard[channel[len(_PREFIX):]].append({"status": meta.get("status"), "result": meta.get("result")})

    def close(self) -> Dict[str, List[dict]]:
        self._stop.set()
        self._thread.join(timeout=5)
        self.pubsub.close()
        self.client.close()
        return dict(self.heard)


def final_results(url: str, task_ids: List[str]) -> Dict[str, object]:
    """Each id's stored result at the end (ids with no result are absent)."""
    return {tid: meta.get("result") for tid, meta in stored_meta(url, task_ids).items()}
