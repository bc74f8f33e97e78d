"""The library's Prometheus metrics, and what each lock event adds to them.

One :class:`LockMetrics` per registry and process. Its numbers live in a :class:`~.tally.Tally`:
in memory, shown to the user's registry by a collector (:mod:`.families`), or, under a served
worker or a ``PROMETHEUS_MULTIPROC_DIR`` of the user's, in files that prometheus_client's
``MultiProcessCollector`` sums over the pool's processes (see :mod:`.serve`).
"""

from __future__ import annotations

import os
import time
import weakref
from bisect import bisect_left
from typing import Any, Dict, List, Optional, Sequence, Tuple

from prometheus_client.utils import floatToGoString

from ..store import is_places
from .tally import Tally, series_key

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


class _Family:
    """One metric's name, help and label names: what its series' keys are made of."""

    def __init__(self, kind: str, name: str, documentation: str, labels: Sequence[str],
                 buckets: Sequence[float] = ()) -> None:
        self.kind, self.name, self.documentation, self.labels = kind, name, documentation, tuple(labels)
        self.bounds = tuple(float(b) for b in buckets) + (float("inf"),) if buckets else ()
        self.sample = name + "_total" if kind == "counter" else name

    def index(self, tally: Tally, values: Sequence[str]) -> Any:
        """A counter's or gauge's value index, or a histogram's :class:`_Histogram` (lock held)."""
        labels = dict(zip(self.labels, values))
        if self.kind != "histogram":
            return tally.index(self.kind, series_key(self.name, self.sample, labels, self.documentation))
        total = tally.index(self.kind, series_key(self.name, self.name + "_sum", labels, self.documentation))
        buckets = tuple(tally.index(self.kind, series_key(self.name, self.name + "_bucket",
                                                          dict(labels, le=floatToGoString(bound)), self.documentation))
                        for bound in self.bounds)
        return _Histogram(total, buckets, self.bounds)


class _Histogram:
    __slots__ = ("total", "buckets", "bounds")

    def __init__(self, total: int, buckets: Tuple[int, ...], bounds: Tuple[float, ...]) -> None:
        self.total, self.buckets, self.bounds = total, buckets, bounds

    def observe(self, values: Any, amount: float) -> None:
        """Add one observation (the tally's lock held): to the sum, and to the bucket it falls in."""
        values[self.total] += amount
        values[self.buckets[bisect_left(self.bounds, amount)]] += 1


ACQUIRED = _Family("counter", "singleton_lock_acquired", "Locks taken", ["task"])
DUPLICATES = _Family("counter", "singleton_lock_duplicates", "Duplicates that met a held lock, by outcome",
                     ["task", "outcome", "at"])
RELEASED = _Family("counter", "singleton_lock_released", "Locks let go of, by how the execution ended",
                   ["task", "exit"])
LOST = _Family("counter", "singleton_lock_lost", "Held locks found gone while their body ran", ["task"])
STORE_ERRORS = _Family("counter", "singleton_lock_store_errors",
                       "Lock asks the store neither granted nor refused, by kind", ["task", "kind"])
WAIT = _Family("histogram", "singleton_lock_wait_seconds", "How long a duplicate with on_locked=wait waited",
               ["task", "result"], _WAIT_BUCKETS)
HELD_SECONDS = _Family("histogram", "singleton_lock_held_seconds", "How long a lock was held", ["task"],
                       _HELD_BUCKETS)
ACQUIRE = _Family("histogram", "singleton_lock_acquire_seconds", "How long the granted ask for a lock took",
                  ["task"], _ACQUIRE_BUCKETS)
HELD = _Family("gauge_livesum", "singleton_lock_held", "Locks held now", ["task"])
PLACES = _Family("gauge_livesum", "singleton_lock_places_in_use",
                 "Places of keys with lock_limit or lock_window held by runs now", ["task"])


FAMILIES = (ACQUIRED, DUPLICATES, RELEASED, LOST, STORE_ERRORS, WAIT, HELD_SECONDS, ACQUIRE, HELD, PLACES)


class _TaskSeries:
    """One task's series, their indices found once (a key is a JSON text: making it costs more
    than the add)."""

    __slots__ = ("acquired", "acquire", "held", "places", "held_seconds", "lost", "by_exit", "by_outcome",
                 "by_wait", "by_kind")

    def __init__(self, tally: Tally, task: str) -> None:
        self.acquired: int = ACQUIRED.index(tally, [task])
        self.acquire: _Histogram = ACQUIRE.index(tally, [task])
        self.held: int = HELD.index(tally, [task])
        self.places: int = PLACES.index(tally, [task])
        self.held_seconds: _Histogram = HELD_SECONDS.index(tally, [task])
        self.lost: int = LOST.index(tally, [task])
        self.by_exit: Dict[str, int] = {}
        self.by_outcome: Dict[Tuple[str, str], int] = {}
        self.by_wait: Dict[bool, _Histogram] = {}
        self.by_kind: Dict[str, int] = {}


