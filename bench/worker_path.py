"""What each variant adds to the worker's execution of one task, without a broker.

Celery's own tracer (the function a worker calls for every message: signals, request
context, result handling) runs in the bench process for each variant's empty task, on
distinct arguments. No broker, pool or publisher competes, so the figures are the
worker-side price of each lock alone: for ``LockedTask`` its acquire and release, for
celery-once and celery-singleton the one delete they make in the worker (they take their
lock in ``apply_async``, in the publisher). A ``LockedTask`` on the in-memory backend
separates the Celery layer's own work from the store's round trips; the same with the
metrics extra on (its own registry; the counting connected for its blocks only), timed in
short blocks paired with the in-memory one, prices the metrics, free of the round trips' noise,
against the lock's own worker time.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from typing import Callable, Dict, List, Tuple

from celery_singleton_lock.calls import headers
from celery_singleton_lock.store import new_token

from .stats import Series, interleave

__all__ = ["run_worker_path", "BASELINE", "IN_MEMORY", "LOCKED", "METRICS_ON", "metrics_share"]

BASELINE = "plain task"
LOCKED = "LockedTask running"
IN_MEMORY = "LockedTask running, in-memory backend"
METRICS_ON = "LockedTask running, in-memory backend, metrics on"

Hooks = Dict[str, Tuple[Callable[[], None], Callable[[], None]]]


def _requests(run: str, count: int) -> List[Tuple[str, tuple, dict, dict]]:
    """What the worker hands the tracer for ``count`` distinct calls, with the token the worker's
    request adds to every delivery."""
    out = []
    for i in range(count):
        task_id = str(uuid.uuid4())
        request = {"id": task_id, "args": (run, i), "kwargs": {}, "hostname": "bench@worker-path",
                   "delivery_info": {"exchange": "", "routing_key": "celery", "redelivered": False},
                   headers.TOKEN: new_token()}
        out.append((task_id, (run, i), {}, request))
    return out


def _block(tracer: Callable[..., object], run: str, count: int,
           hooks: Tuple[Callable[[], None], Callable[[], None]]) -> Tuple[float, float]:
    """µs of wall and CPU time per task of ``count`` distinct calls through ``tracer``, between
    its hooks (made before the clock starts)."""
    calls = _requests(run, count)
    enter, leave = hooks
    enter()
    cpu_before, wall_before = time.process_time(), time.perf_counter()
    for task_id, args, kwargs, request in calls:
        tracer(task_id, args, kwargs, request)
    wall, cpu = (time.perf_counter() - wall_before) / count * 1e6, (time.process_time() - cpu_before) / count * 1e6
    leave()
    return wall, cpu


def _measure(tracers: Dict[str, Callable[..., object]], count: int, rounds: int,
             hooks: Hooks) -> Tuple[Series, Series]:
    wall, cpu = Series.declared(list(tracers)), Series.declared(list(tracers))
    for r, label in interleave(list(tracers), rounds):
        took, used = _block(tracers[label], f"path-{r}-{uuid.uuid4().hex[:6]}", count,
                            hooks.get(label, (_nothing, _nothing)))
        wall.add(label, took)
        cpu.add(label, used)
    return wall, cpu


def _nothing() -> None:
    pass


def _paired(without: Callable[..., object], with_: Callable[..., object], hooks: Tuple[Callable[[], None],
            Callable[[], None]], count: int, pairs: int) -> List[float]:
    """µs per task ``with_`` adds to ``without``, once per pair of short blocks run back to back
    (in alternating order): a few µs inside a path of 150 drown in the drift between whole rounds."""
    differences = []
    for n in range(pairs):
        timed = {}
        for on in ((False, True) if n % 2 else (True, False)):
            timed[on] = _block(with_ if on else without, f"pair-{n}-{uuid.uuid4().hex[:6]}", count,
                               hooks if on else (_nothing, _nothing))[0]
        differences.append(timed[True] - timed[False])
    return differences


def metrics_share(wall: Series, pairs: List[float]) -> Tuple[float, float, float]:
    """(µs the metrics add to the in-memory ``LockedTask``: the median of the paired blocks' differences,
    µs the lock adds over a plain task: the median of the differences within each round, the first as
    % of the second)."""
    from .stats import Summary

    extra = Summary.of(pairs).median
    lock = Summary.of([lk - b for lk, b in zip(wall.rounds[LOCKED], wall.rounds[BASELINE])]).median
    return extra, lock, 100.0 * extra / lock if lock > 0 else float("nan")


def _memory_task(app_class: type, name: str = "memory", **settings: object) -> object:
    """A ``LockedTask`` like ``bench.locked_running``, in an app of its own on ``MemoryBackend``."""
    from celery_singleton_lock import LockedTask
    from celery_singleton_lock.store import MemoryBackend

    app = app_class(f"bench-{name}", set_as_current=False)
    app.conf.update(singleton_lock_backend=MemoryBackend(), task_ignore_result=True, **settings)

    @app.task(name=f"bench.locked_{name}", base=LockedTask)
    def locked_memory(run, i):
        return None

    return locked_memory


def run_worker_path(count: int, rounds: int, log: Callable[[str], None] = print) -> Dict[str, Series]:
    """µs of wall and CPU time per task of each variant; ``bench.app`` must be importable."""
    from celery.app.trace import build_tracer
    from celery.signals import task_postrun

    from celery_singleton_lock.runtime import peek_runtime

    from . import app as bench_app

    from prometheus_client import CollectorRegistry

    from celery_singleton_lock.metrics.counting import connect_counting, disconnect_counting

    in_memory = _memory_task(type(bench_app.app))
    with_metrics = _memory_task(type(bench_app.app), "metrics", singleton_lock_metrics_registry=CollectorRegistry())
    served, files = _served_task(type(bench_app.app))
    tasks = {BASELINE: bench_app.plain, LOCKED: bench_app.locked_running, IN_MEMORY: in_memory,
             METRICS_ON: with_metrics}
    hooks: Hooks = {METRICS_ON: (connect_counting, disconnect_counting)}
    if bench_app.QueueOnce is not None:
        tasks["celery-once QueueOnce"] = bench_app.once
    if bench_app.Singleton is not None:
        tasks["celery-singleton Singleton"] = bench_app.singleton
    tracers = {label: build_tracer(task.name, task, eager=False, propagate=False, app=task.app)
               for label, task in tasks.items()}
    # The end-to-end bench's completion record would add a round trip to every variant here.
    task_postrun.disconnect(dispatch_uid="bench.postrun")
    try:
        _measure(tracers, max(count // 20, 1), 1, hooks)  # every path warmed up
        disconnect_counting()  # the metrics app's first use connected them: on for its rounds only
        wall, cpu = _measure(tracers, count, rounds, hooks)
        pairs = _paired(tracers[IN_MEMORY], tracers[METRICS_ON], hooks[METRICS_ON], max(count // 10, 1), rounds * 6)
        served_tracer = build_tracer(served.name, served, eager=False, propagate=False, app=served.app)
        _paired(tracers[IN_MEMORY], served_tracer, hooks[METRICS_ON], max(count // 20, 1), 1)  # warmed up
        disconnect_counting()
        served_pairs = _paired(tracers[IN_MEMORY], served_tracer, hooks[METRICS_ON], max(count // 10, 1), rounds * 6)
    finally:
        shutil.rmtree(files, ignore_errors=True)
        task_postrun.connect(bench_app._done, weak=False, dispatch_uid="bench.postrun")
        for task in (in_memory, with_metrics, served):
            runtime = peek_runtime(task.app)  # type: ignore[attr-defined]
            if runtime is not None:
                runtime.close()
    extra, lock, share = metrics_share(wall, pairs)
    in_files, _, files_share = metrics_share(wall, served_pairs)
    log(f"worker path: {len(tracers)} variants x {rounds} rounds x {count} tasks done; metrics on add "
        f"{extra:.1f} µs per task ({in_files:.1f} µs in multiprocess files), {share:.1f}% ({files_share:.1f}%) "
        f"of the lock's own {lock:.1f} µs over a plain task")
    return {"wall": wall, "cpu": cpu, "metrics_pairs": pairs, "metrics_files_pairs": served_pairs}


def _served_task(app_class: type) -> Tuple[object, str]:
    """A metrics-on ``LockedTask`` keeping its numbers in multiprocess files, as a pool process of a
    worker with ``singleton_lock_metrics_port`` does; and the files' directory."""
    from prometheus_client import CollectorRegistry

    from celery_singleton_lock.metrics import metrics_for

    files = tempfile.mkdtemp(prefix="bench-metrics-")
    task = _memory_task(app_class, "served", singleton_lock_metrics_registry=CollectorRegistry())
    saved = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = files
    try:
        metrics_for(task.app)  # type: ignore[attr-defined]
    finally:
        if saved is None:
            del os.environ["PROMETHEUS_MULTIPROC_DIR"]
        else:
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = saved
    return task, files
