"""Turn the measurements into docs/benchmarks.md and the PNG charts of their ratios."""

from __future__ import annotations

import math
import os
import platform
from typing import Callable, List, Optional, Sequence, Tuple

from .stats import Series, Summary
from .profile import lock_share
from .worker_path import METRICS_ON, metrics_share
from .fairness import fairness_section
from .handover import handover_section
from .backlog import backlog_section
from .limits_report import limits_section

__all__ = ["write_report"]


def _fmt(value: float, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def _span(s: Summary, scale: float = 1.0, digits: int = 0) -> Tuple[str, str]:
    return _fmt(s.median * scale, digits), f"{_fmt(s.low * scale, digits)} – {_fmt(s.high * scale, digits)}"


def _ratio(s: Summary) -> Tuple[str, str]:
    return _fmt(s.median, 3) + "x", f"{_fmt(s.low, 3)} – {_fmt(s.high, 3)}"


def _cpu_cell(series: Series, variant: str) -> str:
    """CPU µs per message and its ratio to the plain task's in the same round."""
    if variant not in series.variants:
        return "n/a"
    ratio = series.ratio(variant, "plain task").median
    return f"{_fmt(series.summary(variant).median * 1e6)} ({_fmt(ratio, 2)}x)"


def cpu_targets(cpu: Series, pool: str) -> List[Tuple[str, str, str]]:
    """The worker CPU ``running`` adds to a plain task against the cheaper unsafe peer's (plus 0.08
    of a plain task) and redis-py's ``Lock`` taken by hand, ratios of the same rounds."""
    mine = "LockedTask running"
    if mine not in cpu.variants or "plain task" not in cpu.variants:
        return []
    ratio = {v: cpu.ratio(v, "plain task").median for v in cpu.variants}
    peers = [ratio[p] for p in ("celery-once QueueOnce", "celery-singleton Singleton") if p in ratio]
    out = []
    if peers:
        out.append((f"worker CPU, {pool}, running: at most the cheaper unsafe peer's + 0.08 of plain "
                    f"({_fmt(min(peers), 2)}x + 0.08)", f"{_fmt(ratio[mine], 2)}x of plain",
                    _verdict(ratio[mine] <= min(peers) + 0.08)))
    by_hand = ratio.get("redis-py Lock by hand")
    if by_hand is not None:
        out.append((f"worker CPU, {pool}, running: at most redis-py's Lock by hand ({_fmt(by_hand, 2)}x)",
                    f"{_fmt(ratio[mine], 2)}x of plain", _verdict(ratio[mine] <= by_hand)))
    return out


def concurrency_of(pool: str) -> int:
    """The concurrency an end-to-end block's name ("prefork, concurrency 2") gives."""
    tail = pool.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 1


def lock_cpu_share(cpu: Series) -> Optional[float]:
    """The median per round of (``running``'s worker CPU − the plain task's) / ``running``'s."""
    mine, base = cpu.rounds.get("LockedTask running"), cpu.rounds.get("plain task")
    if not mine or not base:
        return None
    return Summary.of([(m - b) / m for m, b in zip(mine, base) if m > 0]).median


def _server_ratio(micro: dict, variant: str) -> Optional[float]:
    """The median of a variant's per-chunk Redis time over redis-py ``Lock``'s in the same turn."""
    chunks = micro.get("server_series")
    if chunks is None or "redis-py Lock" not in chunks.variants:
        return None
    ratio = chunks.ratio(variant, "redis-py Lock")
    return ratio.median if ratio.n else None


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _chart(path: str, title: str, labels: List[str], ratios: List[Summary], xlabel: str,
           line: Optional[float] = 1.0, targets: Sequence[Tuple[float, str]] = ()) -> bool:
    """Draw one horizontal bar chart of ratios; ``False`` (no file) when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        return False

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.45 * len(labels) + 1.4))
    ys = list(range(len(labels)))[::-1]
    med = [r.median for r in ratios]
    err = [[max(r.median - r.low, 0) for r in ratios], [max(r.high - r.median, 0) for r in ratios]]
    colors = ["#2b7bba" if "ours" in lab or "LockedTask" in lab else "#9a9a9a" for lab in labels]
    ax.barh(ys, med, xerr=err, color=colors, capsize=3)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    if line is not None:
        ax.axvline(line, color="black", linewidth=0.8)
    for i, (value, name) in enumerate(targets):  # labels one above the other: targets may sit close
        ax.axvline(value, color="#d62728", linewidth=0.8, linestyle="--")
        ax.text(value, len(labels) - 0.4 - 0.45 * i, f" {name}", color="#d62728", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


class _Doc:
    def __init__(self) -> None:
        self.parts: List[str] = []

    def add(self, *text: str) -> None:
        self.parts.extend(text)

    def text(self) -> str:
        return "\n\n".join(p.strip("\n") for p in self.parts) + "\n"


def _verdict(ok: Optional[bool]) -> str:
    return "pending" if ok is None else ("yes" if ok else "**no**")


def _cluster_section(doc: _Doc, cluster: dict, meta: dict, chart_dir: str, img: Callable[[str], str],
                     files: List[str], targets: List[Tuple[str, str, str]]) -> None:
    """The Redis Cluster section and its line in the comparison table (see bench/cluster.py)."""
    heading = "## Redis Cluster: one task's locks over the masters"
    comparison = "Redis Cluster: one task's locks spread over the masters (busiest of 3 masters' share ≤ 0.5)"
    if "skipped" in cluster:
        doc.add(heading, f"Skipped: local Redis Clusters did not start here ({cluster['skipped']}).")
        targets.append((comparison, "not measured (no cluster)", _verdict(None)))
        return
    series, busiest, per_cycle = cluster["series"], cluster["busiest"], cluster["per_cycle"]
    base, spread, hot = cluster["baseline"], cluster["spread"], cluster["hot"]
    rows, labels, shares = [], [], []
    for variant in series.variants:
        value, range_ = _span(series.summary(variant))
        used, per_master = cluster["slots"][variant]
        each = [Summary.of([r[i] for r in cluster["shares"][variant]]).median for i in range(len(per_master))]
        share, share_range = _span(busiest.summary(variant), 1, 2)
        rows.append([variant, cluster["masters"][variant], value, range_, *_ratio(series.ratio(variant, base)),
                     f"{used} ({' / '.join(str(c) for c in per_master)})", _fmt(per_cycle.summary(variant).median, 1),
                     share, share_range, " / ".join(_fmt(s, 2) for s in each)])
        labels.append(variant)
        shares.append(busiest.summary(variant))
    processes, threads = cluster["clients"]
    names = cluster["names"]
    refused = ("Every acquire was granted and every release found its lock." if cluster["refused"] == 0 else
               f"**{cluster['refused']:,} cycles were refused a grant or a release.**")
    doc.add(heading,
            f"One task (`{cluster['task']}`) with a fresh argument digest per cycle (`uuid4().hex`): "
            f"{processes} client process(es) × {threads} threads, each thread {cluster['cycles']:,} acquire + "
            f"release cycles per round through `ClusterBackend` (`open_store('redis+cluster://...')`), "
            f"{cluster['rounds']} interleaved rounds. The same load runs on a 1-master and a 3-master local "
            "cluster (redis-server nodes on this machine, slots split evenly), and, for contrast, on the 3 "
            "masters with every key under one hash tag (`bench:{hot}:<digest>`), where a single tag per task "
            "would put them. *Slots used*: the distinct Cluster slots of the keys, and how many of them each "
            "master serves. *Commands/cycle*: the commands the masters executed over the round (`INFO "
            "commandstats` before and after; commands run inside a script count, the cluster client's and the "
            "bench's own INFO, CLUSTER, COMMAND, HELLO and PING do not) per cycle. *Busiest master's share*: "
            "the largest master's part of those commands: 1.0 when one master does all the work, 0.33 when "
            f"3 share it evenly. {refused}",
            f"This machine has {meta['cpus']} CPU(s): the client processes and every redis-server share them, "
            "so adding masters adds processes to schedule, not cores, and throughput need not grow with "
            "masters here. The shares are the evidence that one task's load spreads over the masters; the "
            "throughput ratio (× 1 master, same round) is reported as measured. How evenly 16 buckets fall "
            "on 3 masters depends on the task's name (the buckets' slots are CRC16 of the tag): over "
            f"{names.n:,} names `task0`, `task1`, ... the busiest master serves {_fmt(names.median, 3)} of a "
            f"task's buckets (median; {_fmt(names.low, 3)} – {_fmt(names.high, 3)}).",
            _table(["variant", "masters", "cycles/s (median)", "min – max", "× 1 master", "ratio min – max",
                    "slots used (per master)", "commands/cycle", "busiest master's share (median)", "min – max",
                    "each master's share (median)"], rows),
            f"![cluster]({img('bench-cluster.png')})")
    if _chart(os.path.join(chart_dir, "bench-cluster.png"), "Busiest master's share of one task's lock commands",
              labels, shares, "share of the commands executed on the busiest master", line=None,
              targets=[(1 / 3, "even over 3 masters"), (0.5, "target ≤ 0.5")]):
        files.append("bench-cluster.png")
    three, tag = busiest.summary(spread).median, busiest.summary(hot).median
    targets.append((f"{comparison}; one hash tag: {_fmt(tag, 2)}", _fmt(three, 2), _verdict(three <= 0.5)))


def write_report(results: dict, out_dir: str, chart_dir: str, meta: dict, notes: str) -> List[str]:
    """Write ``benchmarks.md`` into ``out_dir`` and the charts into ``chart_dir``; returns the files."""
    os.makedirs(out_dir, exist_ok=True)
    os.makedirs(chart_dir, exist_ok=True)
    files: List[str] = []
    doc = _Doc()
    rel = os.path.relpath(chart_dir, out_dir)
    img = (lambda name: name) if rel == "." else (lambda name: f"{rel}/{name}")
    doc.add("# Benchmarks",
            "What a `LockedTask` costs compared with a plain Celery task, with redis-py's own `Lock` and "
            "with the two Celery locks people use today, celery-once and celery-singleton, all measured in "
            "the same run on the same machine. To measure it on yours: `bash scripts/bench.sh` (it makes a "
            "virtualenv with the bench extra, starts its own redis-server processes and workers, and "
            "rewrites this page).",
            "Produced by `" + meta["command"] + "` (do not edit by hand: rerun it). "
            f"Mode: **{meta['mode']}**; {meta['when']}; Python {platform.python_version()}, "
            f"{meta['cpus']} CPU(s), redis-server {meta['redis_version']}; peers: {meta['peers']}. "
            f"Total bench time {meta['elapsed']:.0f} s.",
            "Method: the machine is small and shared, so no number here stands alone. Every section runs "
            "its variants in interleaved rounds (in an order shuffled each round), and reports the median "
            "over rounds with the min – max range, next to the **ratio to a baseline measured in the same "
            "round** (the median of the per-round ratios). Read the ratios; the absolute numbers move "
            "with whatever else the machine was doing.")

    targets: List[Tuple[str, str, str]] = []

    # -- micro -------------------------------------------------------------------------------
    micro = results.get("micro")
    if micro:
        series: Series = micro["series"]
        floor = "raw floor: SET NX PX + EVALSHA del"
        rows, labels, ratios = [], [], []
        for variant in series.variants:
            value, spread = _span(series.summary(variant))
            ratio = series.ratio(variant, floor)
            sends = micro["sends"].get(variant)
            trips = micro.get("trips", {}).get(variant)
            server = micro.get("server_us", {}).get(variant)
            server_ratio = _server_ratio(micro, variant)
            rows.append([variant, value, spread, *_ratio(ratio), "" if sends is None else _fmt(sends, 1),
                         "" if trips is None else _fmt(trips, 1), "" if server is None else _fmt(server, 1),
                         "" if server_ratio is None else f"{server_ratio:.2f}"])
            labels.append(variant)
            ratios.append(ratio)
        doc.add("## Micro: uncontended acquire+release",
                f"{meta['micro_cycles']} cycles per round, {meta['rounds']['micro']} rounds. A cycle takes a "
                "fresh lock on a free key and releases it, as each guarded task does. *Requests* counts "
                "the request packets written to Redis per cycle (a pipeline is one; pottery's 3 masters "
                "count 3 each); *round trips* counts the times the client went from writing to waiting "
                "for a reply (commands written back to back and read afterwards share one). "
                "The ratio is cycles/s over the raw floor's in the same round: above 1 is "
                "faster than the floor. *Redis µs/cycle* is the time the servers spent executing the "
                f"cycle's commands (`INFO commandstats`: {meta.get('micro_server_cycles', meta['micro_cycles'])} "
                "cycles per variant in 20 chunks taken in turns with the other variants; the median chunk; "
                "a script's inner commands count in its `EVALSHA` and again on their own, for every "
                "variant alike), and *× Lock* the median of the chunks' ratios to redis-py's `Lock` "
                "in the same turn. "
                "`redis-benchmark` is requests/s of a C client (one request per "
                "cycle), the server's limit on one connection.",
                _table(["variant", "cycles/s (median)", "min – max", "× raw floor", "ratio min – max",
                        "requests/cycle", "round trips/cycle", "Redis µs/cycle", "× Lock"], rows),
                f"![micro]({img('bench-micro.png')})")
        if _chart(os.path.join(chart_dir, "bench-micro.png"), "Acquire+release throughput vs raw floor (higher is faster)",
               labels, ratios, "cycles/s ÷ raw floor's cycles/s, same round"):
            files.append("bench-micro.png")
        server_us = micro.get("server_us", {})
        lock_us = server_us.get("redis-py Lock")
        for variant, factor, what in (("ours: running (acquire + release)", 1.0, "no more than"),
                                      ("ours: queued_or_running (enqueue lock + adopt + release)", 1.5,
                                       "no more than 1.5× of")):
            ours_us = server_us.get(variant)
            if ours_us is not None and lock_us:
                against = _server_ratio(micro, variant)
                against = ours_us / lock_us if against is None else against
                targets.append((f"Redis time per task, {variant.split(': ')[1].split(' (')[0]}: {what} "
                                f"redis-py's `Lock` ({_fmt(lock_us, 1)} µs)",
                                f"{_fmt(ours_us, 1)} µs ({against:.2f}× Lock)", _verdict(against <= factor)))

    # -- cluster -----------------------------------------------------------------------------
    cluster = results.get("cluster")
    if cluster:
        _cluster_section(doc, cluster, meta, chart_dir, img, files, targets)

    # -- publish -----------------------------------------------------------------------------
    pub = results.get("publish")
    qor_ok = results.get("qor_available")
    qor_note = ("" if qor_ok else " **`queued_or_running` is pending in this checkout**: its `apply_async` "
                "takes no enqueue lock yet, so its rows measure what exists (a run-time lock) and its "
                "targets are marked pending.")
    if pub:
        series = pub["series"]
        base = "plain task"
        rows, labels, ratios = [], [], []
        for variant in series.variants:
            value, spread = _span(series.summary(variant), 1e6)
            ratio = series.ratio(variant, base)
            extra = series.summary(variant).median * 1e6 - series.summary(base).median * 1e6
            rows.append([variant, value, spread, *_ratio(ratio), f"{extra:+,.0f}"])
            labels.append(variant)
            ratios.append(ratio)
        doc.add("## Publish cost",
                f"{meta['publish_count']} `apply_async` calls per round with distinct arguments, "
                f"{meta['rounds']['publish']} rounds, no worker running. *Refused duplicate*: the call "
                "that an enqueue lock turns away (nothing published)." + qor_note,
                _table(["variant", "µs per apply_async", "min – max", "× plain", "ratio min – max",
                        "µs over plain"], rows),
                f"![publish]({img('bench-publish.png')})")
        if _chart(os.path.join(chart_dir, "bench-publish.png"), "Publish cost vs plain apply_async (lower is cheaper)",
               labels, ratios, "µs per apply_async ÷ plain's, same round"):
            files.append("bench-publish.png")
        for variant in ("LockedTask running", "LockedTask queued_or_running"):
            mine = series.ratio(variant, base).median
            peers = [series.ratio(peer, base).median for peer in ("celery-once QueueOnce", "celery-singleton Singleton")
                     if peer in series.variants]
            targets.append((f"publish, {variant.split()[-1]}: cheaper than both peers "
                            f"({', '.join(_fmt(p, 3) + 'x' for p in peers)} of plain)", f"{_fmt(mine, 3)}x of plain",
                            _verdict(None if not qor_ok and "queued" in variant else all(mine < p for p in peers))))

    # -- end to end ----------------------------------------------------------------------------
    e2e = results.get("e2e") or {}
    if e2e:
        doc.add("## End to end through a real worker",
                f"{meta['e2e_count']} messages per round, each with distinct arguments, of an empty task; "
                f"{meta['rounds']['e2e']} rounds per pool. Wall time runs from the first `apply_async` to "
                "the last `task_postrun` (after each variant released its lock). *Worker CPU* is the "
                "user + system time of the worker and its pool children over the round (from /proc), "
                "per message: unlike wall time it does not grow when the shared machine is busy "
                "elsewhere; with a pool of processes, the children's part is shown apart (the rest is "
                "the main process: receiving, dispatching, acknowledging). *Redis CPU* is what the one "
                "redis-server (broker, locks and the bench's records) spent over the round, per message (from `INFO cpu`): on two cores it is taken "
                "from the worker and the publisher. *Suppressed duplicates*: "
                "the same number of messages, all one call whose lock the bench process holds, so every "
                "one is skipped at run time: its ratio prices a suppressed duplicate against a plain "
                "trivial task. The lock's calls in this run went " + str(results.get("lock_path") or "?") + "."
                + qor_note)
        chart_labels, chart_ratios = [], []
        for pool, data in e2e.items():
            wall, publish, cpu = data["wall"], data["publish"], data.get("cpu") or Series()
            server_cpu, pool_cpu = data.get("server_cpu") or Series(), data.get("pool_cpu") or Series()
            split = concurrency_of(pool) > 1 and bool(pool_cpu.variants)
            rows = []
            for variant in wall.variants:
                w, wspread = _span(wall.summary(variant), 1e3, 1)
                ratio = wall.ratio(variant, "plain task")
                per_msg = wall.summary(variant).median / meta["e2e_count"] * 1e6
                p, _ = _span(publish.summary(variant), 1e6)
                rows.append([variant, w, wspread, *_ratio(ratio), _fmt(per_msg), p,
                             _cpu_cell(cpu, variant), *([_cpu_cell(pool_cpu, variant)] if split else []),
                             _cpu_cell(server_cpu, variant)])
                chart_labels.append(f"{pool}: {variant}")
                chart_ratios.append(ratio)
            doc.add(f"### {pool}",
                    _table(["variant", "wall ms (median)", "min – max", "× plain", "ratio min – max",
                            "µs per message", "µs per publish (worker busy)",
                            "worker CPU µs per message (× plain)",
                            *(["of which the pool children (× plain)"] if split else []),
                            "Redis CPU µs per message (× plain)"], rows))
            peers = {peer: wall.ratio(peer, "plain task").median
                     for peer in ("celery-once QueueOnce", "celery-singleton Singleton") if peer in wall.variants}
            for variant in ("LockedTask running", "LockedTask queued_or_running"):
                mine = wall.ratio(variant, "plain task").median
                named = ", ".join(f"{peer.split()[0]} {_fmt(r, 3)}x" for peer, r in peers.items())
                targets.append((f"end to end, {pool}, {variant.split()[-1]}: ahead of both peers ({named}) and "
                                "within 1.10× of plain", f"{_fmt(mine, 3)}x of plain",
                                _verdict(all(mine < r for r in peers.values()) and mine <= 1.10)))
            targets.extend(cpu_targets(cpu, pool))
            share = lock_cpu_share(cpu)
            if share is not None:
                doc.add(f"The lock's own share of a `running` task's worker CPU here ({pool}; what it adds over a "
                        f"plain task, over its whole, same rounds, no profiler): {_fmt(share * 100, 1)}%.")
        doc.add(f"![end to end]({img('bench-e2e.png')})")
        if _chart(os.path.join(chart_dir, "bench-e2e.png"), "End-to-end wall time vs plain task (lower is faster)",
               chart_labels, chart_ratios, "wall ÷ plain task's wall, same round"):
            files.append("bench-e2e.png")

    # -- the worker's side alone -------------------------------------------------------------
    path = results.get("worker")
    if path:
        wall, cpu = path["wall"], path["cpu"]
        rows = []
        for variant in wall.variants:
            w, wspread = _span(wall.summary(variant), 1.0, 1)
            over = Summary.of([v - b for v, b in zip(wall.rounds[variant], wall.rounds["plain task"])])
            rows.append([variant, w, wspread, f"+{_fmt(over.median, 1)}", _fmt(cpu.summary(variant).median, 1)])
        doc.add("## The worker's side alone",
                f"Celery's tracer (what a worker runs for every message: signals, request context, result "
                f"handling) called in the bench process for each variant's empty task, "
                f"{meta['path_count']} distinct calls per round, {meta['rounds']['worker']} interleaved rounds; "
                "no broker, pool or publisher competes. It prices what each lock adds to the worker's own "
                "work: `LockedTask` takes and releases its lock there (two round trips); celery-once and "
                "celery-singleton only delete theirs there (one round trip: they take it in `apply_async`). "
                "On the in-memory backend, `LockedTask` shows the Celery layer's own cost without the store.",
                _table(["variant", "µs per task (median)", "min – max", "µs over plain (same round)",
                        "CPU µs per task"], rows))
        if METRICS_ON in wall.variants:
            pairs = path.get("metrics_pairs") or []
            extra, lock, share = metrics_share(wall, pairs)
            doc.add(f"*Metrics on* (the `[metrics]` extra counting into a registry, connected for that "
                    f"variant's calls only; measured on the in-memory backend, where no round trip's noise "
                    f"hides it) adds {_fmt(extra, 1)} µs per task: {_fmt(share, 1)}% of the lock's own worker "
                    f"time ({_fmt(lock, 1)} µs, `LockedTask running` over a plain task, the median of the "
                    f"differences within each round). The metrics' figure is the median over {len(pairs)} "
                    f"pairs of back-to-back blocks of {max(meta['path_count'] // 10, 1)} calls, with and "
                    "without metrics, in alternating order: a few µs in a path of about 150 are lost in the "
                    "drift between whole rounds.")
            files_pairs = path.get("metrics_files_pairs") or []
            if files_pairs:
                in_files, _, files_share = metrics_share(wall, files_pairs)
                doc.add(f"Kept in multiprocess files, as each pool process of a worker with "
                        f"`singleton_lock_metrics_port` keeps them, the metrics add {_fmt(in_files, 1)} µs per task: "
                        f"{_fmt(files_share, 1)}% of the lock's own worker time (measured the same way).")
                share = max(share, files_share)
            targets.append(("worker path: metrics on cost < 5% of the lock's own worker time",
                            f"{_fmt(share, 1)}%", _verdict(share < 5.0)))

    # -- storm -------------------------------------------------------------------------------
    storm = results.get("storm")
    if storm:
        rows, labels, ratios = [], [], []
        wall = storm["wall"]
        for variant, runs in storm["rows"].items():
            def med(field: str) -> str:
                s = Summary.of([r[field] for r in runs])
                return _fmt(s.median) if s.low == s.high else f"{_fmt(s.median)} ({_fmt(s.low)}–{_fmt(s.high)})"
            w, _ = _span(wall.summary(variant), 1, 2)
            rows.append([variant, med("executions"), med("suppressed_publish"), med("suppressed_run"),
                         med("overlaps"), med("keys_run"), w])
            labels.append(variant)
            ratios.append(Summary.of([float(r["overlaps"]) for r in runs]))
        doc.add("## Duplicate storm",
                f"{storm['messages']} messages over {storm['sets']} argument sets, published in bursts (the "
                f"copies of one set back to back), 50 ms bodies, "
                f"{meta['storm_pool']}; {meta['rounds']['storm']} rounds (median, range in brackets when "
                "rounds differ). Each body records its interval in Redis; *overlaps* counts pairs of "
                "executions of one argument set whose intervals intersect." + qor_note,
                _table(["variant", "executions", "suppressed at publish", "suppressed at run", "overlaps",
                        "argument sets run", "wall s"], rows),
                f"![storm]({img('bench-storm.png')})")
        if _chart(os.path.join(chart_dir, "bench-storm.png"), "Duplicate storm: overlapping executions (0 is correct)",
               labels, ratios, "overlapping pairs per round", line=None):
            files.append("bench-storm.png")
        ours = [r["overlaps"] for v, runs in storm["rows"].items() if v.startswith("LockedTask") for r in runs]
        targets.append(("storm: 0 overlaps for LockedTask", f"max {max(ours) if ours else 'n/a'}",
                        _verdict(bool(ours) and max(ours) == 0)))

    # -- heartbeat and keys ---------------------------------------------------------------------
    hb = results.get("heartbeat")
    if hb:
        series = hb["series"]
        rows, labels, ratios = [], [], []
        for variant in series.variants:
            value, spread = _span(series.summary(variant), 1e3, 2)
            ratio = series.ratio(variant, "1")
            per_lock = series.summary(variant).median / int(variant) * 1e6
            rows.append([variant, _fmt(hb["trips_per_period"].get(int(variant)), 2), value, spread,
                         *_ratio(ratio), _fmt(per_lock, 2)])
            labels.append(f"{variant} locks")
            ratios.append(ratio)
        doc.add("## Heartbeat",
                f"Locks held by one process. *Round trips per period*: a real `Renewer` holding them with a "
                f"{hb['period']:g} s period, counted over several periods. *Renewal call*: one "
                f"`RedisBackend.renew` over all of them, {meta['rounds']['heartbeat']} interleaved rounds; the "
                "ratio is to renewing one lock.",
                _table(["locks held", "round trips per period", "renewal call ms", "min – max",
                        "× one lock", "ratio min – max", "µs per lock"], rows),
                f"![heartbeat]({img('bench-heartbeat.png')})")
        if _chart(os.path.join(chart_dir, "bench-heartbeat.png"), "Renewal call time vs renewing one lock",
               labels, ratios, "time ÷ one lock's time, same round", line=None):
            files.append("bench-heartbeat.png")
        trips = hb["trips_per_period"]
        targets.append(("renewal: 1 round trip per period, any number of locks",
                        ", ".join(f"{n}: {t:g}" for n, t in trips.items()),
                        _verdict(all(abs(t - 1) < 1e-9 for t in trips.values()))))
        biggest = max(int(v) for v in series.variants)
        t = series.summary(str(biggest)).median
        targets.append((f"renewal: {biggest:,} locks well inside one period (default 10 s)",
                        f"{t * 1e3:,.1f} ms = {t / 10 * 100:.2f}% of 10 s", _verdict(t < 1.0)))
    keys = results.get("keys")
    if keys:
        series = keys["series"]
        rows = []
        for variant in series.variants:
            value, spread = _span(series.summary(variant), 1e6, 2)
            rows.append([variant, value, spread])
        base = "ours: 3 scalars"
        doc.add("## Key derivation",
                "`ArgumentKey` (bind to the signature, canonical JSON, BLAKE2b digest) for "
                "`f(account_id, full=False, region='eu')` called as `f(42, full=True)`, and for one 1 MB "
                "argument; the peers' key functions on the same small call for scale (they neither bind "
                "defaults nor hash, and their keys carry the raw values).",
                _table(["variant", "µs per key (median)", "min – max"], rows))
        small = series.summary(base).median * 1e6
        targets.append(("key derivation < 20 µs for a few scalars", f"{small:.2f} µs", _verdict(small < 20)))

    doc.add(*limits_section(results, meta["command"], []))
    doc.add(*handover_section(results, meta["command"]))
    doc.add(*fairness_section(results, meta["command"]))
    doc.add(*backlog_section(results, meta["command"], meta.get("backlog_count", 0)))

    # -- targets, profile ------------------------------------------------------------------------
    doc.add("## How it compares, in this run",
            "Each line compares this library with the same-run figure it is measured against.",
            _table(["comparison", "measured", "verdict"], targets))
    prof = results.get("profile")
    if prof:
        doc.add("## Profile",
                "cProfile over each operation, repeated; *µs per op* is under the profiler (inflated), "
                "the split shows where the own time goes. Top functions by own time per operation.")
        shares = lock_share(prof)
        if shares:
            doc.add("*The lock's own share of a task's worker time* (the locked task's time per task less the "
                    "plain task's, over the locked task's, both under the profiler): "
                    + "; ".join(f"{name.split(': ')[0]}: {_fmt(share * 100, 1)}%" for name, share in shares.items())
                    + ". The pool process's profile counts CPU time of its whole life, start and exit included.")
        for name, data in prof.items():
            split = ", ".join(f"{k} {v:,.1f}" for k, v in data["groups_us"].items())
            rows = [[f"`{fn}`", _fmt(tt, 1), _fmt(ct, 1), _fmt(nc, 2)] for fn, tt, ct, nc in data["top"]]
            doc.add(f"### {name}",
                    f"{data['per_op_us']:,.0f} µs per op under the profiler; own time by package (µs): {split}.",
                    _table(["function", "own µs/op", "cumulative µs/op", "calls/op"], rows))
    if notes:
        doc.add(notes)
    path = os.path.join(out_dir, "benchmarks.md")
    with open(path, "w") as handle:
        handle.write(doc.text())
    from .web import keep_section  # `python -m bench web` measures its section apart: kept as it was

    keep_section(path)
    return [path] + [os.path.join(chart_dir, f) for f in files]
