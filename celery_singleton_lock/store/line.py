"""Waiting in line: the waiters for a key's place are served first come, first served.

A call or block that waits for a place (``on_locked="wait"``) joins its key's line with
its first ask after the refusal that made it wait: the store grants it a place only when no
live waiter that came before it is still waiting. The line is one small string beside the
key (``<key>:line``: each waiter's token, its arrival and the end of its lease, with a TTL;
see ``lua/_line.lua``), read and written by the ask itself, so waiting in line costs no round
trip more than waiting did, and the uncontended path none at all.

Only the first waiters in line, as many as the key has places, listen for the key's
releases: a release wakes them alone, however long the line. Each of the others listens on
a channel of its own (:func:`line_channel`), on which the grant or departure that makes it
one of the first tells it so (:mod:`.line_wait` runs the loop). Every waiter asks again at
least every third of its lease, which keeps its place. A waiter that gives up leaves the
line at once (the next is told); one that dies leaves it when its lease ends.

A call that finds a place free on its very first ask takes it: it never waited. A store
that adds to each grant keeps the line and adds the same to a waiter's grant: a replica's
acknowledgement (``replica_ack``, :class:`~.replicas.AcknowledgedLine`), a Sentinel
promotion's wait and the switch to a new master (:class:`~.sentinel.FollowingLine`). A quorum
of masters keeps no line: it serves its waiters as they ask.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from . import places, record, scripts
from .backend import GRANT, Conflict, Holder, NotOurs, Outcome
from .memory_places import _Place
from .places import Limit
from .redis_calls import acquired
from .redis_places import answer

__all__ = ["LEASE_MS", "first_in_line", "line_key", "line_channel", "RedisLine", "MemoryLine"]

#: How long a waiter keeps its place in line without asking: it asks at least every third of it.
LEASE_MS = 3000
SUFFIX = ":line"

Run = Callable[..., Any]


def first_in_line(outcome: Conflict) -> bool:
    """Whether a refused waiter is among the first in line, as many as its key has places: a place
    freed is one of theirs, so it listens for releases (a refusal outside a line counts as first)."""
    return outcome.ahead is None or outcome.ahead < max(outcome.limit, 1)


def line_key(key: str) -> str:
    """The line of a lock key (or of a places key): beside it, in its hash slot."""
    return key + SUFFIX


def line_channel(key: str, token: str) -> str:
    """The channel on which the waiter ``token`` in ``key``'s line is told it became one of the first."""
    return line_key(key) + ":" + token


def _ahead(pttl_ms: int, limit: int) -> Conflict:
    """The refusal of a waiter while a place is free for a waiter that came before it."""
    return Conflict(task_id="", host="-", pid=None, since_ms=None, pttl_ms=max(int(pttl_ms), 0), heartbeat_ms=None,
                    state="line", held=0, limit=limit, holder_token="~line")


class RedisLine:
    """The line scripts, registered once on the backend's client; ``run`` is the backend's script runner."""

    def __init__(self, client: Any, run: Run) -> None:
        self._acquire = client.register_script(scripts.LINE_ACQUIRE)
        self._places = client.register_script(scripts.PLACE_LINE_ACQUIRE)
        self._leave = client.register_script(scripts.LINE_LEAVE)
        self._run = run

    def acquire(self, key: str, token: str, ttl_ms: int, holder: Holder, limit: Optional[Limit] = None,
                lease_ms: int = LEASE_MS) -> Outcome:
        """Ask for a place in line (joining it at the first ask): granted, or who is in the way."""
        script, keys, args, limit = self.call(key, token, ttl_ms, holder, limit, lease_ms)
        return self.outcome(self._run(script, keys, args, grants=True), token, limit)

    def call(self, key: str, token: str, ttl_ms: int, holder: Holder, limit: Optional[Limit],
             lease_ms: int) -> Tuple[Any, Tuple[str, ...], Tuple[Any, ...], Optional[Limit]]:
        """The ask's script, KEYS and ARGV, and the limit its answer is read with: a store that adds
        to each grant (a replica's acknowledgement) sends them its own way (:meth:`outcome` reads the reply)."""
        if places.is_places(key):
            limit = limit or places.SINGLETON
            return (self._places, (key, line_key(key)),
                    (token, "running", limit.count, ttl_ms, limit.window_ms, places.tail(ttl_ms, holder), lease_ms),
                    limit)
        value = record.encode(token, "running", ttl_ms, holder)
        return self._acquire, (key, line_key(key)), (token, value, ttl_ms, lease_ms), None

    @staticmethod
    def outcome(reply: Any, token: str, limit: Optional[Limit]) -> Outcome:
        """What the ask's reply says: granted, or who is in the way and how many wait ahead."""
        if not isinstance(reply, (list, tuple)):
            return GRANT
        if limit is not None:
            outcome = answer(reply[:7], token, limit)
            assert isinstance(outcome, Conflict)  # the script answers a grant or a refusal
            if outcome.state == "line":
                outcome = _ahead(outcome.pttl_ms, limit.count)
            return replace(outcome, ahead=int(reply[7]))
        _, held, pttl, ahead = reply[:4]
        met: Optional[Outcome] = acquired([False, held, pttl], token, "running") if held else None
        if isinstance(met, Conflict):
            return replace(met, ahead=int(ahead))
        return met or replace(_ahead(int(pttl or 0), 1), ahead=int(ahead))

    def leave(self, key: str, token: str, limit: Optional[Limit] = None) -> None:
        """Leave the line (a waiter that got no place); the next waiters are told (``limit``: the
        key's places, so the one now among the first is told too)."""
        self._run(self._leave, (key, line_key(key)), (token, limit.count if limit is not None else 1))


