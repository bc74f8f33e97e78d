"""The limits section of docs/benchmarks.md, written with the full report or spliced into it alone.

``python -m bench --only limits,ratelimit`` measures that section only: it replaces the
section in the existing page (between its markers) and leaves the rest of the page as the
last full run wrote it.
"""

from __future__ import annotations

import math
import os
from typing import List, Optional, Sequence, Tuple

from .limits import LIMIT1, LIMIT3, REDIS_PY, TODAY, WINDOW
from .stats import Series, Summary
from .worker_path import BASELINE

__all__ = ["limits_section", "splice", "BEGIN", "END"]

BEGIN, END = "<!-- limits: begin -->", "<!-- limits: end -->"

Target = Tuple[str, str, str]

SLACK = 0.1  # seconds: the most a body's start record may trail its place's grant, on a loaded machine


def _f(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _over(series: Series, variant: str) -> Summary:
    """µs the variant adds over a plain task, median of the differences within each round."""
    return Summary.of([v - b for v, b in zip(series.rounds[variant], series.rounds[BASELINE])])


def _cost(cost: dict, command: str, targets: List[Target]) -> List[str]:
    wall, server, trips, commands = cost["wall"], cost["server_us"], cost["trips"], cost["commands"]
    today_wall = _over(wall, TODAY).median
    rows = []
    for variant in wall.variants:
        over = _over(wall, variant).median
        s = server.summary(variant)
        rows.append([variant, _f(wall.summary(variant).median), f"+{_f(over)}",
                     "" if variant == BASELINE else f"{over / today_wall:.2f}", _f(s.median),
                     f"{_f(s.low)} – {_f(s.high)}",
                     "" if variant == BASELINE else f"{server.ratio(variant, TODAY).median:.2f}",
                     f"{trips[variant]:g}", _commands(commands[variant])])
    limited = [LIMIT3, WINDOW]
    targets.append(("a limited or windowed task: one waited round trip to take its place, one to give it back",
                    ", ".join(f"{v}: {trips[v]:g} (today: {trips[TODAY]:g})" for v in limited),
                    _verdict(all(trips[v] <= trips[TODAY] for v in limited))))
    same = trips[LIMIT1] == trips[TODAY] and commands[LIMIT1] == commands[TODAY]
    ratio = server.ratio(LIMIT1, TODAY)
    targets.append(("`lock_limit=1` with no window costs what today's lock costs: the same commands and "
                    "round trips",
                    f"{_commands(commands[LIMIT1])} vs {_commands(commands[TODAY])}; {trips[LIMIT1]:g} vs "
                    f"{trips[TODAY]:g} round trips; server µs × {ratio.median:.2f} ({ratio.low:.2f} – "
                    f"{ratio.high:.2f} over rounds)", _verdict(same)))
    return ["## Limits and windows: what a place costs",
            f"Produced by `{command}`. Celery's tracer runs each variant's empty task in the bench process "
            f"({cost['count']} distinct calls per round, {len(wall.rounds[TODAY])} interleaved rounds, no "
            "broker or pool), as in *The worker's side alone*; the lock store's INFO commandstats is read "
            "around each round (nothing else uses it meanwhile), and redis-py's connection is counted for "
            "round trips waited for. `lock_limit=3` and `lock_window=60` take a place in the key's room of "
            "places (`place_acquire.lua`) and give it back (`place_release.lua`); `lock_limit=1` with no "
            "window takes today's path. *Ratios* are to today's lock in the same run (worker time: of the "
            "time over a plain task; server time: the median of the per-round ratios). {REDIS_PY} takes and releases redis-py's `Lock` (no renewal, no "
            "fence, no holder record) in a plain task's body: the floor of a hand-rolled lock.",
            _table(["variant", "µs per task", "over plain", "× today (worker)", "server µs per task",
                    "min – max", "× today (server)", "round trips", "commands per task (a script's own included)"], rows)]


def _commands(per_task: dict) -> str:
    return ", ".join(f"{name} {n:g}" for name, n in sorted(per_task.items())) or "none"


def _storm(storm: dict, command: str, targets: List[Target]) -> List[str]:
    rate: Series = storm["rate"]
    rows = []
    for variant in rate.variants:
        most = storm["most"][variant]
        r = rate.summary(variant)
        requeues = storm.get("requeues", {}).get(variant, [])
        gaps = sorted(storm.get("gaps", {}).get(variant, []))
        rows.append([variant, max(most), ", ".join(map(str, most)), _f(min(storm["span"][variant]), 3),
                     _f(r.median), f"{_f(r.low)} – {_f(r.high)}",
                     _f(max(requeues), 2) if requeues else "n/a",
                     _f(gaps[len(gaps) // 2], 3) if gaps else "n/a"])
    # A place is granted a little before its body records its start: a limiter that keeps the
    # window lets one more start in only by that dispatch delay, never by a large part of the window.
    ours = min(storm["span"][rate.variants[0]])
    targets.append((f"rate storm: no {storm['times'] + 1} starts of a key within {storm['per']} s, "
                    f"short of the delay between a grant and its body's start record (< {SLACK} s)",
                    f"ours: shortest span of {storm['times'] + 1} starts {_f(ours, 3)} s"
                    + "".join(f"; {v}: {_f(min(storm['span'][v]), 3)} s" for v in rate.variants[1:]),
                    _verdict(ours >= storm["per"] - SLACK)))
    ideal_end = (math.ceil(storm["per_key"] / storm["times"]) - 1) * storm["per"]
    return ["## Per-key rate limit under a storm",
            f"Produced by `{command}`. A prefork worker (4 children) is sent {storm['per_key']} bursts of "
            f"{storm['keys']} keys at once ({storm['keys'] * storm['per_key']} messages, 10 ms bodies), each "
            f"key limited to {storm['times']} starts per {storm['per']} s: ours with `lock_limit="
            f"{storm['times']}, lock_window={storm['per']}, on_locked=\"retry\"` (a refused call is handed a turn and "
            f"re-queued to it), celery-heimdall with `heimdall={{\"times\": {storm['times']}, \"per\": "
            f"{storm['per']}, \"key\": ...}}` (a refused call retried with its countdown). Judged from the "
            f"starts the bodies record: the most starts of one key in any {storm['per']} s span (limit: "
            f"{storm['times']}; the body's record trails its place's grant by the dispatch delay, so the "
            f"shortest span holding {storm['times'] + 1} starts of a key shows by how much a window was short), "
            "and starts per second from the first publish to the last start (the limit "
            f"allows {storm['ideal']:g} a second in steady state; a perfect limiter starts the last burst "
            f"{ideal_end:g} s after the first). Re-queues per call: the lock's re-queues the calls that ran had "
            "made, per call, the worst round (ours only: heimdall's are not counted); from a window's end "
            f"to the start it lets in: for each start of a key after its first {storm['times']}, how long "
            f"after the window of the start {storm['times']} before it ended (median).",
            _table(["variant", f"most starts in {storm['per']} s", "per round",
                    f"shortest span of {storm['times'] + 1} starts, s", "starts per s (median)", "min – max",
                    "re-queues per call", "window's end to next start, s"], rows)]


def _verdict(ok: Optional[bool]) -> str:
    return "n/a" if ok is None else ("**yes**" if ok else "**no**")


def limits_section(results: dict, command: str, targets: List[Target]) -> List[str]:
    """The section's markdown blocks (empty when neither part ran), between its markers."""
    blocks: List[str] = []
    if results.get("limits"):
        blocks += _cost(results["limits"], command, targets)
    if results.get("ratelimit"):
        blocks += _storm(results["ratelimit"], command, targets)
    if not blocks:
        return []
    verdicts = _table(["comparison", "measured", "verdict"], targets) if targets else ""
    return [BEGIN, *blocks, *([verdicts] if verdicts else []), END]


def splice(out_dir: str, blocks: List[str], begin: str = BEGIN, end: str = END) -> str:
    """Put the section (between ``begin`` and ``end``) into the existing benchmarks.md: in place of
    the old one, or before the comparisons when the page has none yet."""
    path = os.path.join(out_dir, "benchmarks.md")
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    section = "\n\n".join(blocks) + "\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + section.rstrip("\n") + rest.split(end, 1)[1]
    else:
        anchor = "## How it compares, in this run"
        text = text.replace(anchor, section + "\n" + anchor, 1) if anchor in text else text + "\n" + section
    with open(path, "w") as handle:
        handle.write(text)
    return path
