"""A duplicate storm through real workers whose lock store is another Redis (an ACL user, TLS only).

The broker, the result backend and the bodies' records stay on the suite's Redis;
only ``singleton_lock_url`` (and its transport options) point elsewhere, in the
workers (through their environment) and in the publishing test process alike.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Mapping, Optional

import redis

from tests.integration.helpers import overlaps, records, wait_unlocked
from tests.support.waits import wait_for

__all__ = ["worker_env", "run_storm"]


def worker_env(url: str, transport_options: Optional[Mapping[str, Any]] = None) -> Dict[str, str]:
    """What a worker (or the CLI) of the test app needs in its environment to use this lock store."""
    env = {"CSL_LOCK_URL": url}
    if transport_options:
        env["CSL_LOCK_TRANSPORT_OPTIONS"] = json.dumps(dict(transport_options))
    return env


def run_storm(proj: Any, events: redis.Redis, lock_store: redis.Redis, keys: int = 4, copies: int = 6,
              refused: Optional[Callable[[], List[str]]] = None) -> None:
    """Bursts of identical calls: no two runs of one key overlap, the duplicates are skipped, the locks are
    released. ``lock_store`` reads the lock store (decoded replies; it must be new to the storm task);
    ``refused`` (what the lock store refused so far) fails the storm at once instead of after the tasks'
    retries time out."""
    calls = [f"storm-{k}" for k in range(keys) for _ in range(copies)]  # each key's copies back to back
    results = [proj.storm.delay(key, duration=0.3) for key in calls]

    def settled() -> bool:
        denied = refused() if refused is not None else []
        assert not denied, f"the lock store refused: {denied}"
        return all(r.ready() for r in results)

    wait_for(settled, 90, interval=0.2, what="every call of the storm to finish")
    outcomes = [r.get(timeout=5) for r in results]

    intervals = records(events)
    assert overlaps(intervals) == []
    assert {e["key"] for e in intervals} == set(calls)
    skipped = [o for o in outcomes if o is None]
    assert skipped and len(skipped) == len(calls) - len(intervals)  # duplicates ended SUCCESS with None
    # Every run's fence came from this store: distinct fences, the last of which a bucket's counter keeps.
    fences = sorted(e["fence"] for e in intervals)
    assert len(set(fences)) == len(fences)
    counters = [lock_store.get(key) for key in
                lock_store.scan_iter(f"{proj.app.conf.singleton_lock_prefix}:{{{proj.storm.name}:?}}:fence")]
    assert max(int(value) for value in counters) == fences[-1]
    wait_unlocked(lock_store, 5)
