"""What a place costs, and a per-key rate limit under a storm: ``lock_limit`` and ``lock_window``.

The cost: Celery's tracer (as in :mod:`.worker_path`) runs each variant's empty task on
distinct arguments in the bench process, and every variant is priced three ways in the
same interleaved rounds: worker wall time per task, Redis server µs per task (INFO
commandstats on the lock store, nothing else using it meanwhile) and round trips waited
for per task. Today's lock (`lock_limit` left at 1) is the baseline; redis-py's ``Lock``
taken and released in a plain task's body is the floor a hand-rolled lock would cost.

The storm: a prefork worker is sent bursts of one task over a few keys, each limited to
``RATE_TIMES`` starts per ``RATE_PER`` seconds per key, ours (``lock_limit`` and
``lock_window``, ``on_locked="retry"``) beside celery-heimdall's rate limit (``times`` /
``per`` with a per-key ``key``). Every body records its start; judged from those: the most
starts of one key seen in any span of ``RATE_PER`` seconds, and how fast the storm drains.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict
from typing import Any, Callable, Dict, List

import redis

from .micro import _server_usec, count_sends
from .stats import Series, interleave
from .worker_path import BASELINE, _requests

__all__ = ["run_limit_cost", "run_rate_storm", "most_in_window", "tightest", "window_gaps", "TODAY", "LIMIT1", "LIMIT3", "WINDOW",
           "REDIS_PY"]

TODAY = "LockedTask running (today's lock)"
LIMIT1 = "lock_limit=1 (explicit)"
LIMIT3 = "lock_limit=3"
WINDOW_S = 60
WINDOW = f"lock_window={WINDOW_S}"
REDIS_PY = "redis-py Lock in a plain task"
OURS_RATE = "ours: lock_limit + lock_window, on_locked=retry"
HEIMDALL_RATE = "celery-heimdall times/per"


def run_limit_cost(lock_url: str, count: int, rounds: int, log: Callable[[str], None] = print) -> dict:
    """Per variant: wall µs, server µs and round trips per task; ``bench.app`` must be importable."""
    from celery.app.trace import build_tracer
    from celery.signals import task_postrun

    from . import app as bench_app

    tasks = {BASELINE: bench_app.plain, TODAY: bench_app.locked_running, LIMIT1: bench_app.locked_limit1,
             LIMIT3: bench_app.locked_limit3, WINDOW: bench_app.locked_window, REDIS_PY: bench_app.redis_py_lock}
    tracers = {label: build_tracer(task.name, task, eager=False, propagate=False, app=task.app)
               for label, task in tasks.items()}
    server = redis.Redis.from_url(lock_url)
    # A lock store younger than a key's window grants none of its places (it cannot tell a fresh
    # start from a restart that lost them): measure grants, not refusals.
    young = WINDOW_S - int(server.info("server")["uptime_in_seconds"])
    if young > 0:
        log(f"limits: waiting {young} s until the lock store is older than lock_window={WINDOW_S}")
        time.sleep(young + 1)
    wall, server_us = Series.declared(list(tracers)), Series.declared(list(tracers))
    trips: Dict[str, float] = {}
    commands: Dict[str, Dict[str, float]] = {}  # commands the lock store ran per task
    task_postrun.disconnect(dispatch_uid="bench.postrun")  # its record would add a round trip to each
    try:
        for label, trace in tracers.items():  # warm: scripts loaded, connections open; then count trips
            for task_id, args, kwargs, request in _requests(f"warm-{uuid.uuid4().hex[:6]}", 20):
                trace(task_id, args, kwargs, request)
            calls = _requests(f"trips-{uuid.uuid4().hex[:6]}", 20)
            before = _calls(server)
            with count_sends() as box:
                for task_id, args, kwargs, request in calls:
                    trace(task_id, args, kwargs, request)
            trips[label] = box[1] / len(calls)
            after = _calls(server)
            commands[label] = {name: (n - before.get(name, 0)) / len(calls) for name, n in after.items()
                               if n > before.get(name, 0)}
        for r, label in interleave(list(tracers), rounds):
            calls = _requests(f"cost-{r}-{uuid.uuid4().hex[:6]}", count)
            spent = _server_usec([server])
            began = time.perf_counter()
            for task_id, args, kwargs, request in calls:
                tracers[label](task_id, args, kwargs, request)
            wall.add(label, (time.perf_counter() - began) / count * 1e6)
            server_us.add(label, (_server_usec([server]) - spent) / count)
    finally:
        task_postrun.connect(bench_app._done, weak=False, dispatch_uid="bench.postrun")
        server.close()
    log(f"limits: {len(tracers)} variants x {rounds} rounds x {count} tasks done")
    return {"wall": wall, "server_us": server_us, "trips": trips, "commands": commands, "count": count}


def _calls(server: "redis.Redis") -> Dict[str, int]:
    """Calls per command (scripts by ``evalsha``) the server has run, bench queries aside."""
    return {name[len("cmdstat_"):]: int(stats["calls"]) for name, stats in server.info("commandstats").items()
            if not name.startswith(("cmdstat_info", "cmdstat_config"))}


def most_in_window(starts: List[float], span: float) -> int:
    """The most of ``starts`` inside any half-open span ``[t, t + span)``."""
    ordered, best, low = sorted(starts), 0, 0
    for high, t in enumerate(ordered):
        while t - ordered[low] >= span:
            low += 1
        best = max(best, high - low + 1)
    return best


def window_gaps(by_key: Dict[str, List[float]], times: int, per: float) -> List[float]:
    """For each start that a window's end let in (the ``times``-th after another start of its key),
    how long after that window's end it started: what a queue behind a window costs in latency."""
    out: List[float] = []
    for starts in by_key.values():
        ordered = sorted(starts)
        out += [ordered[i] - (ordered[i - times] + per) for i in range(times, len(ordered))]
    return out


