"""The demo's end: a summary table judged from the recorded intervals, and an optional PNG timeline.

``overlaps`` counts executions of one lock key that started while another
still ran (for the limited task: while its limit of others still ran): it is
computed from what the task bodies wrote, so a broken lock shows up here
whatever the library believes. The limited and windowed tasks are judged
below it (:mod:`.judge`): what each promised, and what was seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Sequence

from .live import ROWS, skipped
from .judge import Verdict, limit_of
from .record import Records, overlaps

__all__ = ["SummaryRow", "summarize", "format_summary", "plot_timeline"]

_COLUMNS = ("sent", "ran", "skipped", "retried", "waited", "raised", "overlaps")


@dataclass(frozen=True)
class SummaryRow:
    policy: str
    task: str
    sent: int
    ran: int
    skipped: int
    retried: int
    waited: int
    raised: int
    overlaps: int
    judged: bool = True  # beat's row is not judged when beat ran before and after this run (--external)

    @property
    def accounted(self) -> bool:
        """Every call ran once, or ended as a skipped or refused duplicate (retries and waits run later)."""
        return not self.judged or self.sent == self.ran + self.skipped + self.raised


def summarize(records: Records, sent: Mapping[str, int], judge_beat: bool = True) -> List[SummaryRow]:
    """One row per demo task; beat's calls are what it published plus what it was refused at enqueue."""
    rows = []
    for policy, task in ROWS:
        counts = records.counts.get(task, {})
        intervals = [i for i in records.intervals if i["task"] == task]
        enqueue_refused = sum(1 for c in records.conflicts if c["task"] == task and c.get("at") == "enqueue")
        task_sent = sent.get(task, 0) if policy != "beat" else counts.get("sent", 0) + enqueue_refused
        rows.append(SummaryRow(policy, task, task_sent, len(intervals), skipped(counts),
                               counts.get("retry", 0), counts.get("wait", 0), counts.get("raise", 0),
                               len(overlaps(intervals, limit_of(task))), judged=judge_beat or policy != "beat"))
    return rows


def format_summary(rows: List[SummaryRow], elapsed: float, verdicts: Sequence[Verdict] = ()) -> str:
    header = f"{'policy':<9}{'task':<14}" + "".join(f"{c:>10}" for c in _COLUMNS)
    lines = [f"Summary (the whole run took {elapsed:.1f}s)", header, "-" * len(header)]
    for row in rows:
        lines.append(f"{row.policy:<9}{row.task:<14}" + "".join(f"{getattr(row, c):>10}" for c in _COLUMNS))
    lines.append("-" * len(header))
    totals: Dict[str, int] = {c: sum(getattr(r, c) for r in rows) for c in _COLUMNS}
    lines.append(f"{'total':<23}" + "".join(f"{totals[c]:>10}" for c in _COLUMNS))
    lines.append("")
    lines.append(f"overlaps = {totals['overlaps']}: "
                 + ("no execution started while its lock key was held (the limited task: while its limit of "
                    "runs was taken), judged from the intervals the task bodies recorded" if totals["overlaps"] == 0
                    else "THE LOCK WAS BROKEN"))
    lines.extend(verdict.line() for verdict in verdicts)
    odd = [r for r in rows if not r.accounted]
    if odd:
        lines.append("calls not accounted for as ran/skipped/raised: "
                     + ", ".join(f"{r.task} sent {r.sent} = ran {r.ran} + skipped {r.skipped} + raised {r.raised}?"
                                 for r in odd))
    else:
        lines.append(f"every call accounted for: sent {totals['sent']} = ran {totals['ran']} + skipped "
                     f"{totals['skipped']} + raised {totals['raised']} (retried and waited calls ran later)")
    return "\n".join(lines)


def plot_timeline(records: Records, t0: float, path: str) -> None:
    """One row per lock key: a bar per execution, a mark per duplicate (skip, retry, wait, raise)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"demo.skip": "tab:blue", "demo.retry": "tab:orange", "demo.wait": "tab:green",
               "demo.raise": "tab:red", "demo.report": "tab:purple", "demo.limited": "tab:brown",
               "demo.windowed": "tab:olive"}
    marks = {"skip": ("x", "skipped duplicate"), "retry": ("o", "re-queued (retry)"),
             "wait": ("v", "waited"), "raise": ("*", "refused (raise)")}
    order = [task for _, task in ROWS]
    keys = sorted({i["key"] or i["label"] for i in records.intervals}
                  | {c["key"] for c in records.conflicts if c.get("key")},
                  key=lambda k: (order.index(_task_of(k, records)) if _task_of(k, records) in order else 99,
                                 records.label_of(k, _task_of(k, records))))
    rows = {key: index for index, key in enumerate(keys)}
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(keys) + 1.6))
    for interval in records.intervals:
        y = rows[interval["key"] or interval["label"]]
        ax.broken_barh([(interval["start"] - t0, interval["end"] - interval["start"])], (y - 0.35, 0.7),
                       facecolors=colours.get(interval["task"], "grey"), edgecolor="black", linewidth=0.5)
    seen = set()
    for conflict in records.conflicts:
        if conflict.get("key") not in rows:
            continue
        marker, text = marks.get(conflict["action"], ("+", conflict["action"]))
        ax.plot(conflict["t"] - t0, rows[conflict["key"]], marker, color="black", markersize=7,
                fillstyle="none" if marker == "o" else "full",
                label=None if text in seen else text, linestyle="none")
        seen.add(text)
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels([records.label_of(k, _task_of(k, records)) for k in keys])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first call was sent")
    ax.set_title("celery-singleton-lock demo: executions per lock key (bars overlap in a row only up to lock_limit)")
    ax.grid(axis="x", linestyle=":", alpha=0.6)
    if seen:
        ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _task_of(key: str, records: Records) -> str:
    for interval in records.intervals:
        if (interval["key"] or interval["label"]) == key:
            return str(interval["task"])
    for conflict in records.conflicts:
        if conflict.get("key") == key:
            return str(conflict["task"])
    return "?"
