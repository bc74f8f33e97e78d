"""Generations: which call of a key is the newest, and whether its run was claimed.

"Latest call wins" (``on_locked="replace"``, ``lock_debounce``) needs one answer
that no message can carry: is there a newer call of this key than mine? Celery
cannot edit or delete a published message, so every call of such a key is
published, and the store decides at run time which one runs. Each key keeps one
small hash (``<lock key>:gen``, in its lock's Cluster slot, with a TTL) holding:

``gen``      the newest call's generation: the server's clock in microseconds, lifted
             above the last one reserved (a store restarted empty still hands out newer ones)
``task``     the newest call's task id (named in the superseded calls' log lines)
``first``    when the current burst began (server ms): its calls' messages are due by
             ``lock_debounce_max`` after it
``claimed``  the generation that claimed its run; a claim ends the burst
``top``      the highest generation reserved: never handed out twice

A call reserves its generation before its message is published
(:meth:`GenerationStore.reserve`) and becomes the newest once the message is out
(:meth:`~GenerationStore.supersede`), so a publish that fails displaces nothing. A
message whose generation is reserved but newer than the newest proves it was
published: its publisher has not said so yet, or was killed first, and the worker
holding it makes it the newest. :meth:`~GenerationStore.claim` runs
once the run lock is the caller's: only the newest generation may run, and only
once, so a broker's second delivery of the same message (a visibility timeout
passed while it waited for its countdown) finds it claimed and does not run.
:meth:`~GenerationStore.peek` asks the same without writing, before the run lock
is asked for, so a superseded message ends at once even while another run holds it.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Mapping, Optional, Protocol

from . import scripts

__all__ = ["GenerationStore", "Reservation", "Claim", "RUN", "LOST", "judge", "RedisGenerations", "MemoryGenerations"]


@dataclass(frozen=True)
class Reservation:
    """What :meth:`GenerationStore.reserve` answers to a call about to be published."""

    #: The call's generation.
    gen: int
    #: How long ago the key's current burst began (ms; 0 when none is going on).
    burst_ms: int


@dataclass(frozen=True)
class Claim:
    """Whether a generation may run: ``"run"``, ``"superseded"`` (``by`` the newer call's task
    id), ``"ran"`` (this generation was claimed already), ``"lost"`` (the store forgot the key's
    calls: a claim makes this one the newest of a new burst, to run after a quiet period) or
    ``"pending"`` (a newer call's publish may be under way: ask again in ``wait_ms``)."""

    outcome: str
    by: str = ""
    wait_ms: int = 0
    #: From :meth:`GenerationStore.peek`, for a call that may run: whether it is the newest on record
    #: (else it is newer than that: its publisher has not recorded it, or was killed first).
    recorded: bool = True


#: The one answer that lets a call run.
RUN = Claim("run")
#: The answer when the store forgot the key's calls.
LOST = Claim("lost")


def judge(fields: Mapping[str, Any], gen: int, now_ms: float, hold_ms: int) -> Claim:
    """The claim of ``gen`` against a hash's fields (empty when the hash is gone), as ``gen_verdict``
    in ``lua/_common.lua`` decides it: a generation that claimed already ran; one newer than the
    newest is the newest if it was reserved (its message is in hand: it was published, its
    publisher has not said so yet), else it was published before the hash was lost; one older than
    the newest is superseded, whatever its age; the newest may run, unless a newer generation was
    reserved less than ``hold_ms`` ago (its message may be out already): pending until then."""
    last, claimed, top = int(fields.get("gen") or 0), int(fields.get("claimed") or 0), int(fields.get("top") or 0)
    newest = str(fields.get("task") or "")
    if claimed == gen:
        return Claim("ran", newest)
    if gen > top and gen > last:
        return LOST
    if gen < last:
        return Claim("superseded", newest)
    left = hold_ms - (now_ms - top / 1000.0)
    if top > gen and left > 0:
        return Claim("pending", "", int(math.ceil(left)))
    return RUN


class GenerationStore(Protocol):
    """The generation operations a lock store offers (``LockBackend.generations``)."""

    def reserve(self, key: str, ttl_ms: int) -> Reservation:
        """A generation for a call of the key whose hash is ``key``, about to be published; keep the
        hash at least ``ttl_ms``. The key's newest call is left as it is."""

    def supersede(self, key: str, gen: int, task_id: str, ttl_ms: int) -> Optional[str]:
        """The call ``task_id`` of generation ``gen`` was published: make it the newest, unless it or a
        newer call is already; the task id of the unclaimed call it displaced (``None``: none)."""

    def peek(self, key: str, gen: int, hold_ms: int = 0) -> Claim:
        """What :meth:`claim` would answer now, without claiming."""

    def claim(self, key: str, gen: int, task_id: str, ttl_ms: int, hold_ms: int = 0) -> Claim:
        """Claim the run for ``gen`` if it may run (see :func:`judge`), and end the burst; a ``"lost"``
        generation becomes the newest of a new burst instead. ``hold_ms``: how long a newer
        reservation may be a publish under way (the newest call is ``"pending"`` meanwhile)."""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisGenerations:
    """Generations on one Redis (or Sentinel's master, or a Cluster: one key per call)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._supersede = client.register_script(scripts.GEN_SUPERSEDE)
        self._peek = client.register_script(scripts.GEN_PEEK)
        self._claim = client.register_script(scripts.GEN_CLAIM)
        self._reserve = client.register_script(scripts.GEN_RESERVE)

    def reserve(self, key: str, ttl_ms: int) -> Reservation:
        gen, burst_ms = self._reserve(keys=(key,), args=(int(ttl_ms),))
        return Reservation(int(gen), int(burst_ms))

    def supersede(self, key: str, gen: int, task_id: str, ttl_ms: int) -> Optional[str]:
        return _text(self._supersede(keys=(key,), args=(str(gen), task_id, int(ttl_ms)))) or None

    def peek(self, key: str, gen: int, hold_ms: int = 0) -> Claim:
        outcome, by, wait_ms, recorded = self._peek(keys=(key,), args=(str(gen), int(hold_ms)))
        return Claim(_text(outcome), _text(by), int(wait_ms), bool(int(recorded)))

    def claim(self, key: str, gen: int, task_id: str, ttl_ms: int, hold_ms: int = 0) -> Claim:
        outcome, by, wait_ms = self._claim(keys=(key,), args=(str(gen), task_id, int(ttl_ms), int(hold_ms)))
        return Claim(_text(outcome), _text(by), int(wait_ms))


class MemoryGenerations:
    """The same in memory, on the clock of the :class:`~.memory.MemoryBackend` it belongs to."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._guard = threading.Lock()
        self._hashes: Dict[str, Dict[str, int]] = {}
        self._expires: Dict[str, float] = {}
        self._tasks: Dict[str, str] = {}

    def _live(self, key: str, now_ms: float) -> Dict[str, Any]:
        if key in self._hashes and self._expires[key] <= now_ms:
            del self._hashes[key], self._expires[key]
            self._tasks.pop(key, None)
        fields: Dict[str, Any] = dict(self._hashes.get(key, {}))
        if key in self._tasks:
            fields["task"] = self._tasks[key]
        return fields

    def _keep(self, key: str, now_ms: float, ttl_ms: int) -> None:
        self._expires[key] = max(self._expires.get(key, 0.0), now_ms + ttl_ms)

    def reserve(self, key: str, ttl_ms: int) -> Reservation:
        with self._guard:
            now_ms = self._clock() * 1000.0
            fields = self._live(key, now_ms)
            high = max(int(fields.get("gen") or 0), int(fields.get("top") or 0))
            gen = max(int(now_ms * 1000), high + 1)
            self._hashes.setdefault(key, {})["top"] = gen
            self._keep(key, now_ms, ttl_ms)
            first = fields.get("first")
            return Reservation(gen, max(int(now_ms) - int(first), 0) if first is not None else 0)

    def supersede(self, key: str, gen: int, task_id: str, ttl_ms: int) -> Optional[str]:
        with self._guard:
            now_ms = self._clock() * 1000.0
            fields = self._live(key, now_ms)
            last = int(fields.get("gen") or 0)
            if gen <= last:
                return None
            previous = fields.get("task") if last > int(fields.get("claimed") or 0) else None
            self._hashes.setdefault(key, {}).update(gen=gen, first=int(fields.get("first", now_ms)))
            self._tasks[key] = task_id
            self._keep(key, now_ms, ttl_ms)
            return previous

    def peek(self, key: str, gen: int, hold_ms: int = 0) -> Claim:
        with self._guard:
            now_ms = self._clock() * 1000.0
            fields = self._live(key, now_ms)
            verdict = judge(fields, gen, now_ms, hold_ms)
            if verdict.outcome == "run" and int(fields.get("gen") or 0) != gen:
                return replace(verdict, recorded=False)
            return verdict

    def claim(self, key: str, gen: int, task_id: str, ttl_ms: int, hold_ms: int = 0) -> Claim:
        with self._guard:
            now_ms = self._clock() * 1000.0
            verdict = judge(self._live(key, now_ms), gen, now_ms, hold_ms)
            fields = self._hashes.get(key, {})
            if verdict is LOST:
                self._hashes[key] = dict(fields, gen=gen, first=int(now_ms))
                self._tasks[key] = task_id
                self._keep(key, now_ms, ttl_ms)
            elif verdict is RUN:  # the claiming call is the newest from now on
                fields.update(gen=gen, claimed=gen)
                fields.pop("first", None)
                self._tasks[key] = task_id
            return verdict
