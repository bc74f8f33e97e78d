"""``python -m bench faults``: every fault of plan.py, one process each, then docs/faults.md."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

from .plan import FAULTS, SIZES
from .report import write_report

__all__ = ["main"]

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _parse(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench faults", description=__doc__)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--smoke", action="store_true", help="one worker, ~120 messages a run: seconds per fault")
    size.add_argument("--quick", action="store_true", help="a quarter of the full load")
    parser.add_argument("--only", default=",".join(f.name for f in FAULTS), help="comma-separated fault names")
    parser.add_argument("--out", default=os.path.join(_ROOT, "docs"), help="where faults.md goes")
    parser.add_argument("--json", default=None, help="also write every run's figures to this file")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep-rows", action="store_true",
                        help="keep the rows of the faults not run from the existing faults.md (the page says so)")
    parser.add_argument("--report-only", metavar="JSON", default=None,
                        help="write faults.md again from the figures an earlier run saved with --json")
    return parser.parse_args(argv)


def _log(message: str) -> None:
    print(f"[faults {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _run(name: str, size: str, seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="csl-faults-") as scratch:
        out = os.path.join(scratch, "result.json")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_ROOT, os.environ.get("PYTHONPATH")])))
        proc = subprocess.run([sys.executable, "-m", "bench.faults.one", name, size, out, str(seed)], cwd=_ROOT,
                              env=env, timeout=900)
        if proc.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"fault {name}: the run failed (exit {proc.returncode})")
        with open(out) as handle:
            return json.load(handle)


def _versions() -> Dict[str, str]:
    import celery
    import kombu
    import redis

    from tests.support.servers import redis_server_version

    return {"celery": celery.__version__, "kombu": kombu.__version__, "redis-py": redis.__version__,
            "redis_version": ".".join(map(str, redis_server_version()))}


def _write(results: Dict[str, dict], args: argparse.Namespace, meta: Dict[str, Any]) -> str:
    """faults.md, keeping the other faults' rows from the existing page with ``--keep-rows``."""
    existing = os.path.join(args.out, "faults.md")
    previous = open(existing).read() if args.keep_rows and os.path.exists(existing) else ""
    if previous and not meta["command"].endswith(" --keep-rows"):
        meta = {**meta, "command": meta["command"] + " --keep-rows"}
    return write_report(results, args.out, meta, previous)


def main(argv: Optional[List[str]] = None) -> int:
    args = _parse(argv)
    if args.report_only:
        with open(args.report_only) as handle:
            saved = json.load(handle)
        _log(f"wrote {os.path.relpath(_write(saved['results'], args, saved['meta']))}")
        return 0
    size = "smoke" if args.smoke else "quick" if args.quick else "full"
    names = [n for n in args.only.split(",") if n]
    unknown = set(names) - {f.name for f in FAULTS}
    if unknown:
        raise SystemExit(f"unknown faults: {', '.join(sorted(unknown))}")
    began = time.monotonic()
    results: Dict[str, dict] = {}
    for fault in [f for f in FAULTS if f.name in names]:
        _log(f"{fault.name}: {fault.title}")
        results[fault.name] = result = _run(fault.name, size, args.seed)
        _log(f"{fault.name}: {result['executions']} executions, {result['overlaps']} overlaps, "
             f"{result['stale_accepted']} stale accepted, {result['fates']['lost']} lost, {result['elapsed']}s")
    command = "python -m bench faults" + ("" if size == "full" else f" --{size}") + (
        "" if len(names) == len(FAULTS) else f" --only {','.join(names)}")
    elapsed = time.monotonic() - began
    meta: Dict[str, Any] = {"command": command, "mode": size, "when": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "cpus": os.cpu_count(), "elapsed": elapsed, **_versions()}
    path = _write(results, args, meta)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"meta": meta, "results": results}, handle, indent=1, default=str)
    _log(f"wrote {os.path.relpath(path)}: {sum(r['executions'] for r in results.values())} executions "
         f"in {elapsed / 60:.1f} min")
    return 0
