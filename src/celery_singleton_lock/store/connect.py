"""Build the Redis client a :class:`~.client.LockStore` talks to.

URLs are read by redis-py itself (``redis://``, ``rediss://`` with its
``ssl_*`` query options, ``unix://``, passwords and ACL usernames), so they
behave exactly as they do in redis-py and kombu. Timeouts are bounded by
default: a lock call against an unreachable Redis fails in seconds instead of
hanging a worker slot.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import redis

__all__ = ["connect", "DEFAULT_CLIENT_OPTIONS"]

#: Applied unless the caller's options say otherwise.
DEFAULT_CLIENT_OPTIONS: Dict[str, Any] = {
    "socket_connect_timeout": 2.0,
    "socket_timeout": 5.0,
    "health_check_interval": 30,
}


def connect(url: str, options: Optional[Mapping[str, Any]] = None) -> "redis.Redis[Any]":
    """A client for ``url``; ``options`` are redis-py keyword arguments (they win over the URL)."""
    kwargs = dict(DEFAULT_CLIENT_OPTIONS)
    kwargs.update(options or {})
    return redis.Redis.from_url(url, **kwargs)
