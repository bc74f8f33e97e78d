"""Publishers of the latest-wins rows, each a process of its own that a nemesis may SIGKILL.

``python -m bench.faults.publisher SLOT SEED DEADLINE TASK[,TASK...] [HOLD]`` publishes bursts of
calls to its own keys (``KEYS`` items shared out among its tasks, by slot: a publisher started again in a slot takes
its keys over) until the wall clock passes ``DEADLINE``. Every call is recorded three times in
the history: ``intents`` before ``apply_async``; ``sent`` once the broker took its message (Celery's
``after_task_publish``, before the library records the call as its key's newest); ``published``
once ``apply_async`` returned. A kill between the last two is the one the library must survive; a
kill after the call's generation was reserved and before its message went out leaves the call
before waiting a moment. ``HOLD`` seconds are spent in ``before_task_publish`` and again in
``after_task_publish`` (a slow publisher), so that random kills land in those moments often enough
to count.

:class:`Publishers` starts, kills and waits for them (in the campaign's own process).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["Publishers", "KEYS", "burst_gaps"]

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Keys (distinct ``item`` values) per publisher slot, shared out among its tasks.
KEYS = 4


def burst_gaps(task: str, quiet: float, longest: float, rng: random.Random) -> List[float]:
    """The pauses before each call of one burst (the first is 0): short bursts, whose gaps are
    shorter than the quiet period; for ``debounce_max``, a burst that never goes quiet for longer
    than ``longest``, so its cap runs a call before the burst's end."""
    if task.endswith("debounce_max"):
        gaps, total = [0.0], 0.0
        while total < longest * rng.uniform(1.2, 1.8):
            gaps.append(rng.uniform(0.1, 0.5))
            total += gaps[-1]
        return gaps
    spread = 0.12 if "replace" in task else quiet * 0.4
    return [0.0] + [rng.uniform(0.0, spread) for _ in range(rng.randint(1, 5))]


def _run(slot: int, seed: int, deadline: float, tasks: List[str], hold: float) -> None:
    from celery.signals import after_task_publish, before_task_publish

    from celery_singleton_lock.calls import headers as library_headers

    from . import latest

    recorder, pid = latest.recorder, os.getpid()

    @before_task_publish.connect(weak=False)
    def _sending(**_: Any) -> None:
        if hold:
            time.sleep(hold)

    @after_task_publish.connect(weak=False)
    def _sent(sender: Any = None, headers: Optional[Dict[str, Any]] = None, **_: Any) -> None:
        headers = headers or {}
        recorder.add("sent", {"task_id": headers.get("id"), "gen": headers.get(library_headers.GENERATION),
                              "t": time.time(), "pid": pid})
        if hold:
            time.sleep(hold)

    rng = random.Random(seed * 1000 + slot * 7919 + pid)
    per_task = max(1, KEYS // len(tasks))
    keys: List[Tuple[str, int]] = [(t, slot * per_task + i) for t in tasks for i in range(per_task)]
    ready = {key: 0.0 for key in keys}
    seq = 0
    while time.time() < deadline:
        key = min(keys, key=lambda k: (ready[k], rng.random()))
        if ready[key] > time.time():
            time.sleep(max(0.0, min(ready[key], deadline) - time.time()))
            continue
        name, item = key
        task = latest.TASKS[name]
        for gap in burst_gaps(name, latest.QUIET, latest.LONGEST, rng):
            time.sleep(gap)
            if time.time() >= deadline:
                break
            seq += 1
            task_id, tag = f"p{slot}-{pid}-{seq}-{rng.getrandbits(32):08x}", f"{pid}:{seq}"
            record = {"task_id": task_id, "task": name, "key": f"{name}:{item}", "item": item,
                      "args": [item, seq, tag], "slot": slot, "pid": pid, "t": time.time()}
            recorder.add("intents", record)
            try:
                result = task.apply_async((item, seq, tag), task_id=task_id)
                record.update(published=getattr(result, "id", None) == task_id, t=time.time())
            except Exception as exc:  # raised to the caller: this call was not published
                record.update(published=False, error=type(exc).__name__, t=time.time())
            recorder.add("published", record)
        # The key's next burst comes after a quiet period (and a body) has surely passed.
        ready[key] = time.time() + latest.QUIET + 1.0 + rng.uniform(0.0, 1.0)
        time.sleep(rng.uniform(0.05, 0.3))


class Publishers:
    """The publisher processes of one run, one per slot, all ending by ``deadline`` (wall clock)."""

    def __init__(self, env: Dict[str, str], tasks: List[str], deadline: float, seed: int, hold: float) -> None:
        self.env = dict(os.environ, **env)
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [_ROOT, self.env.get("PYTHONPATH")]))
        self.tasks, self.deadline, self.seed, self.hold = tasks, deadline, seed, hold
        self.processes: Dict[int, subprocess.Popen] = {}
        self.logs: List[str] = []
        self.killed = 0

    def start(self, slot: int) -> None:
        log = tempfile.mktemp(prefix=f"csl-publisher-{slot}-", suffix=".log")
        self.logs.append(log)
        with open(log, "wb") as out:
            self.processes[slot] = subprocess.Popen(
                [sys.executable, "-m", "bench.faults.publisher", str(slot), str(self.seed), repr(self.deadline),
                 ",".join(self.tasks), repr(self.hold)], cwd=_ROOT, env=self.env, stdout=out,
                stderr=subprocess.STDOUT)

    def alive(self) -> List[int]:
        return [slot for slot, p in self.processes.items() if p.poll() is None]

    def kill(self, slot: int) -> bool:
        """SIGKILL the slot's publisher (if it still runs); whether it did."""
        process = self.processes[slot]
        if process.poll() is not None:
            return False
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        self.killed += 1
        return True

    def wait(self, timeout: float) -> None:
        """Wait for every publisher to pass the deadline and exit; kill the ones that do not."""
        end = time.monotonic() + timeout
        for slot, process in self.processes.items():
            try:
                process.wait(max(end - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self.kill(slot)


def main(argv: List[str]) -> int:
    slot, seed, deadline, tasks = int(argv[0]), int(argv[1]), float(argv[2]), argv[3].split(",")
    _run(slot, seed, deadline, tasks, float(argv[4]) if len(argv) > 4 else 0.0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
