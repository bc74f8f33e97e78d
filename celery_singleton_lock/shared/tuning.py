"""What a shared lock takes from its app: the lease, the heartbeat, how long to wait, when to retry.

A ``SharedLock`` given ``ttl`` or ``wait_timeout`` keeps them; what it leaves unset comes
from the app's ``singleton_lock_*`` settings, as a task's options do, then the built-in
defaults. Read once per app and kept: the settings do not change under a running app.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..config.options import MIN_PERIOD, MIN_TTL, duration

__all__ = ["Tuning", "tune", "seconds"]

#: app.conf key -> built-in default, for what a shared lock reads of its app.
_DEFAULTS = {"singleton_lock_ttl": 30.0, "singleton_lock_heartbeat": None, "singleton_lock_wait_timeout": 30.0,
             "singleton_lock_retry_delay": 5.0}


@dataclass(frozen=True)
class Tuning:
    """A shared lock's timings under one app (seconds)."""

    ttl: float
    heartbeat: float
    wait_timeout: float
    retry_delay: float


def seconds(where: str, name: str, value: Any, *, allow_zero: bool = False, minimum: Optional[float] = None) -> float:
    """A number of seconds as a task option's is checked (finite, in range), or a ConfigurationError naming it."""
    return duration(where, name, value, allow_zero=allow_zero, task=where, minimum=minimum)


def _conf(conf: Any, key: str) -> Any:
    value = conf.get(key)
    return _DEFAULTS[key] if value is None else value


def tune(where: str, conf: Any, ttl: Optional[float], wait_timeout: Optional[float]) -> Tuning:
    """The timings of a shared lock under an app's settings ``conf``."""
    lease = seconds(where, "ttl" if ttl is not None else "singleton_lock_ttl",
                    ttl if ttl is not None else _conf(conf, "singleton_lock_ttl"), minimum=MIN_TTL)
    beat = _conf(conf, "singleton_lock_heartbeat")
    heartbeat = (lease / 3 if beat is None or ttl is not None
                 else seconds(where, "singleton_lock_heartbeat", beat, minimum=MIN_PERIOD))
    if heartbeat >= lease:
        heartbeat = lease / 3  # the app's heartbeat is for its tasks' ttl: this lease is shorter
    waited = wait_timeout if wait_timeout is not None else _conf(conf, "singleton_lock_wait_timeout")
    return Tuning(ttl=lease, heartbeat=heartbeat,
                  wait_timeout=seconds(where, "wait_timeout", waited, allow_zero=True),
                  retry_delay=seconds(where, "singleton_lock_retry_delay", _conf(conf, "singleton_lock_retry_delay"),
                                      allow_zero=True))
