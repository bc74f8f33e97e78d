"""Places (:mod:`.places`) on one Redis client: one script call per operation.

:class:`RedisBackend` hands every call on a places key to :class:`RedisPlaces`; each
operation is one ``place_*.lua`` script (``EVALSHA``, loaded again on NOSCRIPT), so taking
a place and giving it back cost one round trip each, as a singleton lock's do.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import places, scripts
from .backend import GRANT, NOT_OURS, Completion, Conflict, Grant, Holder, NotOurs, Outcome
from .places import Limit

__all__ = ["RedisPlaces", "answer", "release_call", "holder_info"]

#: One script call: the registered script, its KEYS and its ARGV.
Call = Tuple[Any, Tuple[Any, ...], Tuple[Any, ...]]

#: How a backend runs one registered script: (script, keys, args, grants?) -> reply.
Run = Callable[..., Any]


def answer(reply: Any, token: Optional[str], limit: Optional[Limit]) -> Union[Grant, Conflict, NotOurs]:
    """A script's reply: 1 (granted), 2 (not ours) or a refusal (see ``_places.lua``)."""
    if isinstance(reply, (list, tuple)):
        return places.conflict(reply, token, (limit or places.SINGLETON).count)
    return GRANT if int(reply) == 1 else NOT_OURS


def release_call(key: str, token: str, completion: Optional[Completion],
                 state: str = "running") -> Tuple[Tuple[str, ...], Tuple[Any, ...]]:
    """PLACE_RELEASE's KEYS and ARGV (giving back a place in ``state``), with the completion note
    when one is asked for."""
    if completion is None:
        return (key,), (token, state)
    return (key, completion.done_key), (token, state, completion.task_id, completion.remember_ms,
                                        1 if completion.always else 0)


class RedisPlaces:
    """The place scripts, registered once on the backend's client."""

    def __init__(self, client: Any, run: Run) -> None:
        self.acquire_script = client.register_script(scripts.PLACE_ACQUIRE)
        self.release_script = client.register_script(scripts.PLACE_RELEASE)
        self.renew_script = client.register_script(scripts.PLACE_RENEW)
        self.fence_script = client.register_script(scripts.PLACE_FENCE)
        self.adopt_script = client.register_script(scripts.PLACE_ADOPT)
        self.requeue_script = client.register_script(scripts.PLACE_REQUEUE)
        self.await_script = client.register_script(scripts.PLACE_AWAIT)
        self.mark_script = client.register_script(scripts.PLACE_MARK_REDELIVERED)
        self.read_script = client.register_script(scripts.PLACE_READ)
        self._run = run

    def acquire_call(self, key: str, token: str, ttl_ms: int, holder: Holder, state: str,
                     limit: Optional[Limit]) -> Call:
        limit = limit or places.SINGLETON
        return self.acquire_script, (key,), (token, state, limit.count, ttl_ms, limit.window_ms,
                                             places.tail(ttl_ms, holder), holder.twin_id, 1 if limit.turns else 0)

    def adopt_call(self, queued_key: str, key: str, queued_token: str, token: str, ttl_ms: int, holder: Holder,
                   limit: Optional[Limit]) -> Call:
        limit = limit or places.SINGLETON
        return self.adopt_script, (queued_key, key), (queued_token, token, limit.count, ttl_ms,
                                                      places.tail(ttl_ms, holder))

    def acquire(self, key: str, token: str, ttl_ms: int, holder: Holder, state: str,
                limit: Optional[Limit]) -> Outcome:
        reply = self._run(*self.acquire_call(key, token, ttl_ms, holder, state, limit), grants=True)
        outcome = answer(reply, token, limit)
        assert not isinstance(outcome, NotOurs)
        return outcome

    def adopt(self, queued_key: str, key: str, queued_token: str, token: str, ttl_ms: int, holder: Holder,
              limit: Optional[Limit]) -> Union[Grant, Conflict, NotOurs]:
        reply = self._run(*self.adopt_call(queued_key, key, queued_token, token, ttl_ms, holder, limit), grants=True)
        return answer(reply, queued_token if queued_key == key else None, limit)

    def fence(self, key: str, fence_key: str, token: str, floor: Tuple[int, ...]) -> Optional[int]:
        return int(self._run(self.fence_script, (key, fence_key), (token, *floor))) or None

    def requeue(self, key: str, token: str, ttl_ms: int) -> bool:
        return bool(self._run(self.requeue_script, (key,), (token, ttl_ms)))

    def release(self, key: str, token: str, completion: Optional[Completion], state: str = "running") -> bool:
        keys, args = release_call(key, token, completion, state)
        return bool(self._run(self.release_script, keys, args))

    def mark_redelivered(self, key: str, task_id: str) -> bool:
        return bool(self._run(self.mark_script, (key,), (task_id,)))

    def await_release(self, key: str) -> bool:
        return bool(self._run(self.await_script, (key,), ()))

    def renew(self, items: Sequence[Tuple[Any, ...]]) -> List[Any]:
        keys, args = places.renew_args(items)
        return list(self._run(self.renew_script, keys, args))

    def holder(self, key: str) -> Optional[Dict[str, str]]:
        """The live place that frees soonest (see :func:`holder_info`); ``None`` when none is live."""
        now, *flat = self._run(self.read_script, (key,), ())
        return holder_info(dict(zip(flat[::2], flat[1::2])), int(now))


def holder_info(fields: Dict[Any, Any], now_ms: int) -> Optional[Dict[str, str]]:
    """The live place that frees soonest, for diagnostics, with ``pttl`` (until it frees),
    ``held`` (live places) and ``limit``; ``None`` when no place is live. ``fields`` is the
    key's HGETALL, ``now_ms`` the server's clock."""
    decoded = {places.text(f): places.decode(v) for f, v in fields.items() if not places.text(f).startswith("~")}
    live = []
    for token, info in decoded.items():
        lease, keep = int(info["lease_end"] or 0), int(info["keep_until"] or 0)
        ends = keep if info["state"] == "released" else max(lease, keep)
        if ends > now_ms:
            live.append((ends, token, info))
    if not live:
        return None
    ends, token, info = min(live)
    limit = places.text(fields.get(b"~n", fields.get("~n", b"1")))
    return dict(info, token=token, pttl=str(ends - now_ms), held=str(len(live)), limit=limit)
