"""Through real Celery workers: publish cost, end-to-end wall time, duplicate storm.

* Publish: N ``apply_async`` calls with distinct arguments, no worker running
  (nothing competes for the two cores); also the cost of a duplicate refused at
  publish (the enqueue-lock variants).
* End to end: one worker (solo, or prefork with 2 children) with every variant
  registered; N distinct-argument messages of an empty task; wall time from the
  first publish to the last completion (a ``task_postrun`` timestamp, taken
  after every variant released its lock). A "duplicates" variant publishes N
  copies of one call while the bench process holds their lock: all N are
  suppressed at run time, which prices a suppressed duplicate against a plain task.
* Storm: 200 messages over 10 argument sets (published in bursts of 20 copies),
  50 ms bodies, prefork with 4 children: executions, duplicates suppressed (at publish / at run), overlaps.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import defaultdict
from typing import Callable, Dict, List, Sequence, Tuple

import redis

from .stats import Series, interleave, round_orders

__all__ = ["run_publish", "run_end_to_end", "warm_up", "lock_path", "run_storm", "qor_available", "E2E_VARIANTS",
           "STORM_VARIANTS"]

#: label -> task attribute in bench.app
E2E_VARIANTS = {
    "plain task": "plain",
    "LockedTask running": "locked_running",
    "LockedTask queued_or_running": "locked_qor",
    "LockedTask replace (queued_or_running)": "locked_replace",
    "LockedTask lock_debounce=1 ms": "locked_debounced",
    "celery-once QueueOnce": "once",
    "celery-singleton Singleton": "singleton",
    "redis-py Lock by hand": "redis_py_lock",
}
STORM_VARIANTS = {
    "plain task (no lock)": "storm_plain",
    "LockedTask running": "storm_running",
    "LockedTask queued_or_running": "storm_qor",
    "celery-once QueueOnce": "storm_once",
    "celery-singleton Singleton": "storm_singleton",
}
DUPLICATES = "LockedTask running, suppressed duplicates"
QOR = "LockedTask queued_or_running"


def _app():
    from . import app as module

    return module


def _available(variants: Dict[str, str]) -> Dict[str, object]:
    module = _app()
    return {label: getattr(module, attr) for label, attr in variants.items() if hasattr(module, attr)}


def _flush(urls: Sequence[str]) -> None:
    """Empty databases of the bench's own server (``python -m bench`` starts it; it never runs on another)."""
    for url in urls:
        client = redis.Redis.from_url(url)
        client.flushdb()
        client.close()


def lock_path(lock_url: str) -> str:
    """Which way a worker's lock calls reach Redis at ``lock_url``, as the lock store opens it."""
    from celery_singleton_lock.store.connect import connect
    from celery_singleton_lock.store.direct import direct_for

    client = connect(lock_url)
    ask = direct_for(client)
    try:
        if ask is not None and ask.short_way():
            return ("straight to the kept connections' sockets (plain TCP, RESP2: `store/wire.py`); the solo "
                    "worker wrote a release with the next task's acquire (these tasks store no result: "
                    "`runtime/held_releases.py`), prefork pool processes each release as its task ends")
        return "through redis-py's connections (TLS, Sentinel, RESP3 or a Cluster: the short way does not apply)"
    finally:
        if ask is not None:
            ask.discard()
        client.close()


def qor_available(lock_url: str, broker_url: str) -> bool:
    """Whether ``apply_async`` of a queued_or_running task takes a lock before publishing here.

    Published to a queue nobody consumes; the lock database must show a key afterwards.
    """
    module = _app()
    lock = redis.Redis.from_url(lock_url)
    try:
        before = set(lock.scan_iter("bench:*"))
        module.locked_qor.apply_async(("probe", 0), queue="bench-probe")
        after = {k for k in lock.scan_iter("bench:*") if not k.endswith(b":fence")} - before
        return bool(after)
    finally:
        _flush([lock_url, broker_url])
        lock.close()


def _publish(task, run: str, count: int, same: bool = False) -> Tuple[float, int]:
    """Seconds spent publishing ``count`` messages, and how many were really published."""
    return _publish_range(task, run, 0, count, same)


