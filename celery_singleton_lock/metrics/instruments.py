"""The library's Prometheus metrics, and what each lock event adds to them.

One :class:`LockMetrics` per registry and process. Under a served worker the metric
objects are registered nowhere: ``prometheus_client``'s multiprocess mode writes each
process's values to files that the worker's main process aggregates (see :mod:`.serve`).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Dict, Optional, Tuple

from prometheus_client import Counter, Gauge, Histogram

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
}

_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_HELD_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600)
_ACQUIRE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


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
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._holding: Dict[Tuple[str, Optional[str]], Tuple[str, float]] = {}

    def _holds(self) -> Dict[Tuple[str, Optional[str]], Tuple[str, float]]:
        if self._pid != os.getpid():  # forked: the parent's holds are not this process's
            self._pid, self._holding = os.getpid(), {}
        return self._holding

    def on_acquired(self, task: str, key: str, task_id: Optional[str], acquire_seconds: Optional[float]) -> None:
        self.acquired.labels(task).inc()
        if acquire_seconds is not None:
            self.acquire.labels(task).observe(acquire_seconds)
        with self._lock:
            self._holds()[(key, task_id)] = (task, time.monotonic())
        self.held.labels(task).inc()

    def on_released(self, task: str, key: str, task_id: Optional[str], exit: str) -> None:
        self.released.labels(task, exit).inc()
        with self._lock:
            held = self._holds().pop((key, task_id), None)
        if held is not None:
            self.held.labels(held[0]).dec()
            self.held_seconds.labels(held[0]).observe(time.monotonic() - held[1])

    def on_conflict(self, task: str, action: str, at: str) -> None:
        self.duplicates.labels(task, OUTCOMES.get(action, action), at).inc()

    def on_lost(self, task: str) -> None:
        self.lost.labels(task).inc()

    def on_waited(self, task: str, waited: float, acquired: bool) -> None:
        self.wait.labels(task, "acquired" if acquired else "timed_out").observe(waited)

    def on_store_error(self, task: str, kind: str) -> None:
        self.store_errors.labels(task, kind).inc()
