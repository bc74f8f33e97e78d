"""Heartbeat cost with 1, 100 and 10,000 held locks, and key derivation cost.

Renewal: the locks are taken for real (pipelined), then (a) a :class:`Renewer`
holds all of them for a few short periods and we count its round trips per
period, and (b) ``RedisBackend.renew`` over all of them is timed in interleaved
rounds, as a ratio to renewing a single lock.

Keys: ``ArgumentKey`` for a few scalars and for a 1 MB argument, next to what
celery-once and celery-singleton compute for the same call.
"""

from __future__ import annotations

import time
import timeit
from typing import Callable, Dict, List, Sequence

from celery_singleton_lock.calls.arguments import ArgumentKey
from celery_singleton_lock.store import KeyLayout, Lease, RedisBackend, Renewer, connect
from celery_singleton_lock.store import Holder, new_token, record

from .stats import Series, interleave

__all__ = ["run_heartbeat", "run_keys"]


def _take(store: RedisBackend, layout: KeyLayout, count: int, ttl_ms: int) -> List[tuple]:
    holder = Holder(task_id="bench", host="bench", pid=1, since_ms=int(time.time() * 1000), heartbeat_ms=ttl_ms // 3)
    items = []
    pipe = store.client.pipeline(transaction=False)
    for i in range(count):
        key, token = layout.lock("hb", f"{count:05d}-{i:08x}"), new_token()
        pipe.set(key, record.encode(token, "running", ttl_ms, holder), nx=True, px=ttl_ms)  # pipelined set-up
        items.append((key, token, ttl_ms))
        if len(pipe) >= 1000:
            pipe.execute()
    pipe.execute()
    return items


def run_heartbeat(url: str, sizes: Sequence[int], rounds: int, period: float, periods: int,
                  log: Callable[[str], None] = print) -> dict:
    store = RedisBackend(connect(url))
    layout = KeyLayout("benchhb")
    ttl_ms = 60_000
    held = {n: _take(store, layout, n, ttl_ms) for n in sizes}

    # (a) a real Renewer holding n leases: round trips per period.
    trips: Dict[int, float] = {}
    for n in sizes:
        renewer = Renewer(store)
        now = time.monotonic()
        leases = [Lease(k, t, ttl_ms / 1000, period, confirmed_at=now) for k, t, _ in held[n]]
        for lease in leases:
            renewer.hold(lease)
        time.sleep(period * periods + period * 0.5)
        for lease in leases:
            renewer.drop(lease)
        renewer.close()
        trips[n] = renewer.round_trips / periods
        lost = sum(lease.lost.is_set() for lease in leases)
        if lost:
            raise RuntimeError(f"heartbeat bench: {lost} of {n} leases lost")

    # (b) one renew call over n locks, timed (seconds per call).
    series = Series.declared([str(n) for n in sizes])
    for _, n in interleave(list(sizes), rounds):
        reps = max(1, min(200, 2000 // max(n, 1)))
        started = time.perf_counter()
        for _ in range(reps):
            ok = store.renew(held[n])
        series.add(str(n), (time.perf_counter() - started) / reps)
        assert all(ok)
    for n in sizes:
        store.release_many([(key, token) for key, token, _ in held[n]])
    store.close()
    log(f"heartbeat: sizes {list(sizes)} x {rounds} rounds done")
    return {"series": series, "trips_per_period": trips, "period": period}


def _scalar_task(account_id, full=False, region="eu"):  # noqa: ANN001 - a task body's shape
    pass


def run_keys(rounds: int, number: int, log: Callable[[str], None] = print) -> dict:
    """Seconds per key derivation, per variant, in interleaved rounds."""
    key = ArgumentKey("bench.scalar", _scalar_task)
    big = "x" * (1 << 20)
    cases: Dict[str, Callable[[], object]] = {
        "ours: 3 scalars": lambda: key((42,), {"full": True}),
        "ours: 1 MB str argument": lambda: key((big,), {}),
        "ours: 1 MB list argument": None,  # filled below
    }
    big_list = [i % 1000 for i in range(1 << 18)]  # ~1 MB as JSON
    cases["ours: 1 MB list argument"] = lambda: key((big_list,), {})
    try:
        from celery_once.helpers import queue_once_key
        import inspect

        sig = inspect.signature(_scalar_task)
        cases["celery-once: 3 scalars"] = lambda: queue_once_key(
            "bench.scalar", sig.bind(42, full=True).arguments)
    except ImportError:  # pragma: no cover
        pass
    try:
        from celery_singleton.util import generate_lock

        cases["celery-singleton: 3 scalars"] = lambda: generate_lock("bench.scalar", [42], {"full": True})
    except ImportError:  # pragma: no cover
        pass
    series = Series.declared(list(cases))
    for _, name in interleave(list(cases), rounds):
        fn = cases[name]
        n = number if "scalars" in name else max(1, number // 2000)
        series.add(name, timeit.timeit(fn, number=n) / n)
    log(f"keys: {len(cases)} variants x {rounds} rounds done")
    return {"series": series}