def run_publish(broker_url: str, lock_url: str, count: int, rounds: int, qor: bool,
                log: Callable[[str], None] = print, batch: int = 10) -> dict:
    """Publish cost (seconds per message), no worker: distinct calls, and refused duplicates.

    Within a round the variants take turns in batches of ``batch`` calls, so a slow
    second on a shared machine costs every variant alike instead of one. The order of
    the turns is shuffled each round: what one variant leaves behind (garbage, cold
    caches) lands on a different neighbour each round. (With a fixed cyclic order, the
    plain task always followed celery-singleton's refused duplicates and measured ~10 %
    slower than the same call through ``LockedTask``.) Refused duplicates are timed in a
    pass of their own after the distinct calls.
    """
    tasks = _available(E2E_VARIANTS)
    module = _app()
    dup_tasks = {}
    if qor:
        dup_tasks[f"{QOR}, refused duplicate"] = module.locked_qor
    if hasattr(module, "once"):
        dup_tasks["celery-once QueueOnce, refused duplicate"] = module.once
    if hasattr(module, "singleton"):
        dup_tasks["celery-singleton Singleton, refused duplicate"] = module.singleton
    order = list(tasks) + list(dup_tasks)
    for task in tasks.values():  # warm up: connections, scripts, key functions
        _publish(task, "warm", 20)
    _flush([broker_url, lock_url])
    series = Series.declared(order)
    distinct_orders, duplicate_orders = round_orders(list(tasks), rounds), round_orders(list(dup_tasks), rounds)
    for r in range(rounds):
        run = f"pub-{r}-{uuid.uuid4().hex[:6]}"
        for task in dup_tasks.values():
            _publish(task, run, 1, same=True)  # the holder each refused duplicate runs into
        spent = dict.fromkeys(order, 0.0)
        for turns in (distinct_orders[r], duplicate_orders[r]):
            for first in range(0, count, batch):
                for label in turns:
                    if label in tasks:
                        elapsed, _ = _publish_range(tasks[label], run, first, min(batch, count - first))
                    else:
                        elapsed, published = _publish_range(dup_tasks[label], run, 0, min(batch, count - first),
                                                             same=True)
                        if published:
                            log(f"publish: {label}: {published} duplicates were published")
                    spent[label] += elapsed
        for label in order:
            series.add(label, spent[label] / count)
        _flush([broker_url, lock_url])
    log(f"publish: {len(order)} variants x {rounds} rounds x {count} messages (turns of {batch}, shuffled) done")
    return {"series": series}


def _publish_range(task, run: str, first: int, count: int, same: bool = False) -> Tuple[float, int]:
    """``_publish`` of calls ``first`` .. ``first + count - 1`` (or ``count`` copies of call 0)."""
    published = 0
    started = time.perf_counter()
    for i in range(first, first + count):
        task_id = str(uuid.uuid4())
        result = task.apply_async((run, 0 if same else i), task_id=task_id)
        published += getattr(result, "id", None) == task_id
    return time.perf_counter() - started, published


def _wait_done(events: "redis.Redis", run: str, expected: int, timeout: float) -> List[float]:
    deadline = time.monotonic() + timeout
    while events.llen(f"done:{run}") < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{run}: {events.llen(f'done:{run}')} of {expected} tasks done after {timeout}s")
        time.sleep(0.02)
    return [float(x) for x in events.lrange(f"done:{run}", 0, -1)]


def warm_up(tasks: Dict[str, object], events: "redis.Redis") -> None:
    """Run every variant a few times in the worker, so no round pays for a first call."""
    for label, task in tasks.items():
        run = f"warm-{label}-{uuid.uuid4().hex[:6]}"
        _publish(task, run, 10)
        _wait_done(events, run, 10, 120)


def _hold_lock(task, args: tuple) -> Tuple[str, str]:
    """Take ``task``'s lock for ``args`` from the bench process, as another execution would."""
    from celery_singleton_lock.runtime import runtime_for
    from celery_singleton_lock.store import Holder, new_token

    runtime = runtime_for(task.app)
    key = runtime.layout.lock(task.name, task.lock_digest(args, {}))
    token = new_token()
    holder = Holder(task_id="bench-holder", host="bench", pid=os.getpid(), since_ms=int(time.time() * 1000),
                    heartbeat_ms=10000)
    runtime.store.acquire(key, token, 600_000, holder)
    return key, token


