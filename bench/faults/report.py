"""Write docs/faults.md from the campaign's results (generated; do not edit by hand)."""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .plan import FAULTS, SLOW_PUBLISH, Fault

__all__ = ["write_report"]

_HOW = """\
How to read it. Each row is one run: real `celery worker` processes (prefork) execute three
`LockedTask` tasks with `lock_ttl=3` (`running`; `queued_or_running`; `running` with
`on_locked="retry"`) over 20 distinct arguments each, while the nemesis acts. Every body
reads `self.lock.fencing_token`, makes fenced writes to a downstream Redis (at its start, half-way
for the long bodies, at its end; a Lua script accepts a write only when its fence is not below
the last one accepted for that key) and records its interval, its fence and, at every write,
whether `self.lock.lost` was set. The lock store is a private redis-server the run starts (three
for the quorum), apart from the broker and the history.

- **executions**: bodies started under a lock (guarded executions).
- **overlaps**: pairs of executions of one lock key whose intervals intersect. **told**: of those,
  how many older holders saw `self.lock.lost` set at their first write after the newer one
  started (`-`: none wrote in the overlap).
  In the rows marked `lock_limit=3` and *window* (every task with `lock_limit=3`, or
  `lock_limit=2, lock_window=1.5`), **overlaps** count places taken while the limit was already
  held (a place runs from the start, or the publish for `queued_or_running` under a window, until
  the window's end or the body's end if later; 0.25 s allowed for the records' clock), **told**
  those where fewer than the limit of the older holders never learnt they lost their place (a
  `lock.lost` write, a refused fence or a `lock_lost` signal); the downstream store accepts a
  write while its fence is among the key's 3 (2) largest.
- **stale accepted**: writes accepted although an execution of the key with a larger fence had
  already started (in the limited rows: although as many as the limit, with larger fences, had
  held places at once, each from its start to its body's or window's end); **wrongly refused**:
  writes refused although no execution with a larger fence had started (in the limited rows:
  fewer than the limit).
- **token reuse / regression**: one fence handed to two executions of a key; an execution of a
  key that started after another had read its fence handed a smaller one.
- **lost**: published messages (the publisher saw its own id back) that neither ran to the end,
  nor were skipped as duplicates, nor failed, nor are still queued, after the workers drained.
- **locks left / no TTL**: keys under the lock prefix after the drain and a warm stop (fencing
  counters apart), and how many of them would never expire.
- **tracebacks**: in the worker logs, killed workers' included.
"""

_LATEST_HOW = """\
The latest-wins rows run other tasks (bench/faults/latest.py): `on_locked="replace"` with
`lock_scope="queued_or_running"` and with `"queued"`, or `lock_debounce=1` and `lock_debounce=1,
lock_debounce_max=2.5` (bursts longer than the cap), `lock_ttl=3`, bodies that record themselves as
above and return their own arguments. Three publisher processes (two in `--smoke`) publish bursts of
calls, each to keys of its own (2 per task), while the nemesis
SIGKILLs one every 1-4 s and starts another in its place. Each call is recorded before
`apply_async`, once the broker took its message (`after_task_publish`), and after. The publishers
are slow on purpose, {hold} ms in `before_task_publish` (after the call's generation was reserved and,
for the first call of a quiet `queued_or_running` key, its enqueue lock taken) and {hold} ms in
`after_task_publish` (before the call is recorded as its key's newest), so that random kills land in
those moments often enough to count. A call is known to reach the broker when it was
recorded so, or when a body, a result or a `lock_conflict` signal saw it; after the drain every
message that reached the broker has been seen so. Every result stored is heard (Celery's Redis
backend publishes each), overwritten ones included.

- **calls / reached broker**: calls begun, and those known to reach the broker.
- **killed in `apply_async`**: calls whose publisher was killed inside `apply_async`: (**before
  publishing**, its generation perhaps reserved / **after**, before it was recorded as the newest /
  **unknown**, seen downstream only).
- **bodies**: bodies of these calls that started; **answered `None`**: calls answered as superseded.
- **superseded ran**: a call answered `None` whose body started. **wrong answers**: a call whose body
  started answered anything but its own arguments, or not so at the end.
- **lost**: calls known to reach the broker that did not run to their end while no newer call of
  their key did (a burst whose newest call is lost, the last one included). **unanswered**: calls known to reach the broker with no result at the end (`PENDING` for ever).
- **stale runs**: bodies that started more than 0.25 s after a newer call of their key reached the
  broker (two calls of one burst both ran, or the older ran after the newer was due); (**whose newer
  call was never recorded as published**: its publisher was killed first).
"""


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _row(fault: Fault, r: dict) -> str:
    told = f"{r['told']} of {r['overlaps'] - r['no_later_write']}" if r["overlaps"] - r["no_later_write"] else "-"
    figures = [r["executions"], r["overlaps"], told, r["stale_accepted"], r["wrongly_refused"],
               f"{r['token_reuse']} / {r['token_regression']}", r["fates"]["lost"],
               f"{r['locks_left']} / {r['no_ttl']}", sum(r["tracebacks"].values())]
    troubled = r["fates"]["lost"] or r["fates"]["failed"] or (r["lost_signals"] and not r["overlaps"]) \
        or r.get("calls_lost") or r.get("unanswered")
    promise = fault.promise + (f". **Note**: {fault.note}" if fault.note and troubled else "")
    return "| " + " | ".join(_cell(x) for x in [fault.title, *figures, promise, f"`{fault.command}`"]) + " |"


