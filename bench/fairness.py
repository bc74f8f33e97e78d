"""Waiting in line: who of the blocks waiting for a key's place gets it, and how soon after a release.

Twenty threads, each with a block on ``SharedLock("bench-fair", limit=2)`` (``on_locked="wait"``)
that holds its place 0.5 s, begin to wait 10 ms apart, so their order of arrival is known.
Served first come, first served, the waiter that arrived at position ``p`` (from 0) gets its
place once the ``p // 2`` pairs before it have each held theirs: its wait is at most its share
of the holds, ``p // 2`` of them, plus 50 ms. Each grant's hand-over is the time from the
release it followed to the grant (the clock of one process: every thread shares it).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List

__all__ = ["run_fairness", "fairness_section", "BEGIN", "END", "WAITERS", "LIMIT", "HOLD", "SLACK"]

WAITERS, LIMIT, HOLD, SLACK, APART = 20, 2, 0.5, 0.05, 0.01
BEGIN, END = "<!-- fairness: begin -->", "<!-- fairness: end -->"


def _one_round(url: str, run: str) -> dict:
    from celery import Celery

    from celery_singleton_lock import SharedLock
    from celery_singleton_lock.runtime import peek_runtime

    app = Celery("bench-fair", set_as_current=False)
    app.conf.update(singleton_lock_url=url, singleton_lock_prefix="bench")
    lock = SharedLock(f"bench-fair-{run}", limit=LIMIT, wait_timeout=120, app=app)
    asked: Dict[int, float] = {}
    granted: Dict[int, float] = {}
    released: List[float] = []
    mutex = threading.Lock()
    start = threading.Barrier(WAITERS)
    with lock.hold():  # the app's lock runtime is made at its first hold: not inside a waiter's timing
        pass

    def waiter(position: int) -> None:
        start.wait()
        time.sleep(position * APART)
        asked[position] = time.monotonic()
        with lock.hold():
            granted[position] = time.monotonic()
            time.sleep(HOLD)
            with mutex:
                released.append(time.monotonic())  # as the block ends: its release begins

    threads = [threading.Thread(target=waiter, args=(p,), daemon=True) for p in range(WAITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    runtime = peek_runtime(app)
    if runtime is not None:
        runtime.close()
    return _judged(asked, granted, released)


def _judged(asked: Dict[int, float], granted: Dict[int, float], released: List[float]) -> dict:
    waits = {p: granted[p] - asked[p] for p in granted}
    bounds = {p: (p // LIMIT) * HOLD + SLACK for p in granted}
    ends = sorted(released)
    handovers = []
    for p in sorted(granted, key=granted.get)[LIMIT:]:  # every grant after the first pair follows a release
        before = [end for end in ends if end <= granted[p]]
        if before:
            handovers.append(granted[p] - before[-1])
    return {"waits": waits, "bounds": bounds, "handovers": handovers,
            "order": sorted(granted, key=granted.get)}


def _waiter_process(url: str, name: str, position: int, start: Any, out: Any) -> None:
    """One waiter in a process of its own (forked): its app, its connections, its heartbeat."""
    from celery import Celery

    from celery_singleton_lock import SharedLock
    from celery_singleton_lock.runtime import runtime_for

    app = Celery("bench-fair", set_as_current=False)
    app.conf.update(singleton_lock_url=url, singleton_lock_prefix="bench")
    lock = SharedLock(name, limit=LIMIT, wait_timeout=120, app=app)
    runtime = runtime_for(app)
    runtime.store.holder(lock.keys(runtime, ()).lock)  # connected before the timing starts
    start.wait()
    time.sleep(position * APART)
    asked = time.monotonic()
    with lock.hold():
        granted = time.monotonic()
        time.sleep(HOLD)
        released = time.monotonic()  # as the block ends: its release begins
    out.put((position, asked, granted, released))
    runtime.close()


def _process_round(url: str, run: str) -> dict:
    """The round with each waiter in a process of its own, as waiters in several workers are."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    start, out = context.Barrier(WAITERS), context.Queue()
    processes = [context.Process(target=_waiter_process, args=(url, f"bench-fair-p-{run}", p, start, out))
                 for p in range(WAITERS)]
    for process in processes:
        process.start()
    rows = [out.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(30)
    asked = {p: a for p, a, _, _ in rows}
    granted = {p: g for p, _, g, _ in rows}
    return _judged(asked, granted, [r for _, _, _, r in rows])


def run_fairness(url: str, rounds: int, log: Callable[[str], None] = print) -> dict:
    """Per variant (threads of one process, processes), per round: each position's wait and bound,
    and each hand-over (seconds)."""
    threads = [_one_round(url, f"{r}-{time.time_ns()}") for r in range(rounds)]
    processes = [_process_round(url, f"{r}-{time.time_ns()}") for r in range(rounds)]
    log(f"fairness: {rounds} round(s) of {WAITERS} waiters, in threads and in processes, done")
    return {"rounds": threads, "processes": processes}


def _p(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def fairness_section(results: dict, command: str) -> List[str]:
    """The section's markdown blocks between its markers (empty when it did not run)."""
    measured = results.get("fairness")
    if not measured:
        return []
    rounds = measured["rounds"]
    over = [(p, r["waits"][p] - r["bounds"][p]) for r in rounds for p in r["waits"] if r["waits"][p] > r["bounds"][p]]
    handovers = [h for r in rounds for h in r["handovers"]]
    apart = measured.get("processes") or []
    apart_over = sum(1 for r in apart for p in r["waits"] if r["waits"][p] > r["bounds"][p])
    apart_handovers = [h for r in apart for h in r["handovers"]]
    worst = max(rounds[0]["waits"], key=lambda p: rounds[0]["waits"][p] - rounds[0]["bounds"][p])
    rows = "\n".join(f"| {p} | {rounds[0]['waits'][p]:.2f} s | {rounds[0]['bounds'][p]:.2f} s | "
                     f"{'yes' if rounds[0]['waits'][p] <= rounds[0]['bounds'][p] else 'no'} |"
                     for p in sorted(rounds[0]["waits"]))
    total = sum(len(r["waits"]) for r in rounds)
    fair = not over
    quick = _p(handovers, 0.99) < 0.010
    return [BEGIN, "## Waiting in line (first come, first served)",
            f"`{command}`: {WAITERS} threads of one process, each a block on a `SharedLock` with `limit={LIMIT}` "
            f"and `on_locked=\"wait\"` holding its place {HOLD:g} s, begin to wait {APART * 1e3:g} ms apart. "
            f"Served in order of arrival, position `p` waits at most its share of the holds, `p // {LIMIT}` of "
            f"them, plus {SLACK * 1e3:g} ms. Hand-over: from a release to the grant that followed it.",
            "| position | waited | bound | within |\n|---|---|---|---|\n" + rows,
            f"Grant order (first round): {', '.join(map(str, rounds[0]['order']))}. Waiters past their bound: "
            f"{len(over)} of {total} ({'met' if fair else 'NOT met'}; the worst, position {worst}, "
            f"{(rounds[0]['waits'][worst] - rounds[0]['bounds'][worst]) * 1e3:+,.0f} ms). Hand-over p50 "
            f"{_p(handovers, 0.5) * 1e3:.1f} ms, p99 {_p(handovers, 0.99) * 1e3:.1f} ms over {len(handovers)} "
            f"hand-overs (target p99 under 10 ms: {'met' if quick else 'NOT met'}).",
            *([f"The same with each waiter in a process of its own (forked, as waiters in several workers are): "
               f"past their bound {apart_over} of {sum(len(r['waits']) for r in apart)}; hand-over p50 "
               f"{_p(apart_handovers, 0.5) * 1e3:.1f} ms, p99 {_p(apart_handovers, 0.99) * 1e3:.1f} ms over "
               f"{len(apart_handovers)} hand-overs (target p99 under 10 ms: "
               f"{'met' if _p(apart_handovers, 0.99) < 0.010 else 'NOT met'})."] if apart else []), END]
