"""Shared pieces of the topology tests: point the test app at a topology, run a duplicate storm."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import redis

from celery_singleton_lock.store import Holder
from celery_singleton_lock.store import Grant, KeyLayout, new_token
from tests.integration.helpers import drop_runtime, overlaps, records
from tests.support.workers import Worker

HOLDER = Holder(task_id="test", host="test", pid=0, since_ms=0, heartbeat_ms=1000)


def worker_env(url: Union[str, Sequence[str]], options: Optional[Mapping[str, Any]] = None) -> Dict[str, str]:
    env = {"CSL_LOCK_URLS": ",".join(url)} if not isinstance(url, str) else {"CSL_LOCK_URL": url, "CSL_LOCK_URLS": ""}
    env["CSL_LOCK_OPTIONS"] = json.dumps(dict(options or {}))
    return env


@contextmanager
def app_on(proj: Any, url: Union[str, Sequence[str]], options: Optional[Mapping[str, Any]] = None) -> Iterator[Any]:
    """The test process's app locks on ``url`` for the block (as the workers do)."""
    conf = proj.app.conf
    saved = conf.singleton_lock_url, conf.get("singleton_lock_transport_options")
    drop_runtime(proj.app)
    conf.singleton_lock_url = list(url) if not isinstance(url, str) else url
    conf.singleton_lock_transport_options = dict(options or {})
    try:
        yield proj
    finally:
        drop_runtime(proj.app)
        conf.singleton_lock_url, conf.singleton_lock_transport_options = saved


@contextmanager
def workers(test_env: Mapping[str, str], env: Mapping[str, str], queue: str, count: int = 2,
            concurrency: int = 2) -> Iterator[List[Worker]]:
    """Workers consuming only ``queue``, so workers of two topologies never serve one storm."""
    started: List[Worker] = []
    try:
        for i in range(count):
            worker = Worker("tests.integration.proj_topo", dict(test_env, **env),
                            name=f"topo{i}-{new_token()[:6]}", concurrency=concurrency, extra_args=["-Q", queue])
            started.append(worker)
            worker.start()
        yield started
    finally:
        for worker in started:
            worker.stop()


def storm(proj: Any, events: redis.Redis, queue: str, tasks: int = 40, keys: int = 5, duration: float = 0.25,
          timeout: float = 60) -> List[dict]:
    """Publish a duplicate storm, wait for every result, and check that no two runs of one key overlapped."""
    events.delete("intervals", "started")
    results = [proj.storm.apply_async((f"set-{i % keys}",), {"seq": i, "duration": duration}, queue=queue)
               for i in range(tasks)]
    outcomes = [r.get(timeout=timeout) for r in results]
    intervals = records(events)
    assert overlaps(intervals) == [], "two holders of one lock ran at once"
    assert {e["key"] for e in intervals} == {f"set-{i}" for i in range(keys)}
    assert len([o for o in outcomes if o is None]) == tasks - len(intervals)
    return intervals


def successive_fences(store: Any, key: str, fence_key: str, count: int, between=None) -> List[int]:
    """Take and release ``key`` ``count`` times with fresh tokens; the fences handed out, in order."""
    fences = []
    for i in range(count):
        if between is not None:
            between(i)
        token = new_token()
        outcome = store.acquire(key, token, 5000, HOLDER)
        assert isinstance(outcome, Grant), outcome
        fences.append(store.fence(key, fence_key, token))
        assert store.release(key, token)
    return fences


def strictly_increasing(values: Sequence[int]) -> bool:
    return all(b > a for a, b in zip(values, values[1:]))


def elapsed_since(start: float) -> float:
    return time.monotonic() - start


class TopologyBench:
    """The lock-store contract's bench on a store of a topology (the server's clock: a bounded wait),
    its keys under a prefix of their own (``prefix`` and a random part)."""

    short_ms = 100

    def __init__(self, backend: Any, prefix: str) -> None:
        self.backend = backend
        self._layout = KeyLayout(f"{prefix}-{new_token()[:6]}")
        self._names = iter(range(1_000))

    def keys(self) -> Any:
        return self._layout.keys("proj.sync", f"d{next(self._names)}", "queued")

    def elapse(self, ms: int) -> None:
        time.sleep(ms / 1000.0)