def tightest(starts: List[float], n: int) -> float:
    """The shortest span holding ``n`` of ``starts`` (infinite when there are fewer)."""
    ordered = sorted(starts)
    return min((ordered[i + n - 1] - ordered[i] for i in range(len(ordered) - n + 1)), default=float("inf"))


def run_rate_storm(start_worker: Callable[..., Any], events_url: str, keys: int, per_key: int, rounds: int,
                   log: Callable[[str], None] = print) -> dict:
    """Per variant and round: the most starts of a key in any ``RATE_PER`` span, and starts per second."""
    from . import app as bench_app

    tasks = {OURS_RATE: bench_app.rate_ours}
    if bench_app.HeimdallTask is not None:
        tasks[HEIMDALL_RATE] = bench_app.rate_heimdall
    events = redis.Redis.from_url(events_url)
    worker = start_worker(pool="prefork", concurrency=4)
    most: Dict[str, List[int]] = defaultdict(list)
    span: Dict[str, List[float]] = defaultdict(list)  # the shortest span of one key's times + 1 starts
    rate = Series.declared(list(tasks))
    requeues: Dict[str, List[float]] = defaultdict(list)  # re-queues per call, per round
    gaps: Dict[str, List[float]] = defaultdict(list)  # from a window slot's end to the start it let in
    expected = keys * per_key
    try:
        for r, label in interleave(list(tasks), rounds):
            run = f"rate-{r}-{uuid.uuid4().hex[:6]}"
            began = time.time()
            for seq in range(per_key):  # a burst of every key at once, per_key times over
                for k in range(keys):
                    tasks[label].apply_async((run, f"key-{k}", seq))
            deadline = time.monotonic() + 30 + 2.0 * per_key * bench_app.RATE_PER / bench_app.RATE_TIMES
            while events.llen(f"starts:{run}") < expected and time.monotonic() < deadline:
                time.sleep(0.05)
            starts = [json.loads(x) for x in events.lrange(f"starts:{run}", 0, -1)]
            by_key: Dict[str, List[float]] = defaultdict(list)
            for s in starts:
                by_key[s["key"]].append(s["start"])
            most[label].append(max(most_in_window(v, bench_app.RATE_PER) for v in by_key.values()))
            span[label].append(min(tightest(v, bench_app.RATE_TIMES + 1) for v in by_key.values()))
            rate.add(label, len(starts) / max(max(s["start"] for s in starts) - began, 1e-6))
            counted = [s["requeues"] for s in starts if s.get("requeues") is not None]
            if counted:
                requeues[label].append(sum(counted) / len(counted))
            gaps[label] += window_gaps(by_key, bench_app.RATE_TIMES, bench_app.RATE_PER)
            if len(starts) < expected:
                log(f"rate storm: {label}: {len(starts)} of {expected} started before the deadline")
    finally:
        worker.stop()
        events.close()
    log(f"rate storm: {len(tasks)} variants x {rounds} rounds x {expected} messages done")
    return {"most": dict(most), "span": dict(span), "rate": rate, "requeues": dict(requeues), "gaps": dict(gaps),
            "keys": keys, "per_key": per_key, "times": bench_app.RATE_TIMES,
            "per": bench_app.RATE_PER, "ideal": keys * bench_app.RATE_TIMES / bench_app.RATE_PER}
