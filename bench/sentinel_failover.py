"""``python -m bench sentinel-failover [--smoke]``: SENTINEL FAILOVER under live holders, measured.

A master, two replicas and three sentinels on loopback (``tests/support/sentinel_trio.py``).
Holder processes (forked, each with its own store and renewal thread, as a worker's pool
child has) take one of a few keys, hold it for 1-3 s while the heartbeat renews it (ttl 6 s,
heartbeat 2 s), and record when they were granted it, when the heartbeat told them it was lost
(``lock_lost``'s moment) and when they let it go; then ``SENTINEL FAILOVER`` promotes a replica
while they run. From those records, per run:

- **untold overlap**: time a holder ran while an earlier holder of the same key still ran
  *and had not been told* (the contract: 0);
- **told overlap**: time two holders ran at once after the earlier one was told;
- **told after**: the latest a holder was told, counted from the promotion;
- **grants resume**: the first grant after the promotion by the new master;
- **old master**: grants the old master made after the promotion, how long it answered as a
  master, and when every sentinel named the new one.

Writes docs/failover-sentinel.md. Each run is with and without ``replica_ack=1``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing
import os
import random
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

__all__ = ["main", "overlaps", "summarise"]

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TTL_S = 6.0
HEARTBEAT_S = 2.0
KEYS = 3
#: Long enough that a loaded machine does not make the sentinels fail over on their own mid-run.
DOWN_AFTER_MS = 3000


def _holder(url: str, options: Dict[str, Any], out: str, until: float, seed: int) -> None:
    """One holder process: take a key, hold it 1-3 s (or until told it is lost), give it back; again."""
    import redis

    from celery_singleton_lock.store import Grant, Holder, Lease, Renewer, new_token, open_store

    rng = random.Random(seed)
    store = open_store(url, options)
    told: Dict[str, float] = {}
    renewer = Renewer(store, on_lost=lambda lease, why: told.setdefault(lease.token, time.monotonic()))
    holder = Holder(task_id=f"bench-{os.getpid()}", host="bench", pid=os.getpid(), since_ms=0,
                    heartbeat_ms=int(HEARTBEAT_S * 1000))
    with open(out, "a") as records:
        while time.monotonic() < until:
            key, token = f"bench:{{fo{rng.randrange(KEYS)}}}:lock", new_token()
            asked = time.monotonic()
            try:
                outcome = store.acquire(key, token, int(TTL_S * 1000), holder)
            except redis.RedisError:
                time.sleep(0.02)
                continue
            if not isinstance(outcome, Grant):
                time.sleep(0.01)
                continue
            start = time.monotonic()
            by = store.watch.address[1] if store.watch.address else 0
            lease = Lease(key, token, TTL_S, HEARTBEAT_S, asked, holder=holder)
            renewer.hold(lease)
            ends = start + rng.uniform(1.0, 3.0)
            while time.monotonic() < ends and not lease.lost.is_set():
                time.sleep(0.01)
            end = time.monotonic()
            renewer.drop(lease)
            if not lease.lost.is_set():
                try:
                    store.release(key, token)
                except redis.RedisError:
                    pass
            records.write(json.dumps(dict(key=key, start=start, end=end, told=told.get(token), by=by)) + "\n")
            records.flush()
    renewer.close()
    store.close()


def overlaps(records: Sequence[Dict[str, Any]]) -> Dict[str, float]:
    """Untold and told overlap (seconds, the largest of any pair) of holders of one key."""
    untold = told = 0.0
    pairs = 0
    by_key: Dict[str, List[Dict[str, Any]]] = {}
    for record in records:
        by_key.setdefault(record["key"], []).append(record)
    for entries in by_key.values():
        entries.sort(key=lambda r: r["start"])
        for i, early in enumerate(entries):
            for late in entries[i + 1:]:
                if late["start"] >= early["end"]:
                    continue
                pairs += 1
                told_at = early["told"] if early["told"] is not None else early["end"]
                untold = max(untold, min(told_at, late["end"]) - late["start"])
                if early["told"] is not None:
                    told = max(told, min(early["end"], late["end"]) - max(late["start"], early["told"]))
    return {"untold_s": max(untold, 0.0), "told_s": max(told, 0.0), "pairs": pairs}


def summarise(records: Sequence[Dict[str, Any]], promoted: float, old_port: int, new_port: int) -> Dict[str, Any]:
    """One run's figures from its holders' records and the promotion's moment."""
    told = [r["told"] - promoted for r in records if r["told"] is not None]
    spanning = [r for r in records if r["start"] < promoted < r["end"] or (r["told"] or 0) > promoted]
    resumed = [r["start"] - promoted for r in records if r["start"] > promoted and r["by"] == new_port]
    from_old = [r["start"] - promoted for r in records if r["start"] > promoted and r["by"] == old_port]
    return dict(overlaps(records), grants=len(records), spanning=len(spanning),
                kept=len([r for r in spanning if r["told"] is None]), told=len(told),
                told_after_s=max(told) if told else None, resumed_s=min(resumed) if resumed else None,
                old_grants=len(from_old), old_last_s=max(from_old) if from_old else None)


