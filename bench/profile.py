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

__all__ = ["run_profile"]

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
    wall = time.perf_counter() - started
    stats = pstats.Stats(profiler)
    groups: Dict[str, float] = {}
    rows: List[tuple] = []
    for func, (cc, nc, tt, ct, callers) in stats.stats.items():  # type: ignore[attr-defined]
        groups[_group(func[0])] = groups.get(_group(func[0]), 0.0) + tt
        rows.append((tt, ct, nc, func))
    rows.sort(key=lambda r: r[0], reverse=True)
    return {
        "per_op_us": wall / count * 1e6,
        "groups_us": {k: v / count * 1e6 for k, v in sorted(groups.items(), key=lambda kv: -kv[1])},
        "top": [(_short(f), tt / count * 1e6, ct / count * 1e6, nc / count) for tt, ct, nc, f in rows[:top]],
    }


def run_profile(lock_url: str, count: int, top: int = 10, log: Callable[[str], None] = print) -> Dict[str, dict]:
    from celery_singleton_lock.store import KeyLayout, RedisBackend, connect
    from celery_singleton_lock.store import Holder, new_token

    from . import app as module

    scenarios: Dict[str, Callable[[], None]] = {}
    run = f"prof-{uuid.uuid4().hex[:6]}"
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
    for name, fn in scenarios.items():
        n = max(3, count // 200) if "10,000" in name else count
        out[name] = _profile(fn, n, top)
    store.client.delete(*[k for k, _, _ in items])
    store.close()
    log(f"profile: {len(scenarios)} scenarios done")
    return out
