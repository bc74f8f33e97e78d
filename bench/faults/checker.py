"""Judge a run's history: overlaps, what the old holder knew, fenced writes, every message's fate.

All times are wall-clock times from one machine. An execution's interval runs from its
start record (taken before it read its fence) to its end record; one killed mid-body has
no end record and ends at its last write (or its start).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Set

from .history import History

__all__ = ["Execution", "executions", "check_overlaps", "check_places", "check_writes", "check_tokens", "account",
           "FATES", "CLOCK_SLACK"]

#: Seconds a window may look short by, judged from records: a place is taken a little before
#: its start (or a little after its publish) record, on the store's clock.
CLOCK_SLACK = 0.25

#: The fate of a published message, in the order a message is judged.
FATES = ("ran", "skipped", "failed", "queued", "lost")


@dataclass
class Execution:
    exec: str
    key: str
    task_id: str
    fence: Optional[int]
    start: float
    end: Optional[float]
    writes: List[dict] = field(default_factory=list)
    #: When it had read its fence (None in a record that does not say: its start is taken).
    fenced: Optional[float] = None

    @property
    def until(self) -> float:
        if self.end is not None:
            return self.end
        return max([self.start] + [w["t"] for w in self.writes])


def executions(history: History) -> List[Execution]:
    ends = {e["exec"]: e["end"] for e in history.ends}
    found = {s["exec"]: Execution(s["exec"], s["key"], s["task_id"], s.get("fence"), s["start"], ends.get(s["exec"]),
                                  fenced=s.get("fenced"))
             for s in history.starts}
    for write in history.writes:
        if write["exec"] in found:
            found[write["exec"]].writes.append(write)
    for each in found.values():
        each.writes.sort(key=lambda w: w["t"])
    return sorted(found.values(), key=lambda e: e.start)


def _by_key(runs: Iterable[Execution]) -> Dict[str, List[Execution]]:
    grouped: Dict[str, List[Execution]] = defaultdict(list)
    for run in runs:
        grouped[run.key].append(run)
    return grouped


def check_overlaps(runs: List[Execution], lost_signals: Iterable[dict]) -> dict:
    """Pairs of one key's executions whose intervals intersect, and whether the older one was told.

    Told: the older holder's first write after the newer one started saw ``lock.lost`` set.
    An older holder that made no write after that moment is counted apart (nothing to tell).
    """
    signalled = {s["task_id"] for s in lost_signals}
    overlaps = told = silent = signal_sent = 0
    examples: List[dict] = []
    for same in _by_key(runs).values():
        for i, old in enumerate(same):
            for new in same[i + 1:]:
                if new.start >= old.until:
                    continue
                overlaps += 1
                signal_sent += old.task_id in signalled
                later = [w for w in old.writes if w["t"] > new.start]
                if not later:
                    silent += 1
                elif later[0]["lost"]:
                    told += 1
                if len(examples) < 5:
                    examples.append({"key": old.key, "old": old.task_id, "new": new.task_id,
                                     "by": round(old.until - new.start, 3), "old_fence": old.fence,
                                     "new_fence": new.fence})
    return {"overlaps": overlaps, "told": told, "no_later_write": silent, "lost_signal": signal_sent,
            "overlap_examples": examples}


def _held_until(taken: float, run: Execution, window: float) -> float:
    """Until when an execution whose place was taken at ``taken`` surely held it: its body's end,
    or its window's end (less :data:`CLOCK_SLACK`) if later."""
    return max(taken + max(window - CLOCK_SLACK, 0.0), run.until)


def check_places(runs: List[Execution], lost_signals: Iterable[dict], limit: int, window: float,
                 taken: Mapping[str, float]) -> dict:
    """Moments a key had more than ``limit`` places held, and whether an older holder was told.

    A place runs from when it was taken (``taken[task_id]``, the publish time for
    ``queued*`` scopes; the start otherwise) until ``window`` seconds later (less
    :data:`CLOCK_SLACK`) or the body's end if later. An over-limit moment is a place taken
    while ``limit`` others were held; it is told when fewer than ``limit`` of those others
    never learnt they lost theirs (a ``lock.lost`` write, a refused fence or a ``lock_lost``
    signal). Places are counted per call (task id): a redelivered copy of a call runs in the place
    its first delivery took. Figures under the keys :func:`check_overlaps` uses, so the report reads both.
    """
    signalled = {s["task_id"] for s in lost_signals}
    over = told = signal_sent = 0
    examples: List[dict] = []

    def knew(run: Execution) -> bool:
        return run.fence is None or run.task_id in signalled or any(w["lost"] for w in run.writes)

    for same in _by_key(runs).values():
        places = sorted(((taken.get(r.task_id, r.start), r) for r in same), key=lambda p: p[0])
        for i, (at, new) in enumerate(places):
            # One place per call: a redelivered copy of a call runs in that call's place.
            held = [old for t, old in places[:i] if _held_until(t, old, window) > at and old.task_id != new.task_id]
            if len({old.task_id for old in held}) < limit:
                continue
            over += 1
            unaware = {old.task_id for old in held} - {old.task_id for old in held if knew(old)}
            told += len(unaware) < limit
            signal_sent += any(old.task_id in signalled for old in held)
            if len(examples) < 5:
                examples.append({"key": new.key, "old": [o.task_id for o in held], "new": new.task_id,
                                 "by": round(min(o.until for o in held) - new.start, 3),
                                 "old_fence": [o.fence for o in held], "new_fence": new.fence,
                                 "unaware": len(unaware)})
    return {"overlaps": over, "told": told, "no_later_write": 0, "lost_signal": signal_sent,
            "overlap_examples": examples}


