"""Places (:mod:`.places`) in a :class:`~.memory.MemoryBackend`: the scripts' rules, in Python.

Each method here runs with the backend's condition held and answers as its
``place_*.lua`` script does, on the backend's clock: places that ended are dropped on
every look, a released place stays until its window ends, every change compares the
caller's token, and fences come from the backend's counters.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple, Union

from . import places
from .backend import GRANT, NOT_OURS, Completion, Conflict, Grant, Holder, NotOurs, Outcome
from .places import Limit

__all__ = ["MemoryPlaces"]


@dataclass
class _Place:
    state: str
    lease_end: float
    keep_until: float
    holder: Holder
    ttl_ms: int
    redelivered: bool = False

    def ends(self) -> float:
        return self.keep_until if self.state == "released" else max(self.lease_end, self.keep_until)

    def holds(self, now: float) -> bool:
        return self.state != "released" and self.lease_end > now


@dataclass
class _Room:
    places: Dict[str, _Place] = field(default_factory=dict)
    limit: int = 1
    awaited: bool = False
    #: Turns handed out: task id -> (at, lapses), see places.py.
    turns: Dict[str, Tuple[float, float]] = field(default_factory=dict)


#: A turn lapses a window after it comes, and at least this long after (as in ``_places.lua``).
TURN_GRACE_MS = 5000


@dataclass
class _Survey:
    """What ``survey`` in ``_places.lua`` answers."""

    mine: Optional[_Place]
    others: Dict[str, _Place]
    window: Optional[float]

    def soonest(self) -> Tuple[str, _Place]:
        return min(self.others.items(), key=lambda item: item[1].ends())

    def twin(self, task_id: str) -> Optional[Tuple[str, _Place]]:
        """Another place held (not released) under ``task_id``."""
        return next(((token, place) for token, place in self.others.items()
                     if task_id and place.state != "released" and place.holder.task_id == task_id), None)


class _Host(Protocol):
    """What the rooms use of the :class:`~.memory.MemoryBackend` that keeps them: its clock, its
    release announcements, its fencing counters and its record of completions."""

    def _now_ms(self) -> float: ...

    def _announced(self, key: str) -> None: ...

    def _next_fence(self, fence_key: str) -> int: ...

    def _note_completion(self, completion: Completion) -> None: ...


class MemoryPlaces:
    """The rooms of one :class:`~.memory.MemoryBackend` (called with its condition held)."""

    def __init__(self, backend: _Host) -> None:
        self._backend = backend
        self._rooms: Dict[str, _Room] = {}

    def _now(self) -> float:
        return self._backend._now_ms()

    def _survey(self, key: str, token: str) -> _Survey:
        now = self._now()
        room = self._rooms.get(key)
        if room is None:
            return _Survey(None, {}, None)
        for name in [name for name, place in room.places.items() if place.ends() <= now]:
            del room.places[name]
        for task in [task for task, (_, lapses) in room.turns.items() if lapses <= now]:
            del room.turns[task]
        if not room.places and not room.turns:
            del self._rooms[key]
            return _Survey(None, {}, None)
        others = {name: place for name, place in room.places.items() if name != token}
        windows = [place.keep_until for place in others.values() if place.keep_until > now]
        # A run past its window's end may let go at any moment: no window end is then the soonest.
        unbounded = any(place.keep_until <= now for place in others.values())
        return _Survey(room.places.get(token), others, min(windows) if windows and not unbounded else None)

    def _refused(self, token: str, place: _Place, held: int, window: Optional[float], limit: int,
                 same: bool) -> Conflict:
        now = self._now()
        h = place.holder
        return Conflict(task_id=h.task_id, host=h.host, pid=h.pid, since_ms=h.since_ms,
                        pttl_ms=max(int(place.ends() - now), 0), heartbeat_ms=h.heartbeat_ms, state=place.state,
                        same_token=same, held=held, limit=limit,
                        window_ms=None if window is None else max(int(window - now), 0), holder_token=token)

    def _announce(self, key: str) -> None:
        room = self._rooms.get(key)
        if room is not None and room.awaited:
            room.awaited = False
            self._backend._announced(key)

    def _put(self, key: str, token: str, place: _Place, limit: int) -> Grant:
        room = self._rooms.setdefault(key, _Room())
        room.places[token] = place
        room.limit = limit
        return GRANT

    # -- the protocol on places keys --------------------------------------------------------------
    def acquire(self, key: str, token: str, ttl_ms: int, holder: Holder, state: str,
                limit: Optional[Limit]) -> Outcome:
        limit = limit or places.SINGLETON
        seen = self._survey(key, token)
        if seen.mine is not None:
            if seen.mine.state == state:
                return GRANT
            return self._refused(token, seen.mine, len(seen.others), None, limit.count, True)
        twin = seen.twin(holder.twin_id)
        if twin is not None:
            return self._refused(*twin, len(seen.others), None, limit.count, False)
        now = self._now()
        room = self._rooms.get(key)
        turns = dict(room.turns) if room is not None else {}
        turn_id = holder.twin_id  # a shared lock's hold gets no turn (as ARGV[7] of place_acquire.lua)
        mine = turns.pop(turn_id, None) if turn_id else None
        # A call whose turn has come competes for the free places alone; any other queues behind every turn.
        ahead = 0 if mine is not None and mine[0] <= now else len(turns)
        if len(seen.others) + ahead >= limit.count:
            return self._queued(key, seen, turns, mine, turn_id, limit)
        if mine is not None:
            del self._rooms[key].turns[turn_id]
        return self._put(key, token, _Place(state, now + ttl_ms, now + limit.window_ms, holder, ttl_ms), limit.count)

    def _queued(self, key: str, seen: _Survey, turns: Dict[str, Tuple[float, float]],
                mine: Optional[Tuple[float, float]], task_id: str, limit: Limit) -> Conflict:
        """The refusal of a full key (or of one whose free places are others' turns), handing the
        call a turn when it comes back for one and none is its yet (see places.py)."""
        now = self._now()
        turn = mine[0] if mine is not None else None
        if (turn is None and limit.turns and limit.window_ms > 0 and task_id
                and (seen.window is not None or not seen.others)):
            ends = sorted([p.keep_until for p in seen.others.values()]
                          + [at + limit.window_ms for at, _ in turns.values()], reverse=True)
            turn = max(ends[limit.count - 1] if len(ends) >= limit.count else now, now)
            self._rooms.setdefault(key, _Room()).turns[task_id] = (turn, turn + max(limit.window_ms, TURN_GRACE_MS))
        if seen.others:
            refusal = self._refused(*seen.soonest(), len(seen.others), seen.window, limit.count, False)
        else:  # the places are free, but turns handed out come first: describe the first of them
            first_task, (at, _) = min(turns.items(), key=lambda item: item[1][0])
            refusal = Conflict(task_id=first_task, host="-", pid=0, since_ms=0, pttl_ms=max(int(at - now), 0),
                               heartbeat_ms=0, state="turn", held=0, limit=limit.count,
                               holder_token="~t" + first_task)
        return refusal if turn is None else replace(refusal, turn_ms=int(turn - now))

    def adopt(self, queued_key: str, key: str, queued_token: str, token: str, ttl_ms: int, holder: Holder,
              limit: Optional[Limit]) -> Union[Grant, Conflict, NotOurs]:
        limit = limit or places.SINGLETON
        now = self._now()
        have = self._survey(key, token).mine
        if have is not None and have.holds(now):
            return GRANT
        queued_seen = self._survey(queued_key, queued_token)
        queued = queued_seen.mine
        if queued is None or not queued.holds(now):
            return NOT_OURS
        if queued.state != "queued":
            if queued_key == key:
                return self._refused(queued_token, queued, len(queued_seen.others), None, limit.count, True)
            return NOT_OURS
        if queued_key != key:
            seen = self._survey(key, token)
            if len(seen.others) >= limit.count:
                return self._refused(*seen.soonest(), len(seen.others), seen.window, limit.count, False)
        del self._rooms[queued_key].places[queued_token]
        if queued_key != key:
            self._announce(queued_key)
            self._survey(queued_key, "")
        place = _Place("running", now + ttl_ms, queued.keep_until, holder, ttl_ms, queued.redelivered)
        return self._put(key, token, place, limit.count)

    def _held(self, key: str, token: str) -> Optional[_Place]:
        place = self._survey(key, token).mine
        return place if place is not None and place.holds(self._now()) else None

    def fence(self, key: str, fence_key: str, token: str) -> Optional[int]:
        if self._held(key, token) is None:
            return None
        return self._backend._next_fence(fence_key)

    def requeue(self, key: str, token: str, ttl_ms: int) -> bool:
        place = self._held(key, token)
        if place is None:
            return False
        place.state, place.lease_end = "queued", self._now() + ttl_ms
        self._announce(key)
        return True

    def renew(self, items: Sequence[Tuple[Any, ...]]) -> List[bool]:
        out = []
        for key, token, ttl_ms, *_ in items:
            place = self._held(key, token)
            ok = place is not None and place.state == "running"
            if ok:
                place.lease_end = self._now() + ttl_ms  # type: ignore[union-attr]
            out.append(ok)
        return out

    def release(self, key: str, token: str, completion: Optional[Completion], state: str = "running") -> bool:
        place = self._held(key, token)
        if place is None or place.state != state:
            return False
        place.state, place.lease_end = "released", self._now()  # when: see places.py
        self._announce(key)
        self._survey(key, "")
        if completion is not None and (place.redelivered or completion.always):
            self._backend._note_completion(completion)
        return True

    def mark_redelivered(self, key: str, task_id: str) -> bool:
        now = self._now()
        for place in self._survey(key, "").others.values():
            if place.holds(now) and place.holder.task_id == task_id:
                place.redelivered = True
                return True
        return False

    def holder(self, key: str) -> Optional[Dict[str, str]]:
        seen = self._survey(key, "")
        if not seen.others:
            return None
        room = self._rooms[key]
        token, place = seen.soonest()
        h = place.holder
        return {"token": token, "state": place.state, "task_id": h.task_id, "host": h.host, "pid": str(h.pid),
                "since": str(h.since_ms), "hb": str(h.heartbeat_ms), "ttl": str(place.ttl_ms),
                "redelivered": "1" if place.redelivered else "",
                "lease_end": str(int(place.lease_end)), "keep_until": str(int(place.keep_until)),
                "pttl": str(max(int(place.ends() - self._now()), 0)),
                "held": str(len(seen.others)), "limit": str(room.limit)}

    def await_release(self, key: str) -> bool:
        seen = self._survey(key, "")
        room = self._rooms.get(key)
        if room is None or len(seen.others) < room.limit:
            return False
        room.awaited = True
        return True

    def keys(self) -> List[str]:
        return [key for key in list(self._rooms) if self._survey(key, "").others]
