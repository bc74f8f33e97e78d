"""What the web view reads and changes: the records ``celery locks`` lists, one lock's places and
fence, and a release with ``celery locks clear``'s rules.

A release clears each holder by the token that was read a moment before (nothing changes if the
lock changed hands), refuses a live holder unless forced (the holder then learns it at its next
heartbeat, and ``lock_lost`` is sent), and with force on a key with a window ends the window too.
Each release is logged with who asked for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import redis

from ..config.settings import resolve_settings
from ..exceptions import ConfigurationError
from ..printable import printable
from ..runtime.listing import listed, public_record, store_client
from ..runtime.lock_runtime import LockRuntime, runtime_for
from ..store import clear_lock, end_window, error_text, find_locks, permanent_problem, redact

__all__ = ["LockView", "Answer", "logger"]

logger = logging.getLogger("celery_singleton_lock.web")


@dataclass(frozen=True)
class Answer:
    """An HTTP status and the JSON body that goes with it."""

    status: int
    body: Any


class LockView:
    """One app's locks, read for the page (a lock store that cannot be used is an answer, not a crash)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def _runtime(self) -> LockRuntime:
        if isinstance(resolve_settings(self.app.conf).url, tuple):
            raise ConfigurationError("singleton_lock_url is a list of Redis servers (a quorum lock); the web "
                                     "view reads one server: serve it from an app configured with one of the URLs")
        return runtime_for(self.app)

    def _client(self, runtime: LockRuntime) -> Any:
        client = store_client(runtime)
        if client is None:
            raise ConfigurationError(f"the lock store {type(runtime.store).__name__} is no Redis server: the web "
                                     "view reads one")
        return client

    def _problem(self, exc: BaseException) -> Answer:
        """The store's failure as one line, with its URL's password masked."""
        if isinstance(exc, ConfigurationError):
            return Answer(500, {"error": str(exc)})
        url = redact(resolve_settings(self.app.conf).url)
        problem = permanent_problem(exc)
        if problem is not None:
            return Answer(503, {"error": f"the lock store {url} refused the command: {problem}"})
        return Answer(503, {"error": f"cannot reach the lock store {url} ({error_text(exc)})"})

    def locks(self, task: Optional[str] = None) -> Answer:
        """``locks list --json``: the same list, by the same code."""
        try:
            runtime = self._runtime()
            return Answer(200, [public_record(r) for r in listed(self.app, runtime, self._client(runtime), task)])
        except (ConfigurationError, redis.RedisError, OSError) as exc:
            return self._problem(exc)

    def lock(self, key: str) -> Answer:
        """One lock: every place of it (``k of N``) and the last fence its bucket handed out."""
        try:
            runtime = self._runtime()
            client = self._client(runtime)
            found = find_locks(client, runtime.layout, key) if runtime.layout.split(key) else []
            if not found:
                return Answer(404, {"error": f"no lock held at {key} (released, or expired)"})
            first = found[0]
            fence = client.get(runtime.layout.fence(first.name or first.task, first.digest))
            return Answer(200, {"key": first.key, "name": first.name, "places": [public_record(r) for r in found],
                                "fence": int(fence) if fence is not None else None})
        except (ConfigurationError, redis.RedisError, OSError, ValueError) as exc:
            return self._problem(exc)

    def release(self, key: str, *, force: bool, who: str) -> Answer:
        """``celery locks clear KEY [--force]`` for the key ``/api/locks`` names; logged with ``who``."""
        try:
            runtime = self._runtime()
            client = self._client(runtime)
            if not key or runtime.layout.split(key) is None:
                return Answer(400, {"error": f"{key!r} is no lock key under prefix {runtime.layout.prefix!r}: "
                                             "give the key as /api/locks names it"})
            found = find_locks(client, runtime.layout, key)
            if not found:
                return Answer(404, {"error": f"no lock held at {key}: it was released, or it expired"})
            results = [clear_lock(runtime.store, r, force=force) for r in found if r.state != "released"]
            messages: List[str] = [r.message for r in results]
            cleared = bool(results) and all(r.cleared for r in results)
            if force and found[0].limit is not None and (cleared or not results):
                dropped = end_window(client, found[0].key)
                messages.append(f"ended the window of {found[0].key}: {dropped} place(s) it kept are free now")
                cleared = True
            if not results and not force:
                messages.append(f"{key}: every place is released; only its window keeps them (force to end "
                                "the window)")
        except (ConfigurationError, redis.RedisError, OSError) as exc:
            return self._problem(exc)
        for message in messages:
            (logger.warning if cleared else logger.info)("web view: %s asked to release %s: %s", printable(who),
                                                         printable(key), printable(message))
        live = any(not r.cleared and r.record.live for r in results)
        body: Dict[str, Any] = {"key": key, "cleared": cleared, "messages": messages, "needs_force": live and not force}
        return Answer(200 if cleared else 409, body)