def _fates(fault: Fault, r: dict) -> str:
    f = r["fates"]
    cells = [fault.name, r["sent"], r["refused_at_publish"], r["publish_errors"], r["published"], f["ran"],
             f["skipped"], r["retried"], r["ignored_redeliveries"], f["failed"], f["queued"], f["lost"],
             r["lost_signals"], r["nemesis_actions"], r["elapsed"]]
    return "| " + " | ".join(_cell(x) for x in cells) + " |"


def _details(results: Dict[str, dict], kept: List[Optional[str]]) -> List[str]:
    lines: List[str] = [line for line in kept if line]
    for name, r in results.items():
        notes = []
        if r["tracebacks"]:
            notes.append("tracebacks: " + "; ".join(f"{n} x `{t}`" for t, n in r["tracebacks"].items()))
        if r["overlap_examples"]:
            e = r["overlap_examples"][0]
            notes.append(f"overlap e.g. `{e['key']}`: {e['by']} s, fences {e['old_fence']} then {e['new_fence']}, "
                         f"lock_lost signals for {r['lost_signal']} of the older holders")
        if r["lost_ids"]:
            notes.append("lost messages: " + ", ".join(f"`{i}`" for i in r["lost_ids"]))
        if r["write_examples"]:
            notes.append(f"first suspect write: `{r['write_examples'][0]}`")
        if r.get("lost_keys"):
            notes.append("keys with calls lost: " + ", ".join(f"`{k}`" for k in r["lost_keys"]))
        if r.get("left_keys"):
            notes.append("locks left: " + ", ".join(f"`{k}`" for k in r["left_keys"]))
        if r.get("latest_examples"):
            notes.append(f"first latest-wins finding: `{r['latest_examples'][0]}`")
        if notes:
            lines.append(f"- **{name}**: " + " — ".join(notes))
    return lines or ["- nothing: no traceback, overlap, lost message or suspect write in any run."]


def _latest(fault: Fault, r: dict) -> str:
    cells = [f"`{fault.name}`", r["calls"], r["reached_broker"],
             f"{r['killed_mid_call']} ({r['killed_before_send']} / {r['killed_after_send']} / "
             f"{r['killed_unsent_arrived']})", r["bodies"],
             r["answered_none"], r["superseded_ran"], r["wrong_answers"], r["calls_lost"], r["unanswered"],
             f"{r['stale_runs']} ({r['stale_unrecorded']})", r["overlaps"], r["nemesis_actions"]]
    return "| " + " | ".join(_cell(x) for x in cells) + " |"


def _latest_table(faults: List[Fault], results: Dict[str, dict], kept: "Kept") -> List[str]:
    rows = [_latest(f, results[f.name]) if f.name in results else kept[f.name][3] for f in faults if f.latest]
    rows = [row for row in rows if row]
    if not rows:
        return []
    return ["## Latest call wins, publishers killed", "", _LATEST_HOW.format(hold=round(SLOW_PUBLISH * 1000)),
            "| fault | calls | reached broker | killed in `apply_async` (before publishing / after / unknown, seen "
            "downstream) | bodies | answered `None` | superseded ran | wrong answers | lost | unanswered "
            "| stale runs (newer never recorded) | overlaps | publisher kills |",
            "|---|" + "---:|" * 12, *rows, ""]