class LockMetrics:
    """The numbers, and one method per lock event (each one lock of the tally).

    ``directory`` is a multiprocess directory to keep them in (``None``: this process's memory,
    shown through ``registry`` when one is given). Hold times and the held gauge are counted in
    the process that took the lock: a lock the worker's main process releases for a dead pool
    child was never held there (the child's share of the gauge goes when the child is found dead).
    """

    def __init__(self, registry: Any = None, directory: Optional[str] = None) -> None:
        self.tally = Tally(directory)
        if registry is not None and directory is None:
            from .families import TallyCollector

            registry.register(TallyCollector(self.tally, [(f.name, f.documentation, f.kind) for f in FAMILIES]))
        self._tasks: Dict[str, _TaskSeries] = {}
        #: (key, task id) -> (its series, when it was taken, whether it is a place): the locks this
        #: process holds.
        #: Who holds what, for the held gauges and hold times: a list per (key, task id), since one
        #: task (or a process outside any task) may hold several places of one key (``SharedLock``).
        self._holding: Dict[Tuple[str, Optional[str]], List[Tuple[_TaskSeries, float, bool]]] = {}
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _after_fork(ref))

    def _series(self, task: str) -> _TaskSeries:
        series = self._tasks.get(task)
        if series is None:
            with self.tally.lock:
                series = self._tasks.get(task) or self._tasks.setdefault(task, _TaskSeries(self.tally, task))
        return series

    def on_acquired(self, task: str, key: str, task_id: Optional[str], acquire_seconds: Optional[float]) -> None:
        series = self._tasks.get(task) or self._series(task)
        placed = is_places(key)
        tally = self.tally
        with tally.lock:
            self._holding.setdefault((key, task_id), []).append((series, time.monotonic(), placed))
            tally.counters.values[series.acquired] += 1
            gauges = tally.gauges.values
            gauges[series.held] += 1
            if placed:
                gauges[series.places] += 1
            if acquire_seconds is not None:
                series.acquire.observe(tally.histograms.values, acquire_seconds)

    def on_released(self, task: str, key: str, task_id: Optional[str], exit: str, released: bool = True) -> None:
        """A holder let go; a lock that was no longer its own is no release (``on_lost`` counts it)."""
        series = self._tasks.get(task) or self._series(task)
        tally = self.tally
        with tally.lock:
            holders = self._holding.get((key, task_id))
            held = holders.pop(0) if holders else None
            if holders is not None and not holders:
                del self._holding[(key, task_id)]
            if released:
                index = series.by_exit.get(exit)
                if index is None:
                    index = series.by_exit[exit] = RELEASED.index(tally, [task, exit])
                tally.counters.values[index] += 1
            if held is not None:
                holder = held[0]
                gauges = tally.gauges.values
                gauges[holder.held] -= 1
                if held[2]:
                    gauges[holder.places] -= 1
                holder.held_seconds.observe(tally.histograms.values, time.monotonic() - held[1])

    def on_conflict(self, task: str, action: str, at: str) -> None:
        series = self._series(task)
        tally = self.tally
        with tally.lock:
            index = series.by_outcome.get((action, at))
            if index is None:
                index = series.by_outcome[(action, at)] = DUPLICATES.index(
                    tally, [task, OUTCOMES.get(action, action), at])
            tally.counters.values[index] += 1

    def on_lost(self, task: str) -> None:
        series = self._series(task)
        with self.tally.lock:
            self.tally.counters.values[series.lost] += 1

    def on_waited(self, task: str, waited: float, acquired: bool) -> None:
        series = self._series(task)
        tally = self.tally
        with tally.lock:
            histogram = series.by_wait.get(acquired)
            if histogram is None:
                histogram = series.by_wait[acquired] = WAIT.index(tally, [task, "acquired" if acquired else "timed_out"])
            histogram.observe(tally.histograms.values, waited)

    def on_store_error(self, task: str, kind: str) -> None:
        series = self._series(task)
        tally = self.tally
        with tally.lock:
            index = series.by_kind.get(kind)
            if index is None:
                index = series.by_kind[kind] = STORE_ERRORS.index(tally, [task, kind])
            tally.counters.values[index] += 1


def _after_fork(ref: "weakref.ReferenceType[LockMetrics]") -> None:
    """After a fork: the parent's holds are not the child's, nor are its files."""
    metrics = ref()
    if metrics is not None:
        metrics._holding = {}
        metrics.tally.after_fork()
