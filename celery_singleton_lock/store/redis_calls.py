"""What the singleton lock's scripts and commands are sent on one Redis, and what their replies mean.

Kept apart from :class:`~.redis_backend.RedisBackend` so that the stores built on it (Cluster
batching, Sentinel's replica acknowledgement) send the same calls and read the same replies.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

from . import foreign, record
from .backend import GRANT, NOT_OURS, Completion, Conflict, Grant, Holder, NotOurs, Outcome

__all__ = ["UNKNOWN_HOLDER", "release_call", "floor_arg", "adopt_call", "queue_acquire", "acquired", "adopted"]

#: A conflict whose holder cannot be read (taken and released again under the asker's feet, time
#: after time): someone holds it, for an unknown time.
UNKNOWN_HOLDER = Conflict(task_id="", host="", pid=None, since_ms=None, pttl_ms=0, heartbeat_ms=None,
                          state="running")


def release_call(key: str, token: str, completion: Optional[Completion],
                 state: str = "running") -> Tuple[Tuple[str, ...], Tuple[Any, ...]]:
    """RELEASE's KEYS and ARGV, with the completion note when one is asked for."""
    start = record.head(token, state)
    if completion is None:
        return (key,), (start,)
    return (key, completion.done_key), (start, completion.task_id, completion.remember_ms,
                                        1 if completion.always else 0)


def floor_arg(fence_floor: int) -> Tuple[int, ...]:
    """The optional fencing floor ARGV (a quorum's proposal); nothing when there is none."""
    return (int(fence_floor),) if fence_floor > 0 else ()


def adopt_call(queued_key: str, key: str, queued_token: str, token: str, ttl_ms: int,
               holder: Holder) -> Tuple[Tuple[str, ...], Tuple[Any, ...]]:
    """ADOPT's KEYS and ARGV: the running lock's value is written whole, as an acquire writes it."""
    return (queued_key, key), (record.head(queued_token, "queued"), token,
                               record.encode(token, "running", ttl_ms, holder), ttl_ms)


def queue_acquire(pipe: Any, key: str, value: str, ttl_ms: int) -> None:
    """The acquire's three commands, on a pipeline: take if free, then read the holder."""
    pipe.set(key, value, nx=True, px=ttl_ms)
    pipe.get(key)
    pipe.pttl(key)


def acquired(replies: Sequence[Any], token: str, state: str) -> Optional[Outcome]:
    """The outcome of :func:`queue_acquire`'s replies; ``None`` when the lock was released
    between the ``SET`` and the ``GET`` (ask again)."""
    taken, value, pttl = replies[:3]
    if isinstance(taken, Exception):
        raise taken
    if taken:
        return GRANT
    if isinstance(value, Exception):
        if not str(value).startswith("WRONGTYPE"):
            raise value
        return foreign.holder(pttl)  # a value of another Redis type at the lock's name
    if value is None:
        return None
    fields = record.decode(value)
    if fields["token"] == token and fields["state"] == state:
        return GRANT  # ours already: a repeated ask after a reply lost to a broken connection
    return record.conflict(value, pttl if isinstance(pttl, int) else 0, token)


def adopted(reply: Any, queued_key: str, key: str, queued_token: str) -> Union[Grant, Conflict, NotOurs]:
    """ADOPT's reply: 1, {0, value, pttl} or 2."""
    if isinstance(reply, (list, tuple)):
        return record.conflict(reply[1], reply[2], queued_token if queued_key == key else None)
    return GRANT if int(reply) == 1 else NOT_OURS