#: Each kept fault's results row, fates row, details line and latest-wins row.
Kept = Dict[str, Tuple[str, str, Optional[str], Optional[str]]]

_KEPT_LINE = re.compile(r"^The rows of (.*) are kept from (?:the|an) earlier run: (.*)$")


def kept_rows(previous: str) -> Tuple[str, Kept]:
    """From an earlier faults.md: its "Generated by" line, and each fault's results row, fates
    row, details line and latest-wins row, by fault name."""
    lines = previous.splitlines()
    generated = next((line for line in lines if line.startswith("Generated by")), "")
    kept: Kept = {}
    for fault in FAULTS:
        row = next((line for line in lines if line.startswith(f"| {_cell(fault.title)} |")), None)
        fates = next((line for line in lines if line.startswith(f"| {fault.name} |")), None)
        if row and fates:
            detail = next((line for line in lines if line.startswith(f"- **{fault.name}**:")), None)
            latest = next((line for line in lines if line.startswith(f"| `{fault.name}` |")), None)
            kept[fault.name] = (row, fates, detail, latest)
    return generated, kept


def _provenance(previous: str, kept: Kept) -> List[str]:
    """Where each kept row comes from: the earlier page's own run, or the run that page kept it from."""
    lines = previous.splitlines()
    generated = next((line for line in lines if line.startswith("Generated by")), "")
    source = {name: generated.replace("Generated by", "generated by", 1).replace(
        " Do not edit: run the command again.", "") for name in kept}
    for line in lines:
        match = _KEPT_LINE.match(line)
        if match:
            for name in re.findall(r"`([^`]+)`", match.group(1)):
                if name in source:
                    source[name] = match.group(2)
    by_source: Dict[str, List[str]] = {}
    for fault in FAULTS:
        if fault.name in source:
            by_source.setdefault(source[fault.name], []).append(fault.name)
    return [f"The rows of {', '.join(f'`{n}`' for n in names)} are kept from an earlier run: {text}"
            for text, names in by_source.items()]


def write_report(results: Dict[str, dict], out_dir: str, meta: Mapping[str, Any], previous: str = "") -> str:
    """docs/faults.md from ``results``; with ``previous`` (an earlier faults.md), the rows of the
    faults not in ``results`` are kept as that run wrote them, and the page says so."""
    kept = kept_rows(previous)[1] if previous else {}
    kept = {name: rows for name, rows in kept.items() if name not in results}
    faults = [f for f in FAULTS if f.name in results or f.name in kept]
    executions = sum(r["executions"] for r in results.values())
    provenance = [f"Generated by `{meta['command']}` ({meta['mode']}) on {meta['when']}, {meta['cpus']} CPUs, "
                  f"Redis {meta['redis_version']}, celery {meta['celery']}, kombu {meta['kombu']}: "
                  f"**{executions} guarded executions** in {len(results)} runs, **{meta['elapsed'] / 60:.1f} min** "
                  "wall time. Do not edit: run the command again."]
    if kept:
        provenance += _provenance(previous, kept)
    lines = [
        "# Fault campaign", "",
        *provenance, "",
        _HOW,
        "## Results", "",
        "| fault | executions | overlaps | told | stale accepted | wrongly refused | token reuse / regression "
        "| lost messages | locks left / no TTL | tracebacks | what the library promises | command |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
        *[_row(f, results[f.name]) if f.name in results else kept[f.name][0] for f in faults], "",
        "## Every message's fate", "",
        "Sent = refused at publish (a `queued_or_running` duplicate answered with the holder's result) "
        "+ publish errors (raised to the caller) + published; published = ran + skipped + failed + "
        "queued + lost. Retried and ignored count lock conflicts (a message may be retried several "
        "times before it runs; an ignored redelivery is a second copy of a message that ran). `lock_lost` "
        "signals count every holder told it lost its lock, by the heartbeat or at its release, overlap or not.", "",
        "| fault | sent | refused at publish | publish errors | published | ran | skipped | retried "
        "| ignored redeliveries | failed | queued | lost | `lock_lost` signals | nemesis actions | seconds |",
        "|---|" + "---:|" * 14,
        *[_fates(f, results[f.name]) if f.name in results else kept[f.name][1] for f in faults], "",
        *_latest_table(faults, results, kept),
        "## Details", "", *_details(results, [kept[f.name][2] for f in faults if f.name in kept]), "",
    ]
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "faults.md")
    with open(path, "w") as handle:
        handle.write("\n".join(lines))
    return path