def _cpu_seconds(pid: int) -> Tuple[float, float]:
    """User + system CPU of a worker's process tree: the main process (with the children it reaped,
    ``cutime``/``cstime``), and its live pool children (0 where /proc has none)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            children = [int(p) for p in handle.read().split()]
    except OSError:
        return 0.0, 0.0
    main = pool = 0
    for each in [pid] + children:
        try:
            with open(f"/proc/{each}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if each == pid:  # utime, stime, cutime, cstime (fields 14-17)
            main += sum(int(f) for f in fields[11:15])
        else:
            pool += int(fields[11]) + int(fields[12])
    tick = os.sysconf("SC_CLK_TCK")
    return main / tick, pool / tick


def _redis_cpu_seconds(client: "redis.Redis") -> float:
    """User + system CPU that the Redis server (broker, locks and records alike) has spent so far."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def run_end_to_end(start_worker: Callable[..., object], pool: str, concurrency: int, events_url: str,
                   count: int, rounds: int, qor: bool, log: Callable[[str], None] = print) -> dict:
    """Wall time (first publish to last completion) and publish time per variant, one worker."""
    tasks = _available(E2E_VARIANTS)
    module = _app()
    order = list(tasks) + [DUPLICATES]
    events = redis.Redis.from_url(events_url)
    worker = start_worker(pool=pool, concurrency=concurrency)
    try:
        warm_up(tasks, events)
        wall, publish, cpu, server_cpu = Series.declared(order), Series.declared(order), Series(), Series()
        pool_cpu = Series()  # the pool children's part of ``cpu`` (none in solo)
        pid = getattr(worker, "pid", None)
        for r, label in interleave(order, rounds):
            run = f"e2e-{pool}-{r}-{uuid.uuid4().hex[:6]}"
            held = None
            if label == DUPLICATES:
                task = module.locked_running
                held = _hold_lock(task, (run, 0))
                same = True
            else:
                task, same = tasks[label], False
            cpu_before = _cpu_seconds(pid) if pid else (0.0, 0.0)
            server_before = _redis_cpu_seconds(events)
            first = time.time()
            elapsed, published = _publish(task, run, count, same=same)
            done = _wait_done(events, run, published, timeout=60 + count * 0.5)
            if pid:
                main, children = _cpu_seconds(pid)
                cpu.add(label, (main + children - sum(cpu_before)) / count)
                pool_cpu.add(label, (children - cpu_before[1]) / count)
            server_cpu.add(label, (_redis_cpu_seconds(events) - server_before) / count)
            if held is not None:
                from celery_singleton_lock.runtime import runtime_for

                runtime_for(task.app).store.release(*held)
            wall.add(label, max(done) - first)
            publish.add(label, elapsed / count)
    finally:
        worker.stop()
        events.close()
    log(f"end to end ({pool} x{concurrency}): {len(order)} variants x {rounds} rounds x {count} messages done")
    return {"wall": wall, "publish": publish, "cpu": cpu, "pool_cpu": pool_cpu, "server_cpu": server_cpu}


def _overlaps(intervals: List[dict]) -> int:
    by_key: Dict[str, List[dict]] = defaultdict(list)
    for entry in intervals:
        by_key[entry["key"]].append(entry)
    found = 0
    for entries in by_key.values():
        entries.sort(key=lambda e: e["start"])
        for i, before in enumerate(entries):
            for after in entries[i + 1:]:
                if after["start"] < before["end"]:
                    found += 1
    return found


def run_storm(start_worker: Callable[..., object], pool: str, concurrency: int, events_url: str,
              messages: int, sets: int, rounds: int, log: Callable[[str], None] = print) -> dict:
    """Per variant and round: executions, suppressed at publish / at run, overlaps, wall time."""
    tasks = _available(STORM_VARIANTS)
    events = redis.Redis.from_url(events_url)
    worker = start_worker(pool=pool, concurrency=concurrency)
    rows: Dict[str, List[dict]] = defaultdict(list)
    wall = Series.declared(list(tasks))
    try:
        for r, label in interleave(list(tasks), rounds):
            task = tasks[label]
            run = f"storm-{r}-{uuid.uuid4().hex[:6]}"
            published = 0
            first = time.time()
            for i in range(messages):
                task_id = str(uuid.uuid4())
                # Bursts: the copies of one argument set are published back to back, so
                # several of them reach the pool's children at once.
                result = task.apply_async((run, f"set-{i * sets // messages}", i), task_id=task_id)
                published += getattr(result, "id", None) == task_id
            done = _wait_done(events, run, published, timeout=60 + messages * 0.2)
            intervals = [json.loads(x) for x in events.lrange(f"intervals:{run}", 0, -1)]
            wall.add(label, max(done) - first if done else 0.0)
            rows[label].append({
                "executions": len(intervals),
                "suppressed_publish": messages - published,
                "suppressed_run": published - len(intervals),
                "overlaps": _overlaps(intervals),
                "keys_run": len({e["key"] for e in intervals}),
            })
    finally:
        worker.stop()
        events.close()
    log(f"storm ({pool} x{concurrency}): {len(tasks)} variants x {rounds} rounds x {messages} messages done")
    ordered = {label: rows[label] for label in tasks if label in rows}
    return {"rows": ordered, "wall": wall, "messages": messages, "sets": sets}
