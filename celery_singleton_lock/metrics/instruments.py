"""The library's Prometheus metrics, and what each lock event adds to them.

One :class:`LockMetrics` per registry and process. Under a served worker the metric
objects are registered nowhere: ``prometheus_client``'s multiprocess mode writes each
process's values to files that the worker's main process aggregates (see :mod:`.serve`).
"""

from __future__ import annotations

import os
import time
import weakref
from bisect import bisect_left
from typing import Any, Callable, Dict, Optional, Tuple, cast

from prometheus_client import Counter, Gauge, Histogram

from ..store import is_places

__all__ = ["LockMetrics", "METRIC_NAMES", "OUTCOMES"]

#: ``lock_conflict``'s action -> the duplicate's outcome label.
OUTCOMES = {"skip": "skipped", "retry": "retried", "wait": "waited", "raise": "raised", "ignore": "ignored",
            "replace": "replaced"}

#: Every series name the library exports (as Prometheus shows them: counters end in ``_total``,
#: histograms in ``_bucket``, ``_sum`` and ``_count``).
METRIC_NAMES = {
    "singleton_lock_acquired_total": "counter",
    "singleton_lock_duplicates_total": "counter",
    "singleton_lock_released_total": "counter",
    "singleton_lock_lost_total": "counter",
    "singleton_lock_store_errors_total": "counter",
    "singleton_lock_wait_seconds": "histogram",
    "singleton_lock_held_seconds": "histogram",
    "singleton_lock_acquire_seconds": "histogram",
    "singleton_lock_held": "gauge",
    "singleton_lock_places_in_use": "gauge",
}

_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_HELD_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600)
_ACQUIRE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


def _adder(child: Any) -> Callable[[float], None]:
    """A counter's or gauge's add: its value's own ``inc``, skipping the checks its public method
    repeats on every call (the child is made observable once, here); the public method wherever
    prometheus_client lays a child out otherwise."""
    inc = getattr(getattr(child, "_value", None), "inc", None)
    return inc if callable(inc) else child.inc


def _observer(child: Any) -> Callable[[float], None]:
    """A histogram's observe as two adds (its sum, and the one bucket the amount falls in), for
    the reason of :func:`_adder`."""
    total: Any
    total, buckets, bounds = (getattr(child, name, None) for name in ("_sum", "_buckets", "_upper_bounds"))
    if not (callable(getattr(total, "inc", None)) and isinstance(buckets, list) and isinstance(bounds, list)
            and len(buckets) == len(bounds) and bounds and bounds[-1] == float("inf")):
        return cast(Callable[[float], None], child.observe)
    add_total, adds, upper = total.inc, tuple(bucket.inc for bucket in buckets), tuple(bounds)

    def observe(amount: float) -> None:
        add_total(amount)
        adds[bisect_left(upper, amount)](1)

    return observe


class _TaskSeries:
    """One task's labelled series, looked up once: ``labels()`` costs more than the increment."""

    __slots__ = ("acquired", "acquire", "held", "places", "held_seconds", "lost", "by_exit", "by_outcome",
                 "by_wait", "by_kind")

    def __init__(self, metrics: "LockMetrics", task: str) -> None:
        self.acquired = _adder(metrics.acquired.labels(task))
        self.acquire = _observer(metrics.acquire.labels(task))
        self.held = _adder(metrics.held.labels(task))
        self.places = _adder(metrics.places.labels(task))
        self.held_seconds = _observer(metrics.held_seconds.labels(task))
        self.lost = _adder(metrics.lost.labels(task))
        self.by_exit: Dict[str, Callable[[float], None]] = {}
        self.by_outcome: Dict[Tuple[str, str], Callable[[float], None]] = {}
        self.by_wait: Dict[bool, Callable[[float], None]] = {}
        self.by_kind: Dict[str, Callable[[float], None]] = {}


