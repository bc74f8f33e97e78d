"""One run of the campaign in a process of its own: ``python -m bench.faults.one NAME SIZE OUT.json``.

Starts the run's servers and workers, publishes the workload while the fault's nemesis
acts, stops the nemesis, drains the workers, stops them, and writes the judged figures.
A process per run: the workload app reads its configuration once, at import.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import sys
import threading
import time
import uuid
from typing import Any, Callable, Dict, List

import redis

from . import checker
from .answers import Answers, final_results
from .history import load
from .latest_checker import check_latest
from .leftovers import broker_leftovers, lock_leftovers, log_lines, result_states, tracebacks
from .nemeses import NEMESES
from .plan import FAULTS, SIZES, SLOW_PUBLISH, Fault, Size
from .publisher import Publishers
from .topology import Topology

__all__ = ["run_one"]

Log = Callable[[str], None]


def _log(message: str) -> None:
    print(f"[faults {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def publish(app_module: Any, count: int, window: float, items: int, rng: random.Random) -> None:
    """``count`` calls spread evenly over ``window`` seconds, each recorded with its fate at publish."""
    began = time.monotonic()
    for seq in range(count):
        delay = began + seq * window / count - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        task = rng.choice(app_module.TASKS)
        item = rng.randrange(items)
        task_id = str(uuid.uuid4())
        record: Dict[str, Any] = {"task_id": task_id, "task": task.name, "args": [item, seq], "item": item,
                                  "t": time.time()}
        try:
            result = task.apply_async((item, seq), task_id=task_id)
            record["published"] = getattr(result, "id", None) == task_id
        except Exception as exc:  # the caller is told: not published, and no loss
            record.update(published=False, error=type(exc).__name__)
        app_module.recorder.add("published", record)


def drain(topology: Topology, broker_url: str, timeout: float, log: Log, quiet: float = 15.0,
          settle: bool = False) -> None:
    """Wait until every published message ran, was skipped or failed; with ``settle``, also until
    the broker holds none of their messages (a call answered superseded by the publisher of a newer
    one still has its message on the way, or re-queued for a moment, and ends when it arrives).

    Gives up after ``timeout``, or once nothing changed for ``quiet`` seconds while the
    broker holds no message (queued or unacknowledged) that could still change it.
    """
    deadline = time.monotonic() + timeout
    last: List[str] = []
    since = time.monotonic()
    while time.monotonic() < deadline:
        history = load(topology.url(2))
        done = set(_completed(history))
        ids = [p["task_id"] for p in history.published if p["published"] and p["task_id"] not in done]
        # Calls whose publisher was killed after their message was sent (the latest-wins rows).
        ids += sorted({s["task_id"] for s in history.sent} - done - set(ids))
        states = result_states(topology.url(1), ids)
        open_ids = [i for i in ids if states.get(i) not in ("SUCCESS", "FAILURE")]
        if not open_ids and not (settle and _broker_holds(broker_url, topology.queue)):
            return
        if open_ids != last:
            last, since = open_ids, time.monotonic()
        elif time.monotonic() - since > quiet and not _broker_holds(broker_url, topology.queue):
            break
        time.sleep(1.0)
    log(f"drain: {len(last)} messages still open")


def _broker_holds(broker_url: str, queue: str) -> bool:
    if not broker_url.startswith("redis"):
        return False  # RabbitMQ requeues a dead consumer's messages at once: quiet is enough
    client = redis.Redis.from_url(broker_url)
    try:
        return bool(client.llen(queue) + client.hlen("unacked"))
    finally:
        client.close()


def _completed(history: Any) -> List[str]:
    ended = {e["exec"] for e in history.ends if not e.get("fence_refused")}
    return [s["task_id"] for s in history.starts if s["exec"] in ended]


def _taken(fault: Fault, history: Any) -> Dict[str, float]:
    """When a call's place was taken, where that is not its run's start: a window counts from
    publish for queued_or_running."""
    if not fault.window:
        return {}
    return {p["task_id"]: p["t"] for p in history.published if p["task"] == "faults.queued_or_running"}


def _exclusion(fault: Fault, history: Any, runs: List[checker.Execution], taken: Dict[str, float]) -> dict:
    """Pairs of overlapping bodies for a singleton lock; places over the limit otherwise."""
    if fault.limit == 1 and not fault.window:
        return checker.check_overlaps(runs, history.lost)
    return checker.check_places(runs, history.lost, fault.limit, fault.window, taken)


def _publish_latest(fault: Fault, size: Size, topology: Topology, seed: int, nemesis: Callable[[], None]) -> None:
    """Publisher processes for ``size.window`` seconds, while the nemesis (which may kill them) acts."""
    publishers = Publishers(topology.environment(), list(fault.latest), time.time() + size.window, seed,
                            SLOW_PUBLISH)
    topology.publishers = publishers
    for slot in range(size.publishers):
        publishers.start(slot)
    nemesis()
    publishers.wait(30.0)
    topology.logs += publishers.logs


def run_one(fault: Fault, size: Size, seed: int, log: Log = _log) -> dict:
    began = time.monotonic()
    topology = Topology(fault, size).start_servers()
    answers = None
    try:
        os.environ.update(topology.environment())
        app_module = importlib.import_module(fault.app_module)  # configured from the environment just set
        answers = Answers(topology.url(1)) if fault.latest else None
        topology.start_workers()
        log(f"{fault.name}: {len(topology.workers)} workers up, publishing for {size.window:.0f}s")
        stop, rng = threading.Event(), random.Random(seed)
        outcome: Dict[str, int] = {}
        nemesis = threading.Thread(target=lambda: outcome.update(
            actions=NEMESES[fault.nemesis](topology, stop, random.Random(seed + 1), log)), daemon=True)
        count = max(10, int(size.messages * fault.load))
        if fault.latest:
            def act() -> None:
                nemesis.start()
                time.sleep(size.window)
                stop.set()
                nemesis.join()
            _publish_latest(fault, size, topology, seed, act)
            count = len(load(topology.url(2)).intents)
        else:
            nemesis.start()
            publish(app_module, count, size.window, size.items, rng)
            stop.set()
            nemesis.join()
        log(f"{fault.name}: published {count}, nemesis acted {outcome.get('actions', 0)} times; draining")
        config = topology.config()
        # Long bodies and lock retries take longer to settle: the drain waits as long as they may.
        drain(topology, str(config["broker"]), fault.visibility_timeout + 40 + 20 * fault.body[1], log,
              settle=bool(fault.latest))
        for worker in list(topology.workers):
            worker.stop()
        topology.workers.clear()
        # After the warm stop: a message a stopping worker re-queued (a retry) is queued, not lost.
        queue_left, queued = broker_leftovers(app_module.app, str(config["broker"]), topology.queue)
        locks = lock_leftovers(topology.lock_urls)
        history = load(topology.url(2))
        runs = checker.executions(history)
        states = result_states(topology.url(1), [p["task_id"] for p in history.published])
        taken = _taken(fault, history)
        result = {
            "fault": fault.name, "seed": seed, "messages": count, "nemesis_actions": outcome.get("actions", 0),
            "executions": len(runs), "completed": sum(1 for r in runs if r.end is not None),
            **_exclusion(fault, history, runs, taken), **checker.check_writes(runs, fault.limit, fault.window, taken),
            **checker.check_tokens(runs),
            **checker.account(history, runs, states, queued, queue_left), **locks,
            "tracebacks": tracebacks(topology.logs), "lost_signals": len(history.lost),
        }
        if answers is not None:
            intents = [i["task_id"] for i in history.intents]
            finals = result_states(topology.url(1), intents)
            result.update(check_latest(history, runs, answers.close(), finals,
                                       final_results(topology.url(1), intents)))
        for detail in result["lost_details"]:
            detail["log"] = log_lines(topology.logs, detail["task_id"])
    finally:
        if answers is not None:
            answers.close()
        if topology.publishers is not None:
            for slot in topology.publishers.alive():
                topology.publishers.kill(slot)
        topology.stop()
    result["elapsed"] = round(time.monotonic() - began, 1)
    return result


def main(argv: List[str]) -> int:
    name, size_name, out = argv[:3]
    seed = int(argv[3]) if len(argv) > 3 else 1
    fault = next(f for f in FAULTS if f.name == name)
    result = run_one(fault, SIZES[size_name], seed)
    with open(out, "w") as handle:
        json.dump(result, handle, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
