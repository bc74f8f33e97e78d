"""One held lock as the renewal thread and the running task both see it."""

from __future__ import annotations

from typing import Any, Tuple

__all__ = ["Lease", "Flag"]


class Flag:
    """Set once, read from any thread: ``threading.Event``'s ``set``/``is_set`` without its
    lock and condition (nobody waits on a lost lock; a lease is made per task)."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class Lease:
    """One held lock as the renewer sees it; ``lost`` is set when it is gone."""

    __slots__ = ("key", "token", "ttl", "heartbeat", "confirmed_at", "next_due", "lost",
                 "released", "context", "__weakref__")

    def __init__(self, key: str, token: str, ttl: float, heartbeat: float, confirmed_at: float,
                 context: Any = None) -> None:
        self.key = key
        self.token = token
        self.ttl = ttl
        self.heartbeat = heartbeat
        self.confirmed_at = confirmed_at  # clock() before the last call Redis confirmed
        self.next_due = confirmed_at + heartbeat
        self.lost = Flag()
        self.released = False
        self.context = context

    def ran_out(self, now: float) -> bool:
        """Whether the lock surely expired by ``now`` (same clock as ``confirmed_at``): its TTL
        passed since the last renewal Redis confirmed. A process paused that long learns it
        the moment it runs again, before the heartbeat's next renewal says so."""
        return not self.released and now - self.confirmed_at >= self.ttl

    @property
    def ttl_ms(self) -> int:
        return int(self.ttl * 1000)

    @property
    def renewal(self) -> Tuple[str, str, int, int]:
        """This lease as :meth:`~.backend.LockBackend.renew` takes it: key, token, ttl and heartbeat (ms)."""
        return self.key, self.token, self.ttl_ms, int(self.heartbeat * 1000)

    def __repr__(self) -> str:
        return f"<Lease {self.key} lost={self.lost.is_set()} released={self.released}>"