def _run(trio: Any, ack: bool, holders: int, seed: int) -> Dict[str, Any]:
    from tests.support.sentinel_trio import _role

    options: Dict[str, Any] = {"master_name": trio.master_name}
    if ack:
        options.update(replica_ack=1, replica_ack_timeout=0.3)
    old = trio.master
    context = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory(prefix="csl-sfo-") as scratch:
        until = time.monotonic() + 4.0 + 15.0
        procs = [context.Process(target=_holder, args=(trio.url, options, os.path.join(scratch, f"{i}.jsonl"),
                                                        until, seed * 100 + i)) for i in range(holders)]
        for proc in procs:
            proc.start()
        time.sleep(4.0)
        new, promoted = trio.failover()
        named = time.monotonic() - promoted
        demoted = None
        while time.monotonic() < until:
            if demoted is None and _role(old.port) == "slave":
                demoted = time.monotonic() - promoted
            time.sleep(0.05)
        for proc in procs:
            proc.join(30)
        records = []
        for name in os.listdir(scratch):
            with open(os.path.join(scratch, name)) as handle:
                records.extend(json.loads(line) for line in handle if line.strip())
    trio.wait_settled()
    return dict(summarise(records, promoted, old.port, new.port), named_s=named, demoted_s=demoted, ack=ack)


def _fmt(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.2f}"


def _report(runs: List[Dict[str, Any]], meta: Dict[str, Any], out: str) -> str:
    lines = ["# Sentinel failover, measured", "",
             f"Written by `{meta['command']}` on {meta['when']} ({meta['cpus']} CPUs, redis-server "
             f"{meta['redis']}, redis-py {meta['redis_py']}); {meta['holders']} holder processes on {KEYS} keys, "
             f"ttl {TTL_S:g} s, heartbeat {HEARTBEAT_S:g} s, bodies of 1-3 s; one master, two replicas, three "
             f"sentinels (down-after {DOWN_AFTER_MS} ms) on loopback; `SENTINEL FAILOVER` 4 s into each run. Times are "
             "seconds after the promotion (the moment the promoted replica first answered `ROLE` as master).",
             "", "| run | replica_ack | grants | held through | kept | told | untold overlap | told overlap "
             "| told after | grants resume | old master grants after promotion (last) | all sentinels name "
             "the new master | old master demoted |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, run in enumerate(runs, 1):
        lines.append(f"| {i} | {'1' if run['ack'] else 'off'} | {run['grants']} | {run['spanning']} | {run['kept']} "
                     f"| {run['told']} | {_fmt(run['untold_s'])} | {_fmt(run['told_s'])} | {_fmt(run['told_after_s'])} "
                     f"| {_fmt(run['resumed_s'])} | {run['old_grants']} ({_fmt(run['old_last_s'])}) "
                     f"| {_fmt(run['named_s'])} | {_fmt(run['demoted_s'])} |")
    lines += ["", "*held through*: holders that held a key at the promotion or were told after it; *kept*: of "
              "those, never told "
              "(their lock was on the new master, and they renewed it there); *untold overlap*: the longest a "
              "holder ran while an earlier holder of its key ran untold (the contract: 0); *told overlap*: the "
              "longest two ran at once after the earlier one was told; *grants resume*: the first grant made "
              "by the new master; *old master grants*: grants whose holder's store still named the old master "
              "(at most 0.25 s stale), made after the promotion.", ""]
    path = os.path.join(out, "failover-sentinel.md")
    with open(path, "w") as handle:
        handle.write("\n".join(lines))
    return path


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench sentinel-failover", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="one run each way")
    parser.add_argument("--runs", type=int, default=None, help="runs each way (default 3, 1 with --smoke)")
    parser.add_argument("--holders", type=int, default=6)
    parser.add_argument("--out", default=os.path.join(_ROOT, "docs"))
    args = parser.parse_args(argv)
    sys.path.insert(0, _ROOT)
    import redis

    from tests.support.sentinel_trio import SentinelTrio
    from tests.support.servers import redis_server_version

    runs_each = args.runs or (1 if args.smoke else 3)
    trio = SentinelTrio(down_after_ms=DOWN_AFTER_MS).start()
    runs: List[Dict[str, Any]] = []
    try:
        for index in range(runs_each):
            for ack in (False, True):
                runs.append(_run(trio, ack, args.holders, index * 2 + int(ack)))
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    finally:
        trio.stop()
    command = "python -m bench sentinel-failover" + (" --smoke" if args.smoke else "") + (
        f" --runs {args.runs}" if args.runs else "")
    meta = dict(command=command, when=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                cpus=os.cpu_count(), redis=".".join(map(str, redis_server_version())), redis_py=redis.__version__,
                holders=args.holders)
    print(f"wrote {_report(runs, meta, args.out)}", file=sys.stderr)
    return 0 if all(run["untold_s"] == 0 for run in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