class LockMetrics:
    """The metric objects, and one method per lock event.

    Hold times and the held gauge are counted in the process that took the lock: a lock
    the worker's main process releases for a dead pool child was never held there (the
    child's share of the gauge goes when the child is found dead).
    """

    def __init__(self, registry: Any = None) -> None:
        kw: Dict[str, Any] = {"registry": registry}
        self.acquired = Counter("singleton_lock_acquired", "Locks taken", ["task"], **kw)
        self.duplicates = Counter("singleton_lock_duplicates", "Duplicates that met a held lock, by outcome",
                                  ["task", "outcome", "at"], **kw)
        self.released = Counter("singleton_lock_released", "Locks let go of, by how the execution ended",
                                ["task", "exit"], **kw)
        self.lost = Counter("singleton_lock_lost", "Held locks found gone while their body ran", ["task"], **kw)
        self.store_errors = Counter("singleton_lock_store_errors",
                                    "Lock asks the store neither granted nor refused, by kind", ["task", "kind"], **kw)
        self.wait = Histogram("singleton_lock_wait_seconds", "How long a duplicate with on_locked=wait waited",
                              ["task", "result"], buckets=_WAIT_BUCKETS, **kw)
        self.held_seconds = Histogram("singleton_lock_held_seconds", "How long a lock was held", ["task"],
                                      buckets=_HELD_BUCKETS, **kw)
        self.acquire = Histogram("singleton_lock_acquire_seconds", "How long the granted ask for a lock took",
                                 ["task"], buckets=_ACQUIRE_BUCKETS, **kw)
        self.held = Gauge("singleton_lock_held", "Locks held now", ["task"], multiprocess_mode="livesum", **kw)
        self.places = Gauge("singleton_lock_places_in_use", "Places of keys with lock_limit or lock_window held by "
                            "runs now", ["task"], multiprocess_mode="livesum", **kw)
        self._tasks: Dict[str, _TaskSeries] = {}
        #: (key, task id) -> (its series, when it was taken, whether it is a place): the locks this
        #: process holds.
        self._holding: Dict[Tuple[str, Optional[str]], Tuple[_TaskSeries, float, bool]] = {}
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _forget_holds(ref))

    def _series(self, task: str) -> _TaskSeries:
        series = self._tasks.get(task)
        if series is None:
            series = self._tasks.setdefault(task, _TaskSeries(self, task))
        return series

    def on_acquired(self, task: str, key: str, task_id: Optional[str], acquire_seconds: Optional[float]) -> None:
        series = self._tasks.get(task) or self._series(task)
        series.acquired(1)
        if acquire_seconds is not None:
            series.acquire(acquire_seconds)
        placed = is_places(key)
        self._holding[(key, task_id)] = (series, time.monotonic(), placed)
        series.held(1)
        if placed:
            series.places(1)

    def on_released(self, task: str, key: str, task_id: Optional[str], exit: str, released: bool = True) -> None:
        """A holder let go; a lock that was no longer its own is no release (``on_lost`` counts it)."""
        series = self._tasks.get(task) or self._series(task)
        if released:
            add = series.by_exit.get(exit)
            if add is None:
                add = series.by_exit.setdefault(exit, _adder(self.released.labels(task, exit)))
            add(1)
        held = self._holding.pop((key, task_id), None)
        if held is not None:
            holder = held[0]
            holder.held(-1)
            holder.held_seconds(time.monotonic() - held[1])
            if held[2]:
                holder.places(-1)

    def on_conflict(self, task: str, action: str, at: str) -> None:
        series = self._series(task)
        add = series.by_outcome.get((action, at))
        if add is None:
            add = series.by_outcome.setdefault(
                (action, at), _adder(self.duplicates.labels(task, OUTCOMES.get(action, action), at)))
        add(1)

    def on_lost(self, task: str) -> None:
        self._series(task).lost(1)

    def on_waited(self, task: str, waited: float, acquired: bool) -> None:
        series = self._series(task)
        observe = series.by_wait.get(acquired)
        if observe is None:
            observe = series.by_wait.setdefault(
                acquired, _observer(self.wait.labels(task, "acquired" if acquired else "timed_out")))
        observe(waited)

    def on_store_error(self, task: str, kind: str) -> None:
        series = self._series(task)
        add = series.by_kind.get(kind)
        if add is None:
            add = series.by_kind.setdefault(kind, _adder(self.store_errors.labels(task, kind)))
        add(1)


def _forget_holds(ref: "weakref.ReferenceType[LockMetrics]") -> None:
    """After a fork: the parent's holds are not the child's."""
    metrics = ref()
    if metrics is not None:
        metrics._holding = {}
