"""Where the microseconds go: cProfile over publish, the guarded run, acquire+release and renewal.

Each scenario runs many times under ``cProfile``; the table keeps the functions
with the most own time, and the summary splits the time per operation between
this library, redis-py, Celery/kombu and the rest (mostly the socket wait).
Profiling inflates Python-heavy code more than waiting, so read the shares,
not the absolute microseconds; the bench sections above give the real costs.
"""

from __future__ import annotations

import cProfile
import pstats
import time
import uuid
from typing import Callable, Dict, List

__all__ = ["run_profile", "run_pool_profile", "lock_share", "PLAIN_TRACED", "LOCKED_TRACED"]

PLAIN_TRACED = "worker (Celery's tracer, in the bench process): plain task"
LOCKED_TRACED = "worker (Celery's tracer, in the bench process): LockedTask running"
PLAIN_POOL = "worker (a prefork pool process, CPU time): plain task"
LOCKED_POOL = "worker (a prefork pool process, CPU time): LockedTask running"

_GROUPS = (
    ("celery-singleton-lock", ("celery_singleton_lock",)),
    ("redis-py", ("/redis/",)),
    ("celery/kombu", ("/celery/", "/kombu/", "/billiard/", "/vine/")),
)


def _group(filename: str) -> str:
    for name, needles in _GROUPS:
        if any(n in filename for n in needles):
            return name
    if filename == "~":
        return "builtins (socket, json, hashlib, ...)"
    return "other Python"


def _short(func: tuple) -> str:
    filename, line, name = func
    if filename == "~":
        return name
    parts = filename.replace("\\", "/").split("/")
    for anchor in ("celery_singleton_lock", "redis", "celery", "kombu", "billiard"):
        if anchor in parts:
            parts = parts[parts.index(anchor):]
            break
    else:
        parts = parts[-1:]
    return f"{'/'.join(parts)}:{line} {name}"


def _profile(fn: Callable[[], None], count: int, top: int) -> dict:
    fn()  # warm up
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for _ in range(count):
        fn()
    profiler.disable()
    return _summary(pstats.Stats(profiler), time.perf_counter() - started, count, top)


def _summary(stats: pstats.Stats, total: float, count: int, top: int) -> dict:
    groups: Dict[str, float] = {}
    rows: List[tuple] = []
    for func, (cc, nc, tt, ct, callers) in stats.stats.items():  # type: ignore[attr-defined]
        groups[_group(func[0])] = groups.get(_group(func[0]), 0.0) + tt
        rows.append((tt, ct, nc, func))
    rows.sort(key=lambda r: r[0], reverse=True)
    return {
        "per_op_us": total / count * 1e6,
        "groups_us": {k: v / count * 1e6 for k, v in sorted(groups.items(), key=lambda kv: -kv[1])},
        "top": [(_short(f), tt / count * 1e6, ct / count * 1e6, nc / count) for tt, ct, nc, f in rows[:top]],
    }


