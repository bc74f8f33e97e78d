"""Judge a latest-wins run (``on_locked="replace"``, ``lock_debounce``) whose publishers were killed.

What can be known of a call from outside: the publisher recorded its *intent* before
``apply_async``; its message was *sent* once Celery's ``after_task_publish`` recorded it; it was
*published* once ``apply_async`` returned. A publisher killed in between leaves a call whose
message may or may not be in the broker: it is known to have reached the broker when it was sent,
or when anything downstream saw it (a body, a result, a ``lock_conflict`` signal). After the drain,
a message that reached the broker has left a trace, so the calls known to reach it are all of them.

The rules, per key (one task and one ``item``; a key's calls come from one publisher at a time, so
their intent order is their generation order):

- **superseded ran**: a call answered ``SUCCESS None`` (superseded) at any moment, whose body started;
- **wrong answers**: a call whose body started that was answered anything but its own arguments
  (``None`` included), or that ran to its end and is not ``SUCCESS`` with them at the end;
- **lost**: a call known to reach the broker that did not run to its end, and no newer call of its
  key did (a burst whose newest call is lost, the key's last burst included);
- **unanswered**: a call known to reach the broker with no result at the end (``PENDING`` for ever);
- **stale runs**: a body that started although a newer call of its key had reached the broker
  (its ``sent`` record, else its ``published`` one) more than ``slack`` seconds before: two calls
  of one burst both ran, or the older one ran after the newer was due. Split into those whose newer
  call had been recorded as published and those whose publisher was killed before saying so.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Dict, List, Mapping, Optional

from .checker import CLOCK_SLACK, Execution
from .history import History

__all__ = ["check_latest"]


def _reached(history: History, runs: List[Execution], answers: Mapping[str, List[dict]],
             states: Mapping[str, str]) -> Dict[str, float]:
    """The calls known to have reached the broker, and the earliest time known for it (``inf``:
    only downstream traces tell, no time of its own)."""
    at: Dict[str, float] = {}
    for record in history.sent:
        at[record["task_id"]] = min(at.get(record["task_id"], record["t"]), record["t"])
    for record in history.published:
        if record.get("published"):
            at.setdefault(record["task_id"], record["t"])
    traced = {r.task_id for r in runs} | set(answers) | set(states) | {c["task_id"] for c in history.conflicts}
    for tid in traced:
        at.setdefault(tid, float("inf"))
    return at


def check_latest(history: History, runs: List[Execution], answers: Mapping[str, List[dict]],
                 states: Mapping[str, str], results: Optional[Mapping[str, Any]] = None,
                 slack: float = CLOCK_SLACK) -> dict:
    """The figures of the rules above. ``answers``: every result heard per task id (``status``,
    ``result``); ``states``/``results``: each call's final state and result in the backend."""
    results = results or {}
    intents = {i["task_id"]: i for i in history.intents}
    recorded = {p["task_id"] for p in history.published if p.get("published")}
    sent = {s["task_id"] for s in history.sent}
    reached = {tid: t for tid, t in _reached(history, runs, answers, states).items() if tid in intents}
    started = {r.task_id for r in runs}
    completed = {r.task_id for r in runs if r.end is not None}
    examples: List[dict] = []

    def example(kind: str, **fields: Any) -> None:
        if sum(1 for e in examples if e["kind"] == kind) < 3:  # a few of each kind
            examples.append({"kind": kind, **fields})

    superseded_ran = wrong = 0
    answered_none = set()
    for tid, intent in intents.items():
        heard = [a for a in answers.get(tid, []) if a.get("status") == "SUCCESS"]
        if any(a.get("result") is None for a in heard):
            answered_none.add(tid)
        if tid not in started:
            continue
        if tid in answered_none:
            superseded_ran += 1
            example("superseded ran", task_id=tid)
        own = intent["args"]
        if any(a.get("result") != own for a in heard) or (
                tid in completed and (states.get(tid) != "SUCCESS" or results.get(tid, own) != own)):
            wrong += 1
            example("wrong answer", task_id=tid, heard=heard[:3], final=states.get(tid))

    by_key: Dict[str, List[dict]] = defaultdict(list)
    for intent in sorted(intents.values(), key=lambda i: i["t"]):
        by_key[intent["key"]].append(intent)
    calls_lost = unanswered = stale = stale_unrecorded = 0
    lost_keys: List[str] = []
    starts = defaultdict(list)
    for run in runs:
        starts[run.task_id].append(run.start)
    for key, calls in by_key.items():
        known = [c for c in calls if c["task_id"] in reached]
        for i, call in enumerate(known):
            if not any(c["task_id"] in completed for c in known[i:]):
                calls_lost += 1
                lost_keys += [key] if key not in lost_keys else []
                example("lost", key=key, task_id=call["task_id"], state=states.get(call["task_id"]))
        for call in known:
            if call["task_id"] not in states:
                unanswered += 1
                example("unanswered", key=key, task_id=call["task_id"])
        for i, call in enumerate(calls):
            for start in starts.get(call["task_id"], []):
                newer = [c for c in calls[i + 1:] if reached.get(c["task_id"], float("inf")) < start - slack]
                if not newer:
                    continue
                stale += 1
                unrecorded = newer[0]["task_id"] not in recorded
                stale_unrecorded += unrecorded
                example("stale run", key=key, task_id=call["task_id"], newer=newer[0]["task_id"],
                        newer_recorded=not unrecorded,
                        by=round(start - reached[newer[0]["task_id"]], 3))
    mid_call = [tid for tid in intents if tid not in {p["task_id"] for p in history.published}]
    return {"calls": len(intents), "reached_broker": len(reached), "recorded": len(recorded & set(intents)),
            "killed_mid_call": len(mid_call), "killed_after_send": sum(1 for t in mid_call if t in sent),
            "killed_before_send": sum(1 for t in mid_call if t not in reached),
            "killed_unsent_arrived": sum(1 for t in mid_call if t not in sent and t in reached),
            "bodies": len(started & set(intents)), "answered_none": len(answered_none),
            "superseded_ran": superseded_ran, "wrong_answers": wrong, "calls_lost": calls_lost,
            "unanswered": unanswered, "stale_runs": stale, "stale_unrecorded": stale_unrecorded,
            "keys": len(by_key), "lost_keys": lost_keys, "latest_examples": examples}
