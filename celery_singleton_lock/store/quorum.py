"""A lock held by a majority of independent Redis masters (Redlock), with ordered fencing tokens.

:class:`QuorumBackend` has the interface of :class:`~.redis_backend.RedisBackend` and runs
the same scripts on every master, in parallel, each call bounded by a short
per-node timeout:

- **acquire**: granted when a majority (``N // 2 + 1``) of masters took the lock
  *and* the time left, ``ttl - elapsed - drift`` (``drift`` = ``clock_drift`` x
  TTL + 2 ms), is positive. Otherwise the lock is released on every master
  it may have reached, also the ones that did not answer in time and those that
  take it after the attempt gave up (:mod:`.quorum_undo`), and the caller sees a
  :class:`~.redis_backend.Conflict` (someone holds it; the holder is reported as one
  master sees it) or :class:`QuorumUnavailable` (fewer than a majority answered:
  the task's ``on_lock_error`` applies). A split vote between racing acquirers is
  retried after a random delay.
- **renew** and **release** go to every master; a lock counts as held while a
  majority confirm its token. ``renew`` answers ``False`` for a lock that fewer
  than a majority could still be holding, and raises :class:`QuorumUnavailable`
  when too few masters answered to tell (the heartbeat retries, and gives the lock
  up once its TTL has surely passed).

**Fencing.** A holder asks for its fence when it first reads it: each master
that holds the lock under its token hands out one from its counter of the key's
bucket. The largest alone is not enough (it may live on a master that the next
holder's majority lacks), so a fence ``F`` is handed out only once a majority
hold a counter ``>= F``, after a second round (``RAISE_FENCE``) when they
differed. Any later majority overlaps that one, so the next fence is larger.
Each ask proposes a floor (the largest fence this process saw, plus one), which
keeps the counters together; a master restarted empty starts again from its
clock in microseconds (see ``docs/guarantees.md``).
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import redis

from .backend import GRANT, NOT_OURS, Completion, Conflict, Grant, Holder, NotOurs, Outcome
from .redis_backend import RedisBackend
from .errors import error_text
from .generations import GenerationStore
from .fanout import Failed, FanOut, Results, column_counts, most_seen
from .quorum_events import QuorumReleaseEvents, subscribed
from .quorum_fence import QuorumFencing
from .quorum_undo import may_hold, undo_call
from .places import Limit, refuse_limit

__all__ = ["QuorumBackend", "QuorumUnavailable"]

logger = logging.getLogger("celery_singleton_lock.quorum")


class QuorumUnavailable(redis.exceptions.ConnectionError):
    """Fewer than a majority of the masters answered, so nothing can be decided.

    ``errors`` holds each failed master's error, by index; with ``size`` (masters) and
    ``quorum`` (majority) they tell an outage from masters that are set up wrong
    (see :mod:`.errors`).
    """

    def __init__(self, message: str, errors: Optional[Dict[int, BaseException]] = None,
                 size: Optional[int] = None, quorum: Optional[int] = None) -> None:
        super().__init__(message)
        self.errors = dict(errors or {})
        self.size = size
        self.quorum = quorum


class QuorumBackend(QuorumFencing, FanOut):
    """The lock protocol on N independent Redis masters, decided by majority."""

    records_completions = False
    counts_places = False  # see places.QUORUM_LIMIT
    #: Generations need one history of a key's calls; independent masters each keep their own.
    generations: Optional[GenerationStore] = None

    def __init__(self, clients: Sequence[Any], *, node_timeout: float = 0.25, clock_drift: float = 0.01,
                 split_retries: int = 2, split_retry_delay: float = 0.05,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not clients:
            raise ValueError("a quorum needs at least one Redis master")
        # redis-py clients, or stores already built on them (tests, custom wrappers)
        self.nodes: List[RedisBackend] = [c if isinstance(c, RedisBackend) else RedisBackend(c) for c in clients]
        self.quorum = len(self.nodes) // 2 + 1
        self.node_timeout = node_timeout
        self.clock_drift = clock_drift
        self.split_retries = split_retries
        self.split_retry_delay = split_retry_delay
        self._clock = clock
        self._fence_hint: Dict[str, int] = {}  # fence key -> largest fence seen by this process
        self._guard = threading.Lock()
        self._executors: Optional[List[ThreadPoolExecutor]] = None
        self._executor_pid = 0
        self._in_flight = [0] * len(self.nodes)
        self._busy_since: List[Optional[float]] = [None] * len(self.nodes)
        self._stopping = threading.Event()  # set on close: undos still retrying give up

    @property
    def client(self) -> Any:
        """The first master's client (diagnostics; every master holds the same keys)."""
        return self.nodes[0].client

    def _unavailable(self, what: str, results: Results) -> QuorumUnavailable:
        errors = {i: r.error for i, r in results.items() if isinstance(r, Failed)}
        silent = [i for i in range(len(self.nodes)) if i not in results]
        detail = "; ".join([f"master {i}: {error_text(e)}" for i, e in sorted(errors.items())]
                           + [f"master {i}: no answer within {self.node_timeout:g}s" for i in silent])
        return QuorumUnavailable(
            f"{what}: fewer than {self.quorum} of {len(self.nodes)} Redis masters answered ({detail})", errors,
            size=len(self.nodes), quorum=self.quorum)

    # -- acquire ---------------------------------------------------------------------------------
    def acquire(self, key: str, token: str, ttl_ms: int, holder: Holder, state: str = "running",
                limit: Optional[Limit] = None) -> Outcome:
        """Take ``key`` on a majority of masters; see the module docstring. A places key
        (:mod:`.places`) with a window and one place works as a lock does; more than one
        place is refused (:func:`refuse_limit`)."""
        refuse_limit(limit)
        for attempt in range(self.split_retries + 1):
            outcome = self._take(key, token, ttl_ms,
                                 lambda node: node.acquire(key, token, ttl_ms, holder, state, limit), state=state)
            if not isinstance(outcome, _Split):
                return outcome
            if attempt < self.split_retries:
                time.sleep(random.uniform(0, self.split_retry_delay))  # let one racer win next time
        return outcome.conflict

    def adopt(self, queued_key: str, key: str, queued_token: str, token: str,
              ttl_ms: int, holder: Holder, limit: Optional[Limit] = None) -> Union[Grant, Conflict, NotOurs]:
        """Turn an enqueue lock held by quorum into a running lock."""
        refuse_limit(limit)
        outcome = self._take(key, token, ttl_ms,
                             lambda node: node.adopt(queued_key, key, queued_token, token, ttl_ms, holder, limit),
                             adopting=True)
        return outcome.conflict if isinstance(outcome, _Split) else outcome

    def _take(self, key: str, token: str, ttl_ms: int,
              call: Callable[[RedisBackend], Union[Grant, Conflict, NotOurs]], adopting: bool = False,
              state: str = "running") -> Any:
        started = self._clock()
        n, q = len(self.nodes), self.quorum

        def decided(results: Results) -> bool:
            grants = sum(isinstance(r, Grant) for r in results.values())
            refusals = sum(isinstance(r, (Conflict, NotOurs)) for r in results.values())
            return grants >= q or refusals > n - q

        results = self._broadcast(call, decided=decided)
        grants = sum(1 for r in results.values() if isinstance(r, Grant))
        conflicts = [r for r in results.values() if isinstance(r, Conflict)]
        not_ours = sum(1 for r in results.values() if isinstance(r, NotOurs))
        if grants >= q:
            validity = ttl_ms / 1000.0 - (self._clock() - started) - (ttl_ms / 1000.0 * self.clock_drift + 0.002)
            if validity > 0:
                return GRANT
            self._undo(key, token, results, ttl_ms, state)
            raise self._unavailable(f"lock {key}: the quorum was reached too late (validity "
                                    f"{validity * 1000:.0f} ms)", results)
        self._undo(key, token, results, ttl_ms, state)
        if grants + len(conflicts) + not_ours < q:
            raise self._unavailable(f"lock {key}", results)
        if conflicts:
            conflict = most_seen(conflicts)
            if grants and len(conflicts) < q and not adopting:
                return _Split(conflict)  # racing acquirers split the vote: retry after a random delay
            return conflict
        return NOT_OURS  # adopt: the enqueue lock is not ours on a majority

    def _undo(self, key: str, token: str, results: Results, ttl_ms: int, state: str) -> None:
        """Undo a failed acquire on every master it may have reached (:mod:`.quorum_undo`), queued
        behind the acquire; only the masters that answered the acquire are waited for."""
        reached = [i for i in range(len(self.nodes)) if may_hold(results.get(i))]
        answered = [i for i in reached if i in results and not isinstance(results[i], Failed)]
        self._queues()  # the undos stop with the queues they run on (see close)
        undo = undo_call(key, token, state, time.monotonic() + ttl_ms / 1000.0, self._stopping)
        self._fan_out(undo, indices=reached, decided=lambda r: all(i in r for i in answered), queue_behind=True)

    # -- release and renew -----------------------------------------------------------------------
    def _tally(self, results: Results, confirmations: Sequence[int]) -> List[Optional[bool]]:
        """Per item: True when a majority confirmed, False when a majority cannot, None when unknown."""
        silent = len(self.nodes) - sum(1 for r in results.values() if not isinstance(r, Failed))
        return [True if count >= self.quorum else False if count + silent < self.quorum else None
                for count in confirmations]

    def release(self, key: str, token: str, completion: Optional[Completion] = None,
                state: str = "running") -> bool:
        """Compare-and-delete on every master; ``True`` when a majority still held our token in ``state``.

        Completions are not noted (:attr:`records_completions`): the masters' notes could disagree.
        """
        return self._majority(f"release of {key}", lambda node: node.release(key, token, None, state))

    def requeue(self, key: str, token: str, ttl_ms: int) -> bool:
        """Hand a running lock back to the queue on every master; ``True`` when a majority did."""
        return self._majority(f"requeue of {key}", lambda node: node.requeue(key, token, ttl_ms))

    def _majority(self, what: str, call: Callable[[RedisBackend], bool]) -> bool:
        results = self._broadcast(call, decided=lambda r: sum(1 for v in r.values() if v is True) >= self.quorum)
        [verdict] = self._tally(results, [sum(1 for r in results.values() if r is True)])
        if verdict is None:
            raise self._unavailable(what, results)
        return verdict

    def release_many(self, items: Sequence[Tuple[str, ...]]) -> List[bool]:
        """Release several ``(key, token[, state])``, one pipelined round trip per master."""
        if not items:
            return []
        results = self._broadcast(lambda node: node.release_many(items))
        counts = column_counts(results, len(items))
        return [bool(verdict) for verdict in self._tally(results, counts)]

    def renew(self, items: Sequence[Tuple[Any, ...]]) -> List[bool]:
        """Extend every (key, token, ttl_ms) on every master; a lock stays held while a majority confirm."""
        if not items:
            return []
        results = self._broadcast(
            lambda node: node.renew(items),
            decided=lambda r: min(column_counts(r, len(items))) >= self.quorum)  # all confirmed: done
        verdicts = self._tally(results, column_counts(results, len(items)))
        if any(verdict is None for verdict in verdicts):
            raise self._unavailable(f"renewal of {len(items)} lock(s)", results)
        return [bool(verdict) for verdict in verdicts]

    def mark_redelivered(self, key: str, task_id: str) -> bool:
        return False  # nothing to note: see release()

    def completed(self, done_key: str, task_id: str) -> bool:
        return False

    # -- diagnostics and waiting -----------------------------------------------------------------
    def holder(self, key: str) -> Optional[Dict[str, str]]:
        """The lock's fields as the first answering master that has it sees them."""
        results = self._broadcast(lambda node: node.holder(key))
        for index in sorted(results):
            info = results[index]
            if isinstance(info, dict):
                return dict(info, master=str(index))
        if not any(not isinstance(r, Failed) for r in results.values()):
            raise self._unavailable(f"holder of {key}", results)
        return None

    def await_release(self, key: str) -> bool:
        """Ask every master that holds ``key`` to announce its release; ``False`` only when every
        master answered that it is free."""
        results = self._broadcast(lambda node: node.await_release(key),
                                  decided=lambda r: any(v is True for v in r.values()))
        return any(v is True for v in results.values()) or len(results) < len(self.nodes) or \
            any(isinstance(v, Failed) for v in results.values())

    @contextmanager
    def release_events(self, key: str) -> Iterator["QuorumReleaseEvents"]:
        """Subscribe on every reachable master and ask the holder to announce its release: a
        release is announced on each of them."""
        with ExitStack() as stack:
            pubsubs = []
            for node in self.nodes:
                try:
                    pubsubs.append(stack.enter_context(subscribed(node.client, key)))
                except (redis.RedisError, OSError) as exc:
                    logger.debug("singleton lock: cannot subscribe to %s on a master: %s", key, error_text(exc))
            events = QuorumReleaseEvents(pubsubs, lambda: self.await_release(key), self.node_timeout)
            events.ask()
            yield events

    def epoch(self) -> Optional[str]:
        """The masters' run ids (``?`` for one that did not answer): changes when any restarts."""
        results = self._broadcast(lambda node: node.epoch())
        return "|".join(str(results.get(i)) if isinstance(results.get(i), str) else "?"
                        for i in range(len(self.nodes)))

    def close(self) -> None:
        self._stopping.set()
        for node in self.nodes:
            try:
                node.close()
            except Exception:  # pragma: no cover - closing a broken connection
                pass
        with self._guard:
            if self._executors is not None and self._executor_pid == os.getpid():
                for executor in self._executors:
                    executor.shutdown(wait=False)
            self._executors = None


class _Split:
    """Internal: no majority for anyone yet; retried after a random delay."""

    __slots__ = ("conflict",)

    def __init__(self, conflict: Conflict) -> None:
        self.conflict = conflict
