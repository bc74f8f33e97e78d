"""Generations: which call of a key is the newest, and whether its run was claimed.

"Latest call wins" (``on_locked="replace"``, ``lock_debounce``) needs one answer
that no message can carry: is there a newer call of this key than mine? Celery
cannot edit or delete a published message, so every call of such a key is
published, and the store decides at run time which one runs. Each key keeps one
small hash (``<lock key>:gen``, in its lock's Cluster slot, with a TTL) holding:

``gen``      the newest call's generation: the server's clock in microseconds, lifted
             above the last one (a store restarted empty still hands out newer ones)
``task``     the newest call's task id (named in the superseded calls' log lines)
``first``    when the current burst began (server ms): its calls' messages are due by
             ``lock_debounce_max`` after it
``claimed``  the generation that claimed its run; a claim ends the burst
``top``      the highest generation withdrawn (its publish failed): never handed out again

:meth:`GenerationStore.supersede` runs at publish (and :meth:`~GenerationStore.withdraw` when
the publish then fails, so a call that never reaches the broker displaces nothing);
:meth:`~GenerationStore.claim`
once the run lock is the caller's: only the newest generation may run, and only
once, so a broker's second delivery of the same message (a visibility timeout
passed while it waited for its countdown) finds it claimed and does not run.
:meth:`~GenerationStore.peek` asks the same without writing, before the run lock
is asked for, so a superseded message ends at once even while another run holds it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Protocol, Tuple

from . import scripts

__all__ = ["GenerationStore", "Superseding", "Claim", "RUN", "LOST", "judge", "RedisGenerations", "MemoryGenerations"]


@dataclass(frozen=True)
class Superseding:
    """What :meth:`GenerationStore.supersede` answers to the call that became the newest."""

    #: The new call's generation.
    gen: int
    #: The task id of the call it displaced before that one claimed a run (``None``: none).
    previous: Optional[str]
    #: How long ago the burst began (ms; 0 for its first call).
    burst_ms: int
    #: The hash's gen, task and first before this call ("" for absent): what a withdrawal writes back.
    prior: Tuple[str, str, str] = ("", "", "")


@dataclass(frozen=True)
class Claim:
    """Whether a generation may run: ``"run"``, ``"superseded"`` (``by`` the newer call's task
    id), ``"ran"`` (this generation was claimed already) or ``"lost"`` (the store forgot the key's
    calls: a claim makes this one the newest of a new burst, to run after a quiet period)."""

    outcome: str
    by: str = ""


#: The one answer that lets a call run.
RUN = Claim("run")
#: The answer when the store forgot the key's calls.
LOST = Claim("lost")


def judge(fields: Mapping[str, Any], gen: int) -> Claim:
    """The claim of ``gen`` against a hash's fields (empty when the hash is gone), as ``gen_verdict``
    in ``lua/_common.lua`` decides it: a generation that claimed already ran; one newer than the
    newest the hash names was published before the hash was lost; one older than the newest is
    superseded, whatever its age (its caller was answered so: a burst that never goes quiet runs
    its newest call at ``lock_debounce_max``, whose message is due then); the newest may run."""
    last, claimed = int(fields.get("gen") or 0), int(fields.get("claimed") or 0)
    newest = str(fields.get("task") or "")
    if claimed == gen:
        return Claim("ran", newest)
    if gen > last:
        return LOST
    if gen < last:
        return Claim("superseded", newest)
    return RUN


class GenerationStore(Protocol):
    """The generation operations a lock store offers (``LockBackend.generations``)."""

    def supersede(self, key: str, task_id: str, ttl_ms: int) -> Superseding:
        """Make ``task_id`` the newest call of the key whose hash is ``key``; keep the hash at least ``ttl_ms``."""

    def withdraw(self, key: str, published: Superseding) -> bool:
        """The call ``published`` names was not published after all: give the key back to the call
        it displaced, unless a newer call owns it since; whether it was given back."""

    def peek(self, key: str, gen: int) -> Claim:
        """What :meth:`claim` would answer now, without claiming."""

    def claim(self, key: str, gen: int, task_id: str, ttl_ms: int) -> Claim:
        """Claim the run for ``gen`` if it may run (see :func:`judge`), and end the burst; a ``"lost"``
        generation becomes the newest of a new burst instead."""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisGenerations:
    """Generations on one Redis (or Sentinel's master, or a Cluster: one key per call)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._supersede = client.register_script(scripts.GEN_SUPERSEDE)
        self._peek = client.register_script(scripts.GEN_PEEK)
        self._claim = client.register_script(scripts.GEN_CLAIM)
        self._withdraw = client.register_script(scripts.GEN_WITHDRAW)

    def supersede(self, key: str, task_id: str, ttl_ms: int) -> Superseding:
        gen, previous, burst_ms, *prior = self._supersede(keys=(key,), args=(task_id, int(ttl_ms)))
        was = tuple(_text(value) for value in prior) + ("", "", "")
        return Superseding(int(gen), _text(previous) or None, int(burst_ms), (was[0], was[1], was[2]))

    def withdraw(self, key: str, published: Superseding) -> bool:
        return bool(self._withdraw(keys=(key,), args=(str(published.gen),) + published.prior))

    def peek(self, key: str, gen: int) -> Claim:
        outcome, by = self._peek(keys=(key,), args=(str(gen),))
        return Claim(_text(outcome), _text(by))

    def claim(self, key: str, gen: int, task_id: str, ttl_ms: int) -> Claim:
        outcome, by = self._claim(keys=(key,), args=(str(gen), task_id, int(ttl_ms)))
        return Claim(_text(outcome), _text(by))


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
            del self._hashes[key], self._expires[key], self._tasks[key]
        fields: Dict[str, Any] = dict(self._hashes.get(key, {}))
        if key in self._tasks:
            fields["task"] = self._tasks[key]
        return fields

    def _keep(self, key: str, now_ms: float, ttl_ms: int) -> None:
        self._expires[key] = max(self._expires.get(key, 0.0), now_ms + ttl_ms)

    def supersede(self, key: str, task_id: str, ttl_ms: int) -> Superseding:
        with self._guard:
            now_ms = self._clock() * 1000.0
            fields = self._live(key, now_ms)
            last = int(fields.get("gen") or 0)
            gen = max(int(now_ms * 1000), last + 1, int(fields.get("top") or 0) + 1)
            previous = fields.get("task") if last > int(fields.get("claimed") or 0) else None
            first = int(fields["first"]) if "first" in fields else int(now_ms)
            prior = tuple(str(fields[name]) if name in fields else "" for name in ("gen", "task", "first"))
            self._hashes[key] = {"gen": gen, "first": first, "claimed": int(fields.get("claimed") or 0),
                                 "top": int(fields.get("top") or 0)}
            self._tasks[key] = task_id
            self._keep(key, now_ms, ttl_ms)
            return Superseding(gen, previous, max(int(now_ms) - first, 0), (prior[0], prior[1], prior[2]))

    def withdraw(self, key: str, published: Superseding) -> bool:
        with self._guard:
            fields = self._live(key, self._clock() * 1000.0)
            if int(fields.get("gen") or 0) != published.gen:
                return False
            gen, task, first = published.prior
            kept = {name: value for name, value in self._hashes[key].items() if name not in ("gen", "first")}
            kept.update({name: int(value) for name, value in (("gen", gen), ("first", first)) if value})
            kept["top"] = published.gen  # never handed out again: its message may have gone out after all
            self._hashes[key] = kept
            if task:
                self._tasks[key] = task
            else:
                self._tasks.pop(key, None)
            return True

    def peek(self, key: str, gen: int) -> Claim:
        with self._guard:
            return judge(self._live(key, self._clock() * 1000.0), gen)

    def claim(self, key: str, gen: int, task_id: str, ttl_ms: int) -> Claim:
        with self._guard:
            now_ms = self._clock() * 1000.0
            verdict = judge(self._live(key, now_ms), gen)
            fields = self._hashes.get(key, {})
            if verdict is LOST:
                self._hashes[key] = dict(fields, gen=gen, first=int(now_ms))
                self._tasks[key] = task_id
                self._keep(key, now_ms, ttl_ms)
            elif verdict is RUN:
                fields["claimed"] = gen
                fields.pop("first", None)
            return verdict