def run_profile(lock_url: str, count: int, top: int = 10, log: Callable[[str], None] = print) -> Dict[str, dict]:
    from celery_singleton_lock.store import KeyLayout, RedisBackend, connect
    from celery_singleton_lock.store import Holder, new_token

    from . import app as module

    scenarios: Dict[str, Callable[[], None]] = {}
    run = f"prof-{uuid.uuid4().hex[:6]}"
    for label, task in ((PLAIN_TRACED, module.plain), (LOCKED_TRACED, module.locked_running)):
        scenarios[label] = _traced(task, run)
    counter = iter(range(10 ** 9))
    scenarios["publish: plain apply_async"] = lambda: module.plain.apply_async((run, next(counter)))
    scenarios["publish: LockedTask running apply_async"] = lambda: module.locked_running.apply_async(
        (run, next(counter)))
    scenarios["publish: LockedTask queued_or_running apply_async"] = lambda: module.locked_qor.apply_async(
        (run, next(counter)))
    scenarios["run (eager): plain task"] = lambda: module.plain.apply((run, next(counter)))
    scenarios["run (eager): LockedTask running, acquire+release included"] = lambda: module.locked_running.apply(
        (run, next(counter)))

    store = RedisBackend(connect(lock_url))
    layout = KeyLayout("benchprof")
    key = layout.lock("p", "0" * 32)
    holder = Holder(task_id="t", host="h", pid=1, since_ms=int(time.time() * 1000), heartbeat_ms=10000)

    def cycle() -> None:
        token = new_token()
        store.acquire(key, token, 30000, holder)
        store.release(key, token)

    scenarios["RedisBackend acquire+release"] = cycle
    items = []
    for i in range(10000):
        k, t = layout.lock("p", f"{i:032x}"), new_token()
        store.acquire(k, t, 60000, holder)
        items.append((k, t, 60000))
    scenarios["RedisBackend.renew, 10,000 locks"] = lambda: store.renew(items)

    out = {}
    from celery.signals import task_postrun

    task_postrun.disconnect(dispatch_uid="bench.postrun")  # the e2e completion record is no part of a task
    try:
        for name, fn in scenarios.items():
            n = max(3, count // 200) if "10,000" in name else count
            out[name] = _profile(fn, n, top)
    finally:
        task_postrun.connect(module._done, weak=False, dispatch_uid="bench.postrun")
    store.client.delete(*[k for k, _, _ in items])
    store.close()
    log(f"profile: {len(scenarios)} scenarios done")
    return out


def _traced(task: object, run: str) -> Callable[[], None]:
    """One distinct call through Celery's tracer, as a worker runs a message (no broker)."""
    from celery.app.trace import build_tracer

    from .worker_path import _requests

    tracer = build_tracer(task.name, task, eager=False, propagate=False, app=task.app)  # type: ignore[attr-defined]
    calls = iter(_requests(run + task.name, 10 ** 6 // 50))  # type: ignore[attr-defined]

    def call() -> None:
        tracer(*next(calls))

    return call


def run_pool_profile(start_worker: Callable[..., object], events_url: str, count: int, top: int = 12,
                     log: Callable[[str], None] = print) -> Dict[str, dict]:
    """cProfile, on CPU time, inside the one pool process of a prefork worker (concurrency 1) that runs
    ``count`` distinct calls of a plain task, then of ``LockedTask running`` (a worker each): what
    the lock adds to a task's worker CPU, and where, outside the publisher. The profile covers
    the pool process's whole life: its start and exit are the same for both."""
    import glob
    import shutil
    import tempfile

    import redis

    from . import app as module
    from .e2e import _publish, _wait_done

    events = redis.Redis.from_url(events_url)
    out = {}
    try:
        for label, task in ((PLAIN_POOL, module.plain), (LOCKED_POOL, module.locked_running)):
            folder = tempfile.mkdtemp(prefix="bench-pool-profile-")
            module.app.control.purge()  # what the publish scenarios left in the queue is no part of it
            try:
                worker = start_worker(pool="prefork", concurrency=1, env={"BENCH_PROFILE_DIR": folder})
                run = f"pool-prof-{uuid.uuid4().hex[:6]}"
                _, published = _publish(task, run, count)
                _wait_done(events, run, published, timeout=60 + count * 0.5)
                worker.stop()  # type: ignore[attr-defined]
                files = glob.glob(f"{folder}/pool-*.prof")
                if not files:
                    log(f"profile: {label}: the pool process wrote no profile")
                    continue
                stats = pstats.Stats(*files)
                total = sum(tt for _, _, tt, _, _ in stats.stats.values())  # type: ignore[attr-defined]
                out[label] = _summary(stats, total, published, top)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        events.close()
    log(f"profile: {len(out)} pool-process profiles done")
    return out


def lock_share(profiles: Dict[str, dict]) -> Dict[str, float]:
    """Per pair of plain / locked profiles: the share (0..1) of the locked task's worker time that
    the lock adds over the plain task's."""
    out = {}
    for plain, locked in ((PLAIN_TRACED, LOCKED_TRACED), (PLAIN_POOL, LOCKED_POOL)):
        if plain in profiles and locked in profiles:
            mine, base = profiles[locked]["per_op_us"], profiles[plain]["per_op_us"]
            out[locked] = (mine - base) / mine if mine > 0 else float("nan")
    return out
