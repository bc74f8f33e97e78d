"""What is left after a run: result states, messages still in the broker, locks, worker tracebacks."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Dict, Iterable, List, Set, Tuple

import redis

__all__ = ["stored_meta", "result_states", "broker_leftovers", "lock_leftovers", "tracebacks", "log_lines"]


def stored_meta(results_url: str, task_ids: List[str]) -> Dict[str, dict]:
    """Each id's stored meta in the Redis result backend (ids with no result are absent)."""
    client = redis.Redis.from_url(results_url)
    found: Dict[str, dict] = {}
    try:
        for first in range(0, len(task_ids), 500):
            chunk = task_ids[first:first + 500]
            for tid, raw in zip(chunk, client.mget([f"celery-task-meta-{t}" for t in chunk])):
                if raw:
                    found[tid] = json.loads(raw)
    finally:
        client.close()
    return found


def result_states(results_url: str, task_ids: List[str]) -> Dict[str, str]:
    """Each id's state in the Redis result backend (ids with no result are absent)."""
    return {tid: meta["status"] for tid, meta in stored_meta(results_url, task_ids).items()}


def _redis_queue(broker_url: str, queue: str) -> Tuple[int, Set[str]]:
    client = redis.Redis.from_url(broker_url)
    try:
        raw = client.lrange(queue, 0, -1) + list(client.hvals("unacked"))
    finally:
        client.close()
    ids: Set[str] = set()
    for item in raw:
        message = json.loads(item)
        if isinstance(message, list):  # unacked: [message, exchange, routing key]
            message = message[0]
        ids.add(message.get("headers", {}).get("id", ""))
    return len(raw), ids


def _amqp_queue(app: object, queue: str) -> Tuple[int, Set[str]]:
    with app.connection_for_write() as connection:  # type: ignore[attr-defined]
        channel = connection.channel()
        try:
            count = channel.queue_declare(queue=queue, passive=True).message_count
            channel.queue_delete(queue)
        finally:
            channel.close()
    return count, set()


def broker_leftovers(app: object, broker_url: str, queue: str) -> Tuple[int, Set[str]]:
    """Messages still queued (or unacknowledged) after the drain, and their task ids where readable."""
    if broker_url.startswith("amqp"):
        return _amqp_queue(app, queue)
    return _redis_queue(broker_url, queue)


def lock_leftovers(urls: Iterable[str], prefix: str = "faults") -> Dict[str, object]:
    """Locks left under the prefix (and the first few of their names), and keys without a TTL (fencing
    counters and the latest-wins rows' generation hashes apart: they are meant to stay, the hashes
    until their TTL)."""
    left: Dict[str, object] = {"locks_left": 0, "no_ttl": 0, "counters": 0, "generations": 0}
    names: List[str] = []
    for url in urls:
        client = redis.Redis.from_url(url, socket_timeout=5)
        try:
            for key in client.scan_iter(f"{prefix}:*", count=500):
                name = key.decode()
                if name.endswith(":fence"):
                    left["counters"] += 1
                    continue
                if name.endswith(":gen"):
                    left["generations"] += 1
                elif not name.endswith(":done"):
                    left["locks_left"] += 1
                    names.append(f"{name} ({client.ttl(key)} s left)")
                if client.ttl(key) == -1:
                    left["no_ttl"] += 1
        finally:
            client.close()
    left["left_keys"] = names[:5]
    return left


def tracebacks(paths: Iterable[str]) -> Dict[str, int]:
    """Tracebacks in the worker logs, by the exception line that ends each."""
    found: Counter = Counter()
    for path in paths:
        try:
            lines = open(path, errors="replace").read().splitlines()
        except FileNotFoundError:
            continue
        for i, line in enumerate(lines):
            if "Traceback (most recent call last)" in line:
                ending = next((x for x in lines[i + 1:] if x and not x.startswith((" ", "\t"))), "?")
                found[re.sub(r"\d+", "N", re.sub(r"\s+", " ", ending))[:120]] += 1
    return dict(found)


def log_lines(paths: Iterable[str], text: str, most: int = 20) -> List[str]:
    """The worker log lines that name ``text`` (a lost message's id), for the report."""
    found: List[str] = []
    for path in paths:
        try:
            with open(path, errors="replace") as log:
                found += [line.rstrip()[:300] for line in log if text in line]
        except FileNotFoundError:
            continue
    return found[:most]
