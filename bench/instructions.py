"""Instructions per task in Celery's tracer, counted by valgrind: a figure that repeats.

CPU time on this shared machine moves by more than a change to the worker's path is worth, so a
change there is weighed here first. ``python -m bench.instructions`` runs each variant's empty
task through Celery's tracer (as :mod:`.worker_path` does) in a child process under
``valgrind --tool=callgrind``, twice: ``--warm`` tasks, then ``--warm`` plus ``--count``. The
difference over ``--count`` is the user-space instructions one task costs, the same from run to
run (the system calls' work in the kernel is not counted; the end-to-end section weighs that).

* plain task: Celery's own path.
* LockedTask running: the lock's path, against a private redis-server.
* LockedTask running, in-memory backend: the same with no sockets (the lock's Python, and the
  in-memory store's own in place of Redis's Lua).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from typing import Dict, List, Optional

__all__ = ["count_instructions", "main"]

VARIANTS = ("plain task", "LockedTask running", "LockedTask running, in-memory backend")


def _child(variant: str, count: int) -> None:
    """Run ``count`` tasks of ``variant`` through the tracer (under valgrind, in a child)."""
    from celery.app.trace import build_tracer
    from celery.signals import task_postrun

    from . import app as bench_app
    from .worker_path import _memory_task, _requests

    task = {VARIANTS[0]: bench_app.plain, VARIANTS[1]: bench_app.locked_running}.get(variant)
    if task is None:
        task = _memory_task(type(bench_app.app))
    task_postrun.disconnect(dispatch_uid="bench.postrun")  # the end-to-end record's round trip
    tracer = build_tracer(task.name, task, eager=False, propagate=False, app=task.app)
    for task_id, args, kwargs, request in _requests("instructions", count):
        tracer(task_id, args, kwargs, request)


def _collected(variant: str, count: int) -> int:
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                          "-m", "bench.instructions", "--child", variant, str(count)],
                         capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise RuntimeError(f"valgrind printed no instruction count:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def count_instructions(variants: List[str], count: int, warm: int) -> Dict[str, int]:
    """Instructions per task of each variant (``BENCH_*_URL`` must name a server the bench owns)."""
    return {variant: (_collected(variant, warm + count) - _collected(variant, warm)) // count
            for variant in variants}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="tasks counted per variant")
    parser.add_argument("--warm", type=int, default=200, help="tasks run before (imports, first calls)")
    parser.add_argument("--child", nargs=2, metavar=("VARIANT", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tests.support.servers import RedisServer

    with RedisServer() as server:
        os.environ.update({"BENCH_BROKER_URL": f"{server.url}/0", "BENCH_LOCK_URL": f"{server.url}/1",
                           "BENCH_EVENTS_URL": f"{server.url}/2"})
        counted = count_instructions(list(VARIANTS), args.count, args.warm)
    base = counted[VARIANTS[0]]
    print(f"instructions per task in Celery's tracer ({args.count} tasks after {args.warm}, callgrind)")
    for variant, instructions in counted.items():
        print(f"  {variant:42s} {instructions:>9,}  (+{instructions - base:,} over plain)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
