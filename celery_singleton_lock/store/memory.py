"""An in-memory :class:`~.backend.LockBackend`, for unit tests (the library's and its users').

It follows the same contract as the Redis backends, which the shared contract
tests check against both: tokens compared on every change, TTLs that run out on
an injectable clock, fencing counters handed out to holders on demand, enqueue locks adopted by token,
completions remembered for a while, release announcements a waiter can block
on, and keys with a limit or a window as rooms of places (:mod:`.memory_places`).
One instance is one lock store: every thread (and every app) handed the same
instance sees the same locks; nothing is shared between instances.

Use it in a test instead of a Redis URL::

    from celery_singleton_lock.store import MemoryBackend

    app.conf.singleton_lock_backend = MemoryBackend()
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .generations import GenerationStore, MemoryGenerations
from . import places
from .backend import GRANT, NOT_OURS, Completion, Conflict, Grant, Holder, NotOurs, Outcome
from .memory_places import MemoryPlaces
from .line import MemoryLine
from .memory_events import MemoryReleaseEvents
from .places import Limit

__all__ = ["MemoryBackend"]


class _Lock:
    __slots__ = ("fields", "expires_ms", "awaited")

    def __init__(self, fields: Dict[str, str], expires_ms: float, awaited: bool = False) -> None:
        self.fields = fields
        self.expires_ms = expires_ms
        self.awaited = awaited  # a waiter asked for the release to be announced


class MemoryBackend:
    """Locks in a dict, guarded by one condition; ``clock`` returns seconds (monotonic)."""

    records_completions = True
    counts_places = True

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._locks: Dict[str, _Lock] = {}
        self._counters: Dict[str, int] = {}
        self._done: Dict[str, Dict[str, float]] = {}
        self._releases: Dict[str, int] = {}  # announcements per key, for the waiters that asked
        self.generations: Optional[GenerationStore] = MemoryGenerations(clock)
        self._places = MemoryPlaces(self)
        self.line = MemoryLine(self)  # waiting in line (see line.py)

    # -- helpers (called with the condition held) --------------------------------------------------
    def _now_ms(self) -> float:
        return self._clock() * 1000.0

    def _live(self, key: str) -> Optional[_Lock]:
        lock = self._locks.get(key)
        if lock is not None and lock.expires_ms <= self._now_ms():
            del self._locks[key]
            return None
        return lock

    def _announce(self, key: str, lock: _Lock) -> None:
        """Tell the waiters that asked (as Redis publishes only then); their ask is answered."""
        if lock.awaited:
            lock.awaited = False
            self._announced(key)

    def _announced(self, key: str) -> None:
        self._releases[key] = self._releases.get(key, 0) + 1
        self._cond.notify_all()

    def _next_fence(self, fence_key: str) -> int:
        fence = self._counters.get(fence_key, 0) + 1
        self._counters[fence_key] = fence
        return fence

    def _note_completion(self, completion: Completion) -> None:
        now = self._now_ms()
        done = self._done.setdefault(completion.done_key, {})
        for task_id in [t for t, until in done.items() if until <= now]:
            del done[task_id]
        done[completion.task_id] = now + completion.remember_ms

    def _conflict(self, key: str, lock: _Lock, token: str) -> Conflict:
        f = lock.fields
        return Conflict(task_id=f["task_id"], host=f["host"], pid=_int(f["pid"]), since_ms=_int(f["since"]),
                        pttl_ms=max(int(lock.expires_ms - self._now_ms()), 0), heartbeat_ms=_int(f["hb"]),
                        state=f["state"], same_token=f["token"] == token)

    def _grant(self, key: str, token: str, ttl_ms: int, holder: Holder, state: str, awaited: bool = False) -> Grant:
        self._locks[key] = _Lock({"token": token, "task_id": holder.task_id,
                                  "host": holder.host, "pid": str(holder.pid), "pid_ns": holder.pid_ns,
                                  "since": str(holder.since_ms),
                                  "ttl": str(ttl_ms), "hb": str(holder.heartbeat_ms), "state": state,
                                  "redelivered": "", "describe": holder.describe, "task": holder.task},
                                 self._now_ms() + ttl_ms, awaited)
        return GRANT

    # -- the protocol ------------------------------------------------------------------------------
    def acquire(self, key: str, token: str, ttl_ms: int, holder: Holder, state: str = "running",
                limit: Optional[Limit] = None) -> Outcome:
        with self._cond:
            if places.is_places(key):
                return self._places.acquire(key, token, ttl_ms, holder, state, limit)
            lock = self._live(key)
            if lock is None:
                return self._grant(key, token, ttl_ms, holder, state)
            if lock.fields["token"] == token and lock.fields["state"] == state:
                return GRANT
            return self._conflict(key, lock, token)

    def adopt(self, queued_key: str, key: str, queued_token: str, token: str, ttl_ms: int,
              holder: Holder, limit: Optional[Limit] = None) -> Union[Grant, Conflict, NotOurs]:
        with self._cond:
            if places.is_places(key):
                return self._places.adopt(queued_key, key, queued_token, token, ttl_ms, holder, limit)
            mine = self._live(key)
            if mine is not None and mine.fields["token"] == token:
                return GRANT
            queued = self._live(queued_key)
            if queued is None or queued.fields["token"] != queued_token or queued.fields["state"] != "queued":
                if queued_key == key and mine is not None:
                    return self._conflict(key, mine, queued_token)
                return NOT_OURS
            if queued_key != key:
                if mine is not None:
                    return replace(self._conflict(key, mine, token), same_token=False)
                del self._locks[queued_key]
            return self._grant(key, token, ttl_ms, holder, "running", awaited=queued.awaited)

    def fence(self, key: str, fence_key: str, token: str) -> Optional[int]:
        with self._cond:
            if places.is_places(key):
                return self._places.fence(key, fence_key, token)
            lock = self._live(key)
            if lock is None or lock.fields["token"] != token:
                return None
            return self._next_fence(fence_key)

    def requeue(self, key: str, token: str, ttl_ms: int) -> bool:
        with self._cond:
            if places.is_places(key):
                return self._places.requeue(key, token, ttl_ms)
            lock = self._live(key)
            if lock is None or lock.fields["token"] != token:
                return False
            lock.fields.update(state="queued", ttl=str(ttl_ms))
            lock.expires_ms = self._now_ms() + ttl_ms
            self._announce(key, lock)
            return True

    def renew(self, items: Sequence[Tuple[Any, ...]]) -> List[bool]:
        with self._cond:
            plain, placed = places.split(items)
            return places.merge(len(items), (plain, self._renew_locks([items[i] for i in plain])),
                                (placed, self._places.renew([items[i] for i in placed])))

    def _renew_locks(self, items: Sequence[Tuple[Any, ...]]) -> List[bool]:
        with self._cond:
            out = []
            for key, token, ttl_ms, *_ in items:
                lock = self._live(key)
                ok = lock is not None and lock.fields["token"] == token and lock.fields["state"] == "running"
                if ok:
                    lock.expires_ms = self._now_ms() + ttl_ms  # type: ignore[union-attr]
                out.append(ok)
            return out

    def release(self, key: str, token: str, completion: Optional[Completion] = None,
                state: str = "running") -> bool:
        with self._cond:
            if places.is_places(key):
                return self._places.release(key, token, completion, state)
            lock = self._live(key)
            if lock is None or lock.fields["token"] != token or lock.fields["state"] != state:
                return False
            del self._locks[key]
            self._announce(key, lock)
            if completion is not None and (lock.fields.get("redelivered") or completion.always):
                self._note_completion(completion)
            return True

    def release_many(self, items: Sequence[Tuple[str, ...]]) -> List[bool]:
        return [self.release(key, token, None, *state) for key, token, *state in items]

    def mark_redelivered(self, key: str, task_id: str) -> bool:
        with self._cond:
            if places.is_places(key):
                return self._places.mark_redelivered(key, task_id)
            lock = self._live(key)
            if lock is None or lock.fields["task_id"] != task_id:
                return False
            lock.fields["redelivered"] = "1"
            return True

    def completed(self, done_key: str, task_id: str) -> bool:
        with self._cond:
            until = self._done.get(done_key, {}).get(task_id)
            return until is not None and until > self._now_ms()

    def holder(self, key: str) -> Optional[Dict[str, str]]:
        with self._cond:
            if places.is_places(key):
                return self._places.holder(key)
            lock = self._live(key)
            if lock is None:
                return None
            return dict(lock.fields, waiting="1" if lock.awaited else "", pttl=str(max(int(lock.expires_ms - self._now_ms()), 0)))

    @contextmanager
    def release_events(self, key: str) -> Iterator["MemoryReleaseEvents"]:
        with self._cond:
            seen = self._releases.get(key, 0)
            self.await_release(key)
        yield MemoryReleaseEvents(self, key, seen)

    @contextmanager
    def line_events(self, key: str, token: str) -> Iterator["MemoryReleaseEvents"]:
        """A waiter in line hears every release of the key (one process: no wake-up to spare)."""
        with self.release_events(key) as events:
            yield events

    def epoch(self) -> Optional[str]:
        return None  # it never restarts

    def close(self) -> None:
        """Nothing to drop: the locks stay, as a Redis server's do when a client goes."""

    def await_release(self, key: str) -> bool:
        """Ask ``key``'s holder to announce its release; ``False`` when the lock is free (for a
        places key: when a place is free)."""
        with self._cond:
            if places.is_places(key):
                return self._places.await_release(key)
            lock = self._live(key)
            if lock is None:
                return False
            lock.awaited = True
            return True

    # -- for tests ---------------------------------------------------------------------------------
    def counter(self, fence_key: str) -> int:
        """The fencing counter's value (0 before the first fence handed out)."""
        with self._cond:
            return self._counters.get(fence_key, 0)

    def keys(self) -> List[str]:
        """The keys of the locks held now (and of the rooms with a live place)."""
        with self._cond:
            return sorted([key for key in list(self._locks) if self._live(key) is not None] + self._places.keys())


def _int(value: Optional[str]) -> Optional[int]:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
