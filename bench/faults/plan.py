"""The faults of the campaign, what the library promises for each, and how big a run is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

__all__ = ["Fault", "Size", "FAULTS", "SIZES", "AMQP_URL", "SLOW_PUBLISH"]

AMQP_URL = "amqp://guest:guest@127.0.0.1:5672//"

SHORT = (0.05, 0.3)  # body seconds

#: Seconds the latest-wins publishers spend after a call's generation is reserved (and, for the first
#: call of a quiet `queued_or_running` key, its enqueue lock taken) and before its message is sent, and
#: again after it is sent and before the call is recorded as its key's newest: kills land there often.
SLOW_PUBLISH = 0.05
LONG = (2.0, 6.0)


@dataclass(frozen=True)
class Fault:
    """One row of the campaign: a nemesis and the set-up it runs against."""

    name: str
    title: str
    nemesis: str  # a function name in nemeses.py
    promise: str  # what docs/guarantees.md and the failure table promise for it
    broker: str = "redis"  # "redis" (a private redis-server) or "amqp" (RabbitMQ)
    body: Tuple[float, float] = SHORT
    mid_write: bool = False  # also write half-way through the body
    visibility_timeout: float = 15.0  # Redis broker only
    quorum: int = 1  # lock-store masters (a list of URLs when more than one)
    load: float = 1.0  # share of the size's messages (long bodies run fewer)
    limit: int = 1  # the workload's `lock_limit`
    window: float = 0.0  # the workload's `lock_window`, seconds
    shared: bool = False  # plain tasks holding a `SharedLock` of `limit` places in their bodies
    latest: Tuple[str, ...] = ()  # latest-wins tasks (bench/faults/latest.py) published by publisher processes
    note: str = ""

    @property
    def app_module(self) -> str:
        return "bench.faults.latest" if self.latest else "bench.faults.app"

    @property
    def command(self) -> str:
        return f"python -m bench faults --only {self.name}"


@dataclass(frozen=True)
class Size:
    messages: int  # published per run at load 1.0
    window: float  # seconds of publishing (the nemesis acts meanwhile)
    workers: int
    concurrency: int
    items: int = 20  # distinct arguments per task
    publishers: int = 3  # publisher processes in the latest-wins rows


SIZES = {
    "full": Size(messages=1600, window=75.0, workers=2, concurrency=4),
    "quick": Size(messages=400, window=25.0, workers=2, concurrency=4),
    "smoke": Size(messages=120, window=12.0, workers=1, concurrency=4, publishers=2),
}

_PAUSE = ("process paused longer than `lock_ttl`: expires; on resume the old holder learns it lost the lock "
          "and cannot release the new holder's; fences are the defence for writes made meanwhile")

FAULTS = [
    Fault("none", "no fault", "none",
          "one run at a time per key; every message runs, is skipped or is retried; nothing left locked"),
    Fault("kill-child", "SIGKILL a pool child every 2-5 s", "kill_child",
          "revoke/child death: the surviving prefork parent releases at once; the message comes back "
          "(`acks_late`, `task_reject_on_worker_lost`)"),
    Fault("kill-worker", "SIGKILL a whole worker and restart it (Redis broker)", "kill_worker",
          "worker killed: its locks expire within `lock_ttl`; messages are the broker's business",
          note="kombu's Redis transport, not the lock: a message Redis hands to a killed worker's pending "
               "BRPOP is gone before kombu copies it to `unacked` (`python -m bench.faults.probe` shows it); "
               "use RabbitMQ with `task_acks_late=True` (next row). A lost `queued_or_running` message leaves "
               "its enqueue lock for `lock_queue_ttl`: later calls with its arguments are refused at publish "
               "until then"),
    Fault("kill-worker-amqp", "SIGKILL a whole worker and restart it (RabbitMQ, acks_late)", "kill_worker",
          "worker killed: its locks expire within `lock_ttl`; RabbitMQ requeues its unacked messages",
          broker="amqp"),
    Fault("pause-worker", "SIGSTOP a worker 4.5-6 s (> lock_ttl), then SIGCONT", "pause_worker", _PAUSE),
    Fault("pause-store", "SIGSTOP the lock store 2-6 s", "pause_store",
          "Redis unreachable: at acquire `on_lock_error` (never unguarded); during the heartbeat retried, lost "
          "only when the token is gone or the TTL has surely passed"),
    Fault("kill-clients", "CLIENT KILL TYPE normal on the lock store every 1-3 s", "kill_clients",
          "a dropped connection is an outage of one call: retried, `on_lock_error` at acquire"),
    Fault("redelivery", "broker redelivery: visibility timeout 3 s shorter than the bodies", "none",
          "a redelivered message whose first delivery still runs (or ran) is a duplicate, not a second run",
          body=(4.5, 5.5), mid_write=True, visibility_timeout=1.5, load=0.12),
    Fault("restart-store", "lock store restarted empty every 8-14 s", "restart_store",
          "restart without data: fences keep increasing; grants wait ~3 s while live holders take their "
          "locks back; a holder whose body ends before its heartbeat took its lock back takes it back at "
          "release and lets go, with no loss to report"),
    Fault("restart-store-long", "lock store restarted empty (~1 s down) during 2-6 s bodies", "restart_store_long",
          "restart during a body: the holder keeps its lock, duplicates wait, no overlap, every fenced write "
          "accepted", body=LONG, mid_write=True, load=0.15, visibility_timeout=20.0),
    Fault("quorum-kill", "Redlock quorum of 3: one master killed and restarted empty", "quorum_kill",
          "one master of three down or restarted empty: exclusion holds, fences strictly increase",
          quorum=3, note="a body that asks for its fence while fewer than a majority answer in time gets "
                         "`LockBackendError` from `self.lock.fencing_token` (no fence, no fenced write): the "
                         "workload lets such a task fail, and counts it as failed, not lost"),
]

_LIMITED = "`lock_limit=3`: at most 3 bodies of a key at once, a 4th only where an older holder was told it lost its place"
_WINDOWED = ("`lock_limit=2, lock_window=1.5`: at most 2 places of a key taken in any 1.5 s (from the start for "
             "`running`, from publish for `queued_or_running`), a 3rd only where an older holder was told it lost "
             "its place")

FAULTS += [
    Fault("limit3-kill-child", "`lock_limit=3`: SIGKILL a pool child every 2-5 s", "kill_child",
          _LIMITED + "; a killed child's place is released at once by its worker", limit=3),
    Fault("limit3-pause-worker", "`lock_limit=3`: SIGSTOP a worker 4.5-6 s, then SIGCONT", "pause_worker",
          _LIMITED + "; a paused holder's place expires and it learns so on resume", limit=3),
    Fault("limit3-restart-store", "`lock_limit=3`: lock store restarted empty every 8-14 s", "restart_store",
          _LIMITED + "; live holders take their places back, fences keep increasing", limit=3),
    Fault("window-kill-child", "window: SIGKILL a pool child every 2-5 s", "kill_child",
          _WINDOWED + "; a killed child's run ends, its window still counts", limit=2, window=1.5),
    Fault("window-pause-worker", "window: SIGSTOP a worker 4.5-6 s, then SIGCONT", "pause_worker",
          _WINDOWED + "; a paused holder's place expires and it learns so on resume", limit=2, window=1.5),
    Fault("window-restart-store", "window: lock store restarted empty every 8-14 s", "restart_store",
          _WINDOWED + "; live holders take their places back, fences keep increasing", limit=2, window=1.5),
    Fault("window5-restart-store", "window of 5 s (> the grant pause): lock store restarted empty every 8-14 s",
          "restart_store",
          "`lock_limit=2, lock_window=5`: at most 2 places of a key taken in any 5 s; a restart without data "
          "forgets the windows of runs that ended, so a server younger than the window grants no place: "
          "late rather than twice", limit=2, window=5.0),
]

_SHARED = ("`SharedLock(limit=2)` held in three plain tasks' bodies (on_locked wait, retry and raise): at most 2 "
           "holders of an item at once, a 3rd only where an older holder was told it lost its place")

FAULTS += [
    Fault("shared-kill-child", "`SharedLock`: SIGKILL a pool child every 2-5 s", "kill_child",
          _SHARED + "; a killed child's place is given back at once by its worker's main process", limit=2,
          shared=True),
    Fault("shared-pause-worker", "`SharedLock`: SIGSTOP a worker 4.5-6 s, then SIGCONT", "pause_worker",
          _SHARED + "; a paused holder's place expires and it learns so on resume", limit=2, shared=True),
    Fault("shared-restart-store", "`SharedLock`: lock store restarted empty every 8-14 s", "restart_store",
          _SHARED + "; live holders take their places back, fences keep increasing", limit=2, shared=True),
]

_LATEST = ("a superseded call (answered `None`) never runs, a call that ran answers its own arguments; each key's "
           "newest call known to reach the broker runs (a kill between publish and recording it as the newest "
           "loses nothing: its message makes it the newest); no call runs once a newer one of its key was "
           "published; runs of a key never overlap; nothing left PENDING, queued or locked")

_ORPHAN = ("a publisher killed after the first call of a quiet key took its enqueue lock at publish and before its "
           "message went out: under `queued_or_running` that lock is the run lock, and the newest call takes it over "
           "(it is an older call's that never started), so the key runs its newest call at once; under `queued` it "
           "is a key of its own, which blocks nothing (every call is published) and is left for `lock_queue_ttl` "
           "(counted in locks left)")

FAULTS += [
    Fault("replace-kill-publisher", "`on_locked=\"replace\"`: SIGKILL a publisher every 1-4 s", "kill_publisher",
          _LATEST + "; " + _ORPHAN, body=(0.2, 1.6), latest=("faults.replace", "faults.replace_queued")),
    Fault("debounce-kill-publisher", "`lock_debounce` (and `lock_debounce_max`): SIGKILL a publisher every 1-4 s",
          "kill_publisher", _LATEST + "; a burst longer than `lock_debounce_max` runs its newest call at the cap",
          latest=("faults.debounce", "faults.debounce_max")),
]
