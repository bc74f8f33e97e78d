"""Run the demo from start to end: Redis, worker, beat, the bursts, the summary, the clean-up.

``python -m celery_singleton_lock.demo [--short] [--plot FILE.png] [--external]``

Order matters at the end: beat stops first (no new calls), then the runner
waits until every call it sent has a result and no lock, queued message or
unacknowledged message is left, then the worker gets a warm shutdown, and only
then are the records read, the summary printed and the demo's keys deleted.
Ctrl-C (or SIGTERM) at any point jumps to the same clean-up: children are
stopped by PID and process group, the keys under the namespace are deleted and
an embedded redis-server is stopped.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import defaultdict
from types import ModuleType
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

import redis

from ..store import KeyLayout, LockRecord, scan_locks
from .config import DEFAULT_REDIS_URL, DemoConfig
from .judge import judge
from .live import ROWS, LiveView, Tally, format_event
from .namespace import Namespace
from .processes import Child, reachable, start_beat, start_redis, start_worker
from .report import format_summary, plot_timeline, summarize
from .workload import round_calls

__all__ = ["main", "DemoRun"]


class Interrupted(Exception):
    """Ctrl-C or SIGTERM, raised at the runner's own check points."""


class DemoRun:
    """One run of the demo; :meth:`run` returns the process exit code."""

    def __init__(self, short: bool = False, plot: Optional[str] = None, external: bool = False,
                 concurrency: int = 6, view: Optional[LiveView] = None) -> None:
        self.rounds = 2 if short else 8
        self.round_gap = 3.0
        self.plot = plot
        self.external = external
        self.concurrency = concurrency
        self.view = view or LiveView()
        self.workdir = tempfile.mkdtemp(prefix="csl-demo-")
        self.children: Dict[str, Child] = {}
        self.app_module: Optional[ModuleType] = None
        self.config: Optional[DemoConfig] = None
        self.client: Optional["redis.Redis"] = None
        self.keys: Optional[Namespace] = None
        self.results: List[Tuple[str, Any]] = []
        self.sent: Dict[str, int] = defaultdict(int)
        self.tally = Tally()
        self.phase = "starting"
        self.t0 = time.time()
        self.started = time.monotonic()
        # Ctrl-C sets this instead of raising KeyboardInterrupt wherever Python happens to be:
        # an interrupt raised inside a finalizer (a redis-py pool's __del__) is swallowed,
        # and the demo would run on.
        self.stop = threading.Event()

    # -- the whole run -------------------------------------------------------------------------
    def run(self) -> int:
        previous = {signum: signal.signal(signum, self._on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
        code = 2
        try:
            self._start()
            self._produce()
            unfinished = self._drain()
            self._stop_worker()
            code = self._finish(unfinished)
        except (Interrupted, KeyboardInterrupt):
            self.view.say("\ninterrupted: stopping the worker, beat and Redis, deleting the demo's keys ...")
            code = 130
        except RuntimeError as exc:
            self.view.say(f"demo failed: {exc}")
            code = 2
        finally:
            self._clean_up()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return code

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stop.set()

    def _checkpoint(self) -> None:
        if self.stop.is_set():
            raise Interrupted()

    def _pause(self, seconds: float) -> None:
        """Sleep, waking at once on Ctrl-C."""
        if self.stop.wait(seconds):
            raise Interrupted()

    # -- start ---------------------------------------------------------------------------------
    def _start(self) -> None:
        url = os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL
        if reachable(url):
            self.view.say(f"Redis: using the server at {url}")
        elif self.external:
            raise RuntimeError(f"nothing answers at REDIS_URL={url} (--external starts no Redis)")
        else:
            self.view.say(f"Redis: nothing answers at {url}; starting an embedded redis-server ...")
            self.children["redis"], url = start_redis(self.workdir)
            self.view.say(f"Redis: embedded redis-server (pid {self.children['redis'].pid}) at {url}")
        os.environ["REDIS_URL"] = url
        from . import app as app_module  # configured from REDIS_URL: import only now

        self.app_module = app_module
        self.config = DemoConfig.from_env()
        self.client = redis.Redis.from_url(url, decode_responses=True, socket_connect_timeout=2, socket_timeout=5)
        self.keys = Namespace(self.client, self.config, self.external)
        left = self.keys.claim()
        if left:
            self.view.say(f"deleted {left} key(s) left under {self.config.namespace}: by an earlier run")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if not self.external:
            self.view.say(f"starting a prefork worker (-c {self.concurrency}) ...")
            worker = self.children["worker"] = start_worker(self.workdir, env, self.concurrency)
            worker.wait_for_log(" ready.", 90, self.stop)
            self._checkpoint()
            self.view.say(f"worker ready (pid {worker.pid}); starting beat (demo.report every "
                          f"{self.config.report_every:g}s, its body takes {self.config.report_seconds:g}s) ...")
            self.children["beat"] = start_beat(self.workdir, env)
        self.t0 = time.time()

    # -- produce and watch ---------------------------------------------------------------------
    def _produce(self) -> None:
        assert self.app_module is not None
        app = self.app_module.app
        for round_no in range(self.rounds):
            calls = round_calls(round_no)
            self.phase = f"round {round_no + 1}/{self.rounds}"
            self.view.say(f"{time.time() - self.t0:6.1f}s  == round {round_no + 1}/{self.rounds}: sending "
                          f"{len(calls)} calls (a duplicate burst and a distinct call per policy)")
            for call in calls:
                self._checkpoint()
                result = app.tasks[call.task].apply_async((call.account,), {"seq": call.seq})
                self.results.append((call.task, result))
                self.sent[call.task] += 1
            self._watch(time.monotonic() + self.round_gap)

    def _watch(self, until: float) -> None:
        while True:
            self._refresh()
            remaining = until - time.monotonic()
            if remaining <= 0:
                return
            self._pause(min(0.25, remaining))

    def _held(self) -> List[LockRecord]:
        assert self.client is not None and self.config is not None
        return sorted(scan_locks(self.client, KeyLayout(self.config.lock_prefix)), key=lambda r: r.key)

    def _refresh(self) -> None:
        assert self.client is not None and self.config is not None and self.app_module is not None
        assert self.keys is not None
        recorder = self.app_module.recorder
        events = recorder.events_since(self.tally.seen)
        self.tally.feed(events)
        labels = cast(Dict[str, str], self.client.hgetall(self.config.key("labels")))  # decode_responses
        lines = [format_event(e, self.t0, labels) for e in events]
        stats = self.client.hgetall(self.config.key("stats"))
        beat_sent = int(stats.get("demo.report|sent", 0)) + self.tally.enqueue_conflicts.get("demo.report", 0)
        rows = {task: self.tally.row(task, beat_sent if policy == "beat" else self.sent.get(task, 0))
                for policy, task in ROWS}
        self.view.update(time.time() - self.t0, self.phase, rows, self._held(), labels, lines)
        self.keys.keep_claim()

    # -- drain and stop ------------------------------------------------------------------------
    def _drain(self, timeout: float = 30.0) -> int:
        """Stop beat, then wait until every call is done; returns how many were not."""
        assert self.client is not None and self.config is not None
        if "beat" in self.children:
            self.phase = "stopping beat"
            self.children.pop("beat").stop()
        self.phase = "finishing queued, retried and running calls"
        self.view.say(f"{time.time() - self.t0:6.1f}s  == beat stopped; waiting for every call to finish")
        pending = [result for _, result in self.results]
        queue, unacked = f"{self.config.broker_prefix}celery", f"{self.config.broker_prefix}unacked"
        deadline = time.monotonic() + timeout
        while True:
            self._refresh()
            pending = [result for result in pending if not result.ready()]
            # A place only its window keeps after its run is no call left to finish
            idle = self.external or (not [r for r in self._held() if r.state != "released"]
                                     and not self.client.llen(queue)
                                     and not self.client.hlen(unacked))
            if not pending and idle:
                return 0
            if time.monotonic() > deadline:
                self.view.say(f"warning: {len(pending)} call(s) still unfinished after {timeout:g}s")
                return max(len(pending), 1)
            self._pause(0.2)

    def _stop_worker(self) -> None:
        if "worker" in self.children:
            self.phase = "stopping the worker (warm shutdown)"
            self._refresh()
            self.children.pop("worker").stop()
        self.view.close()

    def _finish(self, unfinished: int) -> int:
        assert self.app_module is not None
        records = self.app_module.recorder.read()
        rows = summarize(records, self.sent, judge_beat=not self.external)
        verdicts = judge(records.intervals)
        elapsed = time.monotonic() - self.started
        self.view.say("")
        self.view.say(format_summary(rows, elapsed, verdicts))
        if self.plot:
            plot_timeline(records, self.t0, self.plot)
            self.view.say(f"timeline written to {self.plot}")
        broken = sum(row.overlaps for row in rows) + sum(not verdict.kept for verdict in verdicts)
        return 1 if broken or unfinished else 0

    def _clean_up(self) -> None:
        """Stop every child by PID and group, delete the demo's keys; runs on every exit path."""
        self.stop.clear()  # a second Ctrl-C only sets the flag again: it cannot cut the clean-up short
        try:
            for name in ("beat", "worker"):
                if name in self.children:
                    self.children.pop(name).stop(timeout=8)
            # An AsyncResult unsubscribes from Redis when collected: drop them while Redis is up.
            self.results.clear()
            gc.collect()
            if self.app_module is not None:
                self.app_module.app.close()
            if self.client is not None and self.keys is not None and self.keys.claimed:
                try:
                    self.keys.delete()
                    left = self.keys.left()
                    stopped = "the worker and beat are not ours: left running" if self.external \
                        else "worker and beat stopped"
                    self.view.say(f"cleaned up: {stopped}, demo keys deleted ({left} left under {self.keys.pattern})")
                except (redis.RedisError, OSError) as exc:
                    self.view.say(f"could not delete the demo's keys: {exc!r}")
                self.client.close()
            if "redis" in self.children:
                self.children.pop("redis").stop(timeout=5)
                self.view.say("embedded redis-server stopped")
            shutil.rmtree(self.workdir, ignore_errors=True)
        finally:
            self.stop.clear()


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m celery_singleton_lock.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", action="store_true", help="two rounds (~15 s) instead of eight (~40 s)")
    parser.add_argument("--plot", metavar="FILE.png", help="write a timeline of every lock key (needs matplotlib)")
    parser.add_argument("--external", action="store_true",
                        help="only produce: use the worker and beat already running on REDIS_URL (docker compose)")
    parser.add_argument("--concurrency", type=int, default=6, help="worker pool processes (default 6)")
    args = parser.parse_args(argv)
    try:
        DemoConfig.from_env()
    except ValueError as exc:
        parser.error(str(exc))
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            parser.error("--plot needs matplotlib: pip install 'celery-singleton-lock[demo]'")
    code = DemoRun(short=args.short, plot=args.plot, external=args.external,
                   concurrency=args.concurrency).run()
    if code == 130:
        # Stopped by Ctrl-C and cleaned up: one more Ctrl-C while the interpreter exits must not
        # turn the exit status into "killed by SIGINT".
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code


if __name__ == "__main__":
    sys.exit(main())
