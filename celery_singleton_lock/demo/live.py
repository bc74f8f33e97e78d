"""The demo's live terminal view: counters per policy, who holds which lock, recent events.

On a terminal the view redraws one block in place (ANSI cursor moves, no
curses); elsewhere (a pipe, a CI log, a test) it prints each event as a line
and a status line now and then, so the output stays readable as a log.
"""

from __future__ import annotations

import sys
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import IO, Any, Deque, Dict, List, Mapping, Optional, Sequence

from ..store import LockRecord

__all__ = ["Tally", "LiveView", "format_event", "ROWS", "skipped"]

#: (row label, task name) in display order.
ROWS = (("skip", "demo.skip"), ("retry", "demo.retry"), ("wait", "demo.wait"), ("raise", "demo.raise"),
        ("debounce", "demo.debounce"), ("limit", "demo.limited"), ("window", "demo.windowed"),
        ("beat", "demo.report"))
COLUMNS = ("sent", "running", "ran", "skipped", "retried", "waited", "raised")
_ACTION_WORDS = {"skip": "skipped", "retry": "re-queued (retry)", "wait": "waits for the holder",
                 "raise": "refused: LockedError", "ignore": "ignored (redelivery of the holder)",
                 "replace": "superseded"}


@dataclass
class Tally:
    """Counters per task, fed with the recorded events as they arrive."""

    started: Dict[str, int] = field(default_factory=lambda: defaultdict(int))
    ended: Dict[str, int] = field(default_factory=lambda: defaultdict(int))
    conflicts: Dict[str, Dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    enqueue_conflicts: Dict[str, int] = field(default_factory=lambda: defaultdict(int))
    labels: Dict[str, str] = field(default_factory=dict)
    seen: int = 0

    def feed(self, events: Sequence[Dict[str, Any]]) -> None:
        for event in events:
            task = event["task"]
            if event["kind"] == "start":
                self.started[task] += 1
            elif event["kind"] == "end":
                self.ended[task] += 1
                if event.get("key"):
                    self.labels[event["key"]] = event["label"]
            elif event["kind"] == "conflict":
                self.conflicts[task][event["action"]] += 1
                if event.get("at") == "enqueue":
                    self.enqueue_conflicts[task] += 1
        self.seen += len(events)

    def row(self, task: str, sent: int) -> Dict[str, int]:
        conflicts = self.conflicts.get(task, {})
        return {"sent": sent, "running": self.started[task] - self.ended[task], "ran": self.ended[task],
                "skipped": skipped(conflicts), "retried": conflicts.get("retry", 0),
                "waited": conflicts.get("wait", 0), "raised": conflicts.get("raise", 0)}


def skipped(conflicts: Mapping[str, int]) -> int:
    """Calls that ended without running: skipped duplicates, and calls a newer one superseded."""
    return conflicts.get("skip", 0) + conflicts.get("replace", 0)


def _short(task_id: Optional[str]) -> str:
    return (task_id or "?")[:8]


def format_event(event: Dict[str, Any], t0: float, labels: Dict[str, str]) -> str:
    """One event as a log line: when, which call, what happened."""
    when = f"{event['t'] - t0:6.1f}s"
    if event["kind"] == "start":
        return f"{when}  {event['label']:<16} runs      [{_short(event['id'])}] pid {event['pid']}"
    if event["kind"] == "end":
        return f"{when}  {event['label']:<16} finished  [{_short(event['id'])}] {event['end'] - event['start']:.1f}s"
    label = labels.get(event.get("key") or "", event["task"])
    where = " at enqueue" if event.get("at") == "enqueue" else ""
    if event["action"] == "replace":
        return (f"{when}  {event['task']:<16} superseded [{_short(event.get('id'))}] by the newer call "
                f"[{_short(event.get('holder'))}]")
    return (f"{when}  {label:<16} duplicate [{_short(event.get('id'))}] {_ACTION_WORDS.get(event['action'], event['action'])}"
            f"{where}; lock held by [{_short(event.get('holder'))}]")


class LiveView:
    """Renders progress to ``stream``; redraws in place when it is a terminal."""

    def __init__(self, stream: IO[str] = sys.stdout, tty: Optional[bool] = None, recent: int = 7) -> None:
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self._recent: Deque[str] = deque(maxlen=recent)
        self._drawn = 0
        self._last_status = 0.0

    def say(self, line: str) -> None:
        """A line that stays (phase changes, results): printed above the live block."""
        self._clear()
        print(line, file=self.stream, flush=True)

    def update(self, elapsed: float, phase: str, rows: Dict[str, Dict[str, int]], held: List[LockRecord],
               labels: Dict[str, str], new_lines: List[str]) -> None:
        if not self.tty:
            for line in new_lines:
                print(line, file=self.stream)
            if elapsed - self._last_status >= 2.0:
                self._last_status = elapsed
                totals = {c: sum(r[c] for r in rows.values()) for c in COLUMNS if c != "running"}
                print(f"{elapsed:6.1f}s  -- {phase}: " + ", ".join(f"{k} {v}" for k, v in totals.items())
                      + f"; {len(held)} lock(s) held", file=self.stream)
            self.stream.flush()
            return
        self._recent.extend(new_lines)
        block = self._block(elapsed, phase, rows, held, labels)
        self._clear()
        self.stream.write("\n".join(block) + "\n")
        self.stream.flush()
        self._drawn = len(block)

    def close(self) -> None:
        self._drawn = 0  # leave the last block on screen

    def _clear(self) -> None:
        if self.tty and self._drawn:
            self.stream.write(f"\x1b[{self._drawn}F\x1b[J")
            self._drawn = 0

    def _block(self, elapsed: float, phase: str, rows: Dict[str, Dict[str, int]], held: List[LockRecord],
               labels: Dict[str, str]) -> List[str]:
        lines = [f"\x1b[1mcelery-singleton-lock demo\x1b[0m  {elapsed:5.1f}s  {phase}",
                 f"  {'policy':<9}{'task':<14}" + "".join(f"{c:>9}" for c in COLUMNS)]
        for name, task in ROWS:
            row = rows.get(task, {})
            lines.append(f"  {name:<9}{task:<14}" + "".join(f"{row.get(c, 0):>9}" for c in COLUMNS))
        lines.append(f"  locks held now ({len(held)}):")
        for record in held[:6]:
            state = {"queued": "queued ", "released": "kept by its window, released "}.get(record.state, "")
            lines.append(f"    {labels.get(record.key, record.task):<16} {state}by [{_short(record.task_id)}] "
                         f"pid {record.pid or '?'}  ttl {max(record.pttl_ms, 0) / 1000:4.1f}s"
                         + ("  STALE" if record.stale else ""))
        if len(held) > 6:
            lines.append(f"    ... and {len(held) - 6} more")
        lines.append("  recent:")
        lines.extend(f"    {line}" for line in self._recent)
        return lines
