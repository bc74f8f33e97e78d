"""Whether a lock's holder is still alive, judged from the lock alone, for ``celery locks``.

Two kinds of evidence, and the order between them matters. A *renewal* is measured by
Redis alone: a live holder pushes the key's TTL back to ``ttl`` every ``hb``
milliseconds, so ``ttl - PTTL`` is the time since the last one, whatever the hosts'
clocks say. A *pid* that is not running says the holder is gone only where the reader
sees the holder's pids: the same host *and* the same PID namespace
(:mod:`.pid_namespace`); another container of the same host sees none of them. And a
fresh renewal outweighs a pid not seen: someone renews that lock, so clearing it would
start a duplicate beside a live run.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Optional

from . import pid_namespace

__all__ = ["STALE_HEARTBEATS", "Reader", "Verdict", "judge"]

#: A running lock not renewed for this many heartbeat periods has a holder that stopped renewing.
STALE_HEARTBEATS = 1.5


@dataclass(frozen=True)
class Reader:
    """Where the judging process runs: its host name and PID namespace."""

    host: str = field(default_factory=socket.gethostname)
    pid_ns: str = field(default_factory=pid_namespace.current)

    @classmethod
    def here(cls, host: Optional[str] = None) -> "Reader":
        """This process as a reader; ``host`` stands for its host name when given."""
        return cls(host=host) if host else cls()

    def sees_pids_of(self, host: str, pid_ns: str) -> bool:
        """Whether a pid written by a holder on ``host`` in ``pid_ns`` names a process this reader can see."""
        return bool(pid_ns) and host == self.host and pid_ns == self.pid_ns


@dataclass(frozen=True)
class Verdict:
    since_renewal_ms: Optional[int]
    stale: bool               # a running lock whose holder has stopped renewing it
    lost: bool                # its holder process is known to be gone
    reason: str               # one sentence: why


def pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def judge(state: str, ttl_ms: Optional[int], pttl_ms: int, heartbeat_ms: Optional[int], host: str,
          pid: Optional[int], pid_ns: str, reader: Reader) -> Verdict:
    """The verdict on one lock, as ``reader`` can tell it."""
    left = f"it expires in {pttl_ms / 1000:.1f}s"
    if state == "released":
        # A place of a key with a window: its holder let go, the window keeps it taken.
        return Verdict(None, False, False, f"released: its window keeps the place {pttl_ms / 1000:.1f}s more")
    if state == "queued":
        # Nobody renews an enqueue lock: it lives lock_queue_ttl while its message waits.
        return Verdict(None, False, False, f"enqueue lock: its message waits in the queue ({left})")
    if pttl_ms < 0:
        return Verdict(None, True, False, "the key has no expiry: nothing will ever free it")
    since_renewal = ttl_ms - pttl_ms if ttl_ms is not None else None
    hb_ms = heartbeat_ms or 0
    renewed_ms = since_renewal if hb_ms else None  # how long ago, when the holder said how often
    overdue = renewed_ms is not None and renewed_ms > STALE_HEARTBEATS * hb_ms
    fresh = renewed_ms is not None and not overdue
    if not fresh and pid and reader.sees_pids_of(host, pid_ns) and not pid_running(pid):
        return Verdict(since_renewal, overdue, True, f"its holder pid {pid} is not running on this host ({host}) "
                                                     f"and it is not renewed; {left}")
    if renewed_ms is None:
        return Verdict(since_renewal, False, False, "no renewal data (written by another tool?)")
    if overdue:
        return Verdict(since_renewal, True, False, (
            f"not renewed for {renewed_ms / 1000:.1f}s (heartbeat {hb_ms / 1000:g}s): its holder is dead or "
            f"paused; {left}"))
    return Verdict(since_renewal, False, False, (
        f"its holder renewed it {renewed_ms / 1000:.1f}s ago (heartbeat {hb_ms / 1000:g}s), so it is alive"))
