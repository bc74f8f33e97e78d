"""The newest call's latency: how soon it starts after the run it waits behind, and after a quiet period.

Under ``on_locked="replace"`` and ``lock_debounce`` the newest call of a key that finds
a copy running waits for that run's release and starts then. In a prefork worker, with
the library's defaults (``lock_retry_delay=5``), each round runs one call with a 1 s
body, makes three more calls of its key while it runs, and measures the time from the
first run's end to the start of the newest call's run (the other two end superseded).
For ``lock_debounce=0.3`` a burst with no run in progress is measured too: from the
burst's last call to its run's start, which should be the quiet period itself.

No peer has a call where the newest wins: celery-once, celery-singleton and
celery-heimdall's ``unique`` keep the first call of a key and drop later ones.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict
from typing import Any, Callable, Dict, List

import redis

from .stats import interleave

__all__ = ["run_handover", "REPLACE", "DEBOUNCE", "QUIET"]

REPLACE = "replace (queued), behind a 1 s run"
DEBOUNCE = "lock_debounce=0.3, behind a 1 s run"
QUIET = "lock_debounce=0.3, no run in progress (from the last call)"
HOLDER_SECONDS = 1.0


def _records(events: "redis.Redis", run: str, count: int, timeout: float) -> List[dict]:
    deadline = time.monotonic() + timeout
    while events.llen(f"handover:{run}") < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return sorted((json.loads(x) for x in events.lrange(f"handover:{run}", 0, -1)), key=lambda r: r["start"])


def _behind(task: Any, events: "redis.Redis", run: str) -> float:
    """Seconds from the holder's end to the newest call's start."""
    task.apply_async((run, 0, HOLDER_SECONDS))
    deadline = time.monotonic() + 20
    while not events.exists(f"started:{run}") and time.monotonic() < deadline:
        time.sleep(0.01)
    for payload in (1, 2, 3):
        task.apply_async((run, payload))
    runs = _records(events, run, 2, 30)
    if [r["payload"] for r in runs] != [0, 3]:
        raise AssertionError(f"{task.name}: expected the first call and the newest to run, got {runs}")
    return runs[1]["start"] - runs[0]["end"]


def _quiet(task: Any, events: "redis.Redis", run: str) -> float:
    """Seconds from a burst's last call to its run's start."""
    for payload in range(5):
        last = time.time()
        task.apply_async((run, payload))
        time.sleep(0.05)
    runs = _records(events, run, 1, 20)
    if [r["payload"] for r in runs] != [4]:
        raise AssertionError(f"{task.name}: expected the last call to run once, got {runs}")
    return runs[0]["start"] - last


def run_handover(start_worker: Callable[..., Any], events_url: str, rounds: int,
                 log: Callable[[str], None] = print) -> dict:
    """Per variant: the latency of each round (seconds)."""
    from . import app as bench_app

    events = redis.Redis.from_url(events_url)
    worker = start_worker(pool="prefork", concurrency=3)
    latencies: Dict[str, List[float]] = defaultdict(list)
    try:
        for r, label in interleave([REPLACE, DEBOUNCE, QUIET], rounds):
            run = f"handover-{r}-{uuid.uuid4().hex[:6]}"
            if label == QUIET:
                latencies[label].append(_quiet(bench_app.handover_debounce, events, run))
            else:
                task = bench_app.handover_replace if label == REPLACE else bench_app.handover_debounce
                latencies[label].append(_behind(task, events, run))
    finally:
        worker.stop()
        events.close()
    log(f"handover: 3 variants x {rounds} rounds done")
    return {"latency": dict(latencies), "holder": HOLDER_SECONDS}



BEGIN, END = "<!-- handover: begin -->", "<!-- handover: end -->"


def handover_section(results: dict, command: str) -> List[str]:
    """The section's markdown blocks between its markers (empty when it did not run)."""
    measured = results.get("handover")
    if not measured:
        return []
    rows, medians = [], {}
    for label, values in measured["latency"].items():
        ordered = sorted(values)
        medians[label] = ordered[len(ordered) // 2] if len(ordered) % 2 else \
            (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2
        rows.append(f"| {label} | {medians[label] * 1e3:,.0f} ms | {ordered[0] * 1e3:,.0f} – "
                    f"{ordered[-1] * 1e3:,.0f} ms | {len(values)} |")
    behind = max(medians.get(REPLACE, 0.0), medians.get(DEBOUNCE, 0.0))
    verdict = "met" if behind < 0.5 else "NOT met"
    return [BEGIN, "## The newest call's hand-over",
            f"`{command}`, prefork worker x3, default `lock_retry_delay` (5 s). Each round: one call with a "
            f"{measured['holder']:g} s body, three more calls of its key while it runs; the time from that run's "
            "end to the start of the newest call's run (the other two end superseded). For `lock_debounce` "
            "without a run in progress: from the burst's last call to its run's start (the quiet period is "
            "300 ms). No peer has a call where the newest wins: celery-once, celery-singleton and "
            "celery-heimdall's `unique` keep a key's first call and drop the later ones.",
            "| variant | median | min – max | rounds |\n|---|---|---|---|\n" + "\n".join(rows),
            f"Target: the newest call starts within 0.5 s (median) of the run it waits behind: "
            f"{behind * 1e3:,.0f} ms, {verdict}.", END]
