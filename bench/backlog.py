"""Worker CPU over a backlog: what each variant costs the worker with nothing else running.

The end-to-end rounds publish while the worker consumes, so the publisher, the worker and
redis-server share the two cores, and the worker's CPU per message carries some of that
contention. Here each round stops the worker's process tree (``SIGSTOP``), publishes every
message of the round, then lets the worker go on (``SIGCONT``) and counts its CPU (user +
system of the tree, from /proc) until the last message is done: the worker alone against
Redis, no publisher running. The variants are the end-to-end ones; the ratio is to the plain
task of the same round, as everywhere.
"""

from __future__ import annotations

import os
import signal
import uuid
from typing import Any, Callable, Dict, List, Sequence

import redis

from .e2e import E2E_VARIANTS, _available, _cpu_seconds, _publish, _wait_done, warm_up
from .stats import Series, interleave

__all__ = ["run_backlog", "backlog_section", "BEGIN", "END"]

BEGIN, END = "<!-- backlog: begin -->", "<!-- backlog: end -->"


class _Paused:
    """The worker's process tree stopped for the block: messages pile up in the broker."""

    def __init__(self, worker: Any) -> None:
        self.pids = [worker.pid, *worker.children()]

    def __enter__(self) -> "_Paused":
        for pid in self.pids:
            os.kill(pid, signal.SIGSTOP)
        return self

    def __exit__(self, *exc: Any) -> None:
        for pid in reversed(self.pids):
            os.kill(pid, signal.SIGCONT)


def run_backlog(start_worker: Callable[..., Any], pools: Sequence[tuple], events_url: str, count: int,
                rounds: int, log: Callable[[str], None] = print) -> Dict[str, Series]:
    """Per pool: worker CPU seconds per message of each variant, one value per round."""
    tasks = _available(E2E_VARIANTS)
    events = redis.Redis.from_url(events_url)
    results: Dict[str, Series] = {}
    try:
        for pool, concurrency in pools:
            worker = start_worker(pool=pool, concurrency=concurrency)
            try:
                warm_up(tasks, events)
                cpu = Series.declared(list(tasks))
                for r, label in interleave(list(tasks), rounds):
                    run = f"backlog-{pool}-{r}-{uuid.uuid4().hex[:6]}"
                    with _Paused(worker):
                        _, published = _publish(tasks[label], run, count)
                        before = sum(_cpu_seconds(worker.pid))
                    _wait_done(events, run, published, timeout=60 + count * 0.5)
                    cpu.add(label, (sum(_cpu_seconds(worker.pid)) - before) / max(published, 1))
                results[f"{pool}, concurrency {concurrency}"] = cpu
            finally:
                worker.stop()
            log(f"backlog ({pool} x{concurrency}): {len(tasks)} variants x {rounds} rounds x {count} messages done")
    finally:
        events.close()
    return results


def backlog_section(results: dict, command: str, count: int) -> List[str]:
    """The section's markdown blocks between its markers (empty when it did not run)."""
    measured: Dict[str, Series] = results.get("backlog") or {}
    if not measured:
        return []
    blocks = [BEGIN, "## Worker CPU over a backlog",
              f"`{command}`: {count} messages per round of an empty task with distinct arguments, published "
              "while the worker's processes are stopped, then run with nothing else on the machine: the "
              "worker's CPU (its process tree, from /proc) from the moment it goes on to the last message "
              "done, per message. Ratios are to the plain task of the same round (median, min – max)."]
    for pool, cpu in measured.items():
        rows = []
        for variant in cpu.variants:
            value, ratio = cpu.summary(variant), cpu.ratio(variant, "plain task")
            rows.append(f"| {variant} | {value.median * 1e6:,.0f} | {ratio.median:.2f}x | "
                        f"{ratio.low:.2f} – {ratio.high:.2f} | {value.n} |")
        blocks.append(f"### {pool}")
        blocks.append("| variant | worker CPU µs per message | × plain | min – max | rounds |\n"
                      "|---|---|---|---|---|\n" + "\n".join(rows))
    blocks.append(END)
    return blocks
