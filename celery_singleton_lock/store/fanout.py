"""Run one call on every master of a quorum in parallel, each bounded by ``node_timeout``.

One worker thread per master keeps each master's calls in the order they were
made (a release must never overtake the acquire it undoes). A master whose
current call hangs past ``node_timeout`` (paused, or its network black-holed)
is counted as failed at once instead of queueing more calls behind it, so one
sick master cannot slow every acquire down.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from collections import Counter
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import redis

from .backend import Conflict
from .redis_backend import RedisBackend

__all__ = ["FanOut", "Failed", "Results", "most_seen", "column_counts"]


class Failed:
    """A master's call that raised; ``sent`` is false when it was never handed to the master (its
    earlier calls were still unanswered), so that master cannot have run it."""

    __slots__ = ("error", "sent")

    def __init__(self, error: BaseException, sent: bool = True) -> None:
        self.error = error
        self.sent = sent

    def __repr__(self) -> str:
        return f"<failed {self.error!r}>"


Results = Dict[int, Any]  # master index -> its answer, or Failed; a master missing did not answer in time


class FanOut:
    """The parallel calls of :class:`~.quorum.QuorumBackend` (its base class)."""

    #: Calls one master may have queued before it is treated as unreachable, whatever its speed.
    max_in_flight = 256

    nodes: List[RedisBackend]
    node_timeout: float
    _guard: threading.Lock
    _executors: Optional[List[ThreadPoolExecutor]]
    _executor_pid: int
    _in_flight: List[int]
    _busy_since: List[Optional[float]]
    _stopping: threading.Event

    def _queues(self) -> List[ThreadPoolExecutor]:
        """One worker thread per master: calls to a master run in the order they were made.

        Order matters: a release must never overtake the acquire it undoes (on
        another connection it could, and the late acquire would leave the lock
        behind on that master).
        """
        with self._guard:
            if self._executors is None or self._executor_pid != os.getpid():
                # A forked child cannot use its parent's threads: start its own.
                self._executors = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"singleton-lock-quorum-{i}")
                                   for i in range(len(self.nodes))]
                self._executor_pid = os.getpid()
                self._in_flight = [0] * len(self.nodes)
                self._busy_since = [None] * len(self.nodes)
                self._stopping = threading.Event()  # this generation's: a closed one's undos stay stopped
            return self._executors

    def _run(self, index: int, call: Callable[[RedisBackend], Any]) -> Any:
        self._busy_since[index] = time.monotonic()
        try:
            return call(self.nodes[index])
        finally:
            with self._guard:
                self._in_flight[index] -= 1
                self._busy_since[index] = None

    def _stuck(self, index: int) -> bool:
        """A call has run longer than ``node_timeout`` (paused master, black-holed network), or too many wait."""
        since = self._busy_since[index]
        return (since is not None and time.monotonic() - since > self.node_timeout) or \
            self._in_flight[index] >= self.max_in_flight

    def _broadcast(self, call: Callable[[RedisBackend], Any], indices: Optional[Iterable[int]] = None,
                   decided: Optional[Callable[[Results], bool]] = None) -> Results:
        """Run ``call`` on each master in parallel; answers within ``node_timeout`` (or until decided)."""
        return self._fan_out(call, indices, decided)[0]

    def _fan_out(self, call: Callable[[RedisBackend], Any], indices: Optional[Iterable[int]] = None,
                 decided: Optional[Callable[[Results], bool]] = None,
                 queue_behind: bool = False) -> Tuple[Results, Dict[int, Future]]:
        """:meth:`_broadcast`, also returning the calls still running, by master.

        A master whose current call hangs past ``node_timeout`` (paused, or its
        network black-holed) is counted as failed at once instead of queueing more
        calls behind it, so one sick master cannot slow every acquire down; with
        ``queue_behind`` the call is queued there all the same (an undo must follow
        the acquire it undoes, however late that runs).
        """
        queues = self._queues()
        futures: Dict[Future, int] = {}
        results: Results = {}
        for i in (range(len(self.nodes)) if indices is None else indices):
            with self._guard:
                busy = self._stuck(i) and not queue_behind
                if not busy:
                    self._in_flight[i] += 1
            if busy:
                results[i] = Failed(redis.exceptions.TimeoutError(f"master {i}: earlier calls still unanswered"),
                                    sent=False)
            else:
                futures[queues[i].submit(self._run, i, call)] = i
        pending = set(futures)
        deadline = time.monotonic() + self.node_timeout
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            done, pending = wait(pending, timeout=remaining, return_when=FIRST_COMPLETED)
            for future in done:
                try:
                    results[futures[future]] = future.result()
                except Exception as exc:  # a master that is down, slow, or answered an error
                    results[futures[future]] = Failed(exc)
            if decided is not None and decided(results):
                break
        return results, {futures[f]: f for f in pending}


def most_seen(conflicts: Sequence[Conflict]) -> Conflict:
    """The holder most masters report (ties: the first seen)."""
    counts = Counter(c.task_id for c in conflicts)
    best = max(counts.values())
    return next(c for c in conflicts if counts[c.task_id] == best)


def column_counts(results: Results, size: int) -> List[int]:
    counts = [0] * size
    for answer in results.values():
        if isinstance(answer, list):
            for i, ok in enumerate(answer[:size]):
                counts[i] += 1 if ok else 0
    return counts
