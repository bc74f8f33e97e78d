"""A key at a lock's name that is no lock: a value of another Redis type, or a string that is no
lock value (see :mod:`.record`), with or without an expiry.

Nothing of this library wrote it and nothing of it renews or removes it, so every call of those
arguments meets it as a holder for as long as it lives: forever, without a TTL. It is never
deleted behind the operator's back (under a shared prefix it may be another program's data); it
is reported instead. A call that meets it logs a warning naming the key, ``celery locks list``
shows it flagged ``foreign``, and ``celery locks clear`` removes it (``lua/clear_foreign.lua``:
only while it is still no lock).
"""

from __future__ import annotations

import logging
from typing import Any

from .backend import Conflict

__all__ = ["STATE", "NO_EXPIRY_MS", "OTHER_TYPE", "STRING", "holder", "report"]

logger = logging.getLogger("celery_singleton_lock.store")

#: The :attr:`~.backend.Conflict.state` of a foreign holder.
STATE = "foreign"
#: What a foreign holder is: a value of another Redis type, or a string that is no lock value.
OTHER_TYPE, STRING = "other-type", "string"
#: The time left reported for a foreign key that never expires: a waiter waits for the release
#: announcement ``clear`` makes, or for its own timeout, instead of asking again at once.
NO_EXPIRY_MS = 86_400_000


def holder(pttl_ms: Any) -> Conflict:
    """The :class:`Conflict` a foreign key stands for (``pttl_ms``: its PTTL, ``-1`` without expiry)."""
    left = int(pttl_ms) if isinstance(pttl_ms, int) else -1
    return Conflict(task_id="", host="", pid=None, since_ms=None, pttl_ms=left if left > 0 else NO_EXPIRY_MS,
                    heartbeat_ms=None, state=STATE)


def report(key: str, conflict: Conflict) -> None:
    """Say, for the operator, that a call met a foreign key and what to do about it."""
    expiry = ("it never expires" if conflict.pttl_ms == NO_EXPIRY_MS
              else f"it expires in {conflict.pttl_ms / 1000:.1f}s")
    logger.warning("singleton lock: key %s holds a value this library did not write (another Redis type, or a "
                   "string that is no lock); %s, and until then every call of these arguments meets it as a "
                   "holder. `celery locks list` shows it flagged foreign; `celery locks clear %s` removes it",
                   key, expiry, key)