class MemoryLine:
    """The lines of a :class:`~.memory.MemoryBackend`, under its condition."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self._lines: Dict[str, Dict[str, Tuple[int, float]]] = {}  # key -> token -> (arrival, lease end ms)
        self._arrivals = itertools.count()

    def _line(self, key: str, token: str, now: float, lease_ms: int) -> Tuple[int, Sequence[Tuple[int, float]]]:
        """Drop the waiters whose lease ended; renew ``token``'s; its rank and the live waiters ahead of it."""
        line = self._lines.setdefault(key, {})
        for name in [name for name, (_, end) in line.items() if end <= now and name != token]:
            del line[name]
        arrival = line[token][0] if token in line else next(self._arrivals)
        line[token] = (arrival, now + lease_ms)
        ahead = [entry for name, entry in line.items() if entry[0] < arrival]
        return len(line) - 1, ahead

    def _leave_quietly(self, key: str, token: str) -> None:
        line = self._lines.get(key, {})
        line.pop(token, None)
        if not line:
            self._lines.pop(key, None)

    def acquire(self, key: str, token: str, ttl_ms: int, holder: Holder, limit: Optional[Limit] = None,
                lease_ms: int = LEASE_MS) -> Outcome:
        backend = self._backend
        with backend._cond:
            now = backend._now_ms()
            others, ahead = self._line(key, token, now, lease_ms)
            first = min((end for _, end in ahead), default=now)
            if places.is_places(key):
                outcome = self._places(key, token, ttl_ms, holder, limit or places.SINGLETON, len(ahead), first,
                                       others > 0)
            else:
                lock = backend._live(key)
                if lock is None and not ahead:
                    outcome = backend._grant(key, token, ttl_ms, holder, "running", awaited=others > 0)
                elif lock is None:
                    outcome = _ahead(int(first - now), 1)
                else:
                    lock.awaited = True
                    outcome = GRANT if lock.fields["token"] == token else backend._conflict(key, lock, token)
            if outcome is GRANT:
                self._leave_quietly(key, token)
                return outcome
            return replace(outcome, ahead=len(ahead)) if isinstance(outcome, Conflict) else outcome

    def _places(self, key: str, token: str, ttl_ms: int, holder: Holder, limit: Limit, ahead: int, first: float,
                others: bool) -> Outcome:
        rooms = self._backend._places
        seen = rooms._survey(key, token)
        if seen.mine is not None:
            return GRANT if seen.mine.state == "running" else \
                rooms._refused(token, seen.mine, len(seen.others), None, limit.count, True)
        room = rooms._rooms.get(key)
        turns = len(room.turns) if room is not None else 0
        now = rooms._now()
        if len(seen.others) + turns + ahead < limit.count:
            granted = rooms._put(key, token, _Place("running", now + ttl_ms, now + limit.window_ms, holder, ttl_ms),
                                 limit.count)
            rooms._rooms[key].awaited = rooms._rooms[key].awaited or others
            return granted
        if seen.others:
            rooms._rooms[key].awaited = True  # the next release is announced
            return rooms._refused(*seen.soonest(), len(seen.others), seen.window, limit.count, False)
        return _ahead(int(first - now), limit.count)

    def leave(self, key: str, token: str, limit: Optional[Limit] = None) -> None:
        backend = self._backend
        with backend._cond:
            line = self._lines.get(key, {})
            if line.pop(token, None) is not None and line:
                backend._announced(key)
            if not line:
                self._lines.pop(key, None)
