"""One held lock as the renewal thread and the running task both see it."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from . import record
from .places import is_places
from .backend import Holder

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
                 "released", "context", "holder", "unreached", "_tail", "__weakref__")

    def __init__(self, key: str, token: str, ttl: float, heartbeat: float, confirmed_at: float,
                 context: Any = None, holder: Optional[Holder] = None) -> None:
        self.key = key
        self.token = token
        self.ttl = ttl
        self.heartbeat = heartbeat
        self.confirmed_at = confirmed_at  # clock() before the last call Redis confirmed
        self.next_due = confirmed_at + heartbeat
        self.lost = Flag()
        self.released = False
        self.context = context
        #: Who holds it: a renewal that takes the lock back after a restart writes it again (:attr:`tail`),
        #: so duplicates still learn who runs.
        self.holder = holder
        #: Why the last renewal since the last confirmed one got no answer (``None``: none failed), so a
        #: lock that runs out meanwhile is reported lost for that, not for a paused process.
        self.unreached: Optional[str] = None
        self._tail: Optional[str] = None

    def ran_out(self, now: float) -> bool:
        """Whether the lock surely expired by ``now`` (same clock as ``confirmed_at``): its TTL
        passed since the last renewal Redis confirmed. A process paused that long learns it
        the moment it runs again, before the heartbeat's next renewal says so."""
        return not self.released and now - self.confirmed_at >= self.ttl

    def ran_out_reason(self) -> str:
        """Why it ran out: the store did not answer its renewals, or the process ran too late to send one."""
        if self.unreached is not None:
            return (f"its TTL ran out while the lock store could not be reached to renew it "
                    f"(last error: {self.unreached})")
        return "its TTL ran out before it could be renewed (the process was paused or starved)"

    @property
    def ttl_ms(self) -> int:
        return int(self.ttl * 1000)

    @property
    def tail(self) -> str:
        """The holder's part of the lock's value, after its ttl (:func:`.record.tail`; ``""``: none known)."""
        if self._tail is None:
            self._tail = record.tail(self.holder, pid_ns=not is_places(self.key)) if self.holder is not None else ""
        return self._tail

    @property
    def renewal(self) -> Tuple[str, str, int, int, str]:
        """This lease as :meth:`~.backend.LockBackend.renew` takes it: key, token, ttl and heartbeat (ms),
        and the holder's part of its value."""
        return self.key, self.token, self.ttl_ms, int(self.heartbeat * 1000), self.tail

    def __repr__(self) -> str:
        return f"<Lease {self.key} lost={self.lost.is_set()} released={self.released}>"