def _held_at_once(runs: List[Execution], since: Mapping[str, float], limit: int, window: float) -> bool:
    """Whether ``limit`` of ``runs`` held places at one moment: as one of them took its place
    (at ``since[exec]``), the others that had taken theirs still held them."""
    for came in runs:
        at = since[came.exec]
        if sum(1 for o in runs if o is came or since[o.exec] <= at < _held_until(since[o.exec], o, window)) >= limit:
            return True
    return False


def check_writes(runs: List[Execution], limit: int = 1, window: float = 0.0,
                 taken: Optional[Mapping[str, float]] = None) -> dict:
    """Stale writes accepted and writes wrongly refused, judged against who had started when.

    Each failure is counted only where it is sure. An accepted write is stale when its holder
    had surely lost its place before it: at some moment before the write, ``limit`` executions
    of its key with larger fences held places at once (for a singleton lock: one had started),
    a place held from when it was taken (``taken[task_id]``, as in :func:`check_places`, else
    the start record) to the body's end, or to the window's end if later (:func:`_held_until`).
    A refused write is wrong when fewer than ``limit`` executions with larger fences had even
    started: the downstream store refuses once it has seen ``limit`` larger fences, which under a
    limit above one may also refuse a holder that kept its place (newer holders that came one
    after another), and that refusal is the store's caution.
    """
    taken = taken or {}
    stale_accepted = stale_refused = wrongly_refused = accepted = 0
    examples: List[dict] = []
    for same in _by_key(runs).values():
        since = {o.exec: taken.get(o.task_id, o.start) for o in same}
        for run in same:
            for write in run.writes:
                newer = [o for o in same if o.fence is not None and o.fence > write["fence"] and o.start < write["t"]]
                accepted += write["accepted"]
                if write["accepted"]:
                    if _held_at_once(newer, since, limit, window):
                        stale_accepted += 1
                        examples.append({"kind": "stale accepted", **write})
                elif len(newer) >= limit:
                    stale_refused += 1
                else:
                    wrongly_refused += 1
                    examples.append({"kind": "wrongly refused", **write})
    return {"writes": sum(len(r.writes) for r in runs), "accepted": accepted, "stale_accepted": stale_accepted,
            "stale_refused": stale_refused, "wrongly_refused": wrongly_refused, "write_examples": examples[:5]}


def check_tokens(runs: List[Execution]) -> dict:
    """Fences handed to two executions of one key (reuse), or a smaller one to an execution that
    started after another had read its fence (regression). Holders of a limit above one read
    their fences in any order against their start records: only a fence read before another
    execution started must be the smaller."""
    reuse = regression = 0
    for same in _by_key(runs).values():
        fenced = [r for r in same if r.fence is not None]
        reuse += sum(n - 1 for n in Counter(r.fence for r in fenced).values() if n > 1)
        for earlier in fenced:
            read = earlier.fenced if earlier.fenced is not None else earlier.start
            regression += sum(1 for later in fenced if later.start > read and later.fence < earlier.fence)
    return {"token_reuse": reuse, "token_regression": regression,
            "fence_refused": sum(1 for r in runs if r.fence is None)}


def account(history: History, runs: List[Execution], states: Mapping[str, str], queued: Set[str],
            queue_left: int) -> dict:
    """The fate of every published message (task id).

    ``ran``: a body of that id ran to its end. ``skipped``: a duplicate the lock skipped
    (SUCCESS without a body, at run time or, for a call that kept its own id, at enqueue), or a call
    a newer one superseded (``replace`` at run time). ``failed``: FAILURE in the result backend. ``queued``: still in
    the broker after the drain. ``lost``: none of those (a body killed and never run again,
    a message only ever ignored as a redelivery, or never delivered).
    """
    published = [p for p in history.published if p["published"]]
    completed = {r.task_id for r in runs if r.end is not None}
    actions: Dict[str, Counter] = defaultdict(Counter)
    for conflict in history.conflicts:
        actions[conflict["task_id"]][f"{conflict['action']}@{conflict['at']}"] += 1
    fates: Counter = Counter()
    lost: List[str] = []
    details: List[dict] = []
    starts = Counter(r.task_id for r in runs)
    for message in published:
        tid = message["task_id"]
        if tid in completed:
            fate = "ran"
        elif states.get(tid) == "SUCCESS" and (actions[tid]["skip@run"] or actions[tid]["skip@enqueue"]
                                               or actions[tid]["replace@run"]):
            # skip@enqueue with a result: a call whose id the caller chose met a holder that names
            # no task (a lock its live holder took back after the store restarted empty)
            fate = "skipped"
        elif states.get(tid) == "FAILURE":
            fate = "failed"
        elif tid in queued:
            fate = "queued"
        else:
            fate = "lost"
            lost.append(f"{message['task']} {tid}")
            # What happened to it, for whoever reads the report: its result state, what its
            # deliveries did at the lock, and how many bodies of it started.
            details.append({"task_id": tid, "state": states.get(tid), "actions": dict(actions[tid]),
                            "starts": starts[tid], "published": message.get("t")})
        fates[fate] += 1
    totals: Counter = Counter()
    for counter in actions.values():
        totals.update(counter)
    return {"sent": len(history.published), "published": len(published),
            "refused_at_publish": sum(1 for p in history.published if not p["published"] and not p.get("error")),
            "publish_errors": sum(1 for p in history.published if p.get("error")),
            "fates": {fate: fates[fate] for fate in FATES}, "retried": totals["retry@run"],
            "ignored_redeliveries": totals["ignore@run"], "queue_left": queue_left,
            "lost_ids": lost[:10], "lost_details": details[:10]}
