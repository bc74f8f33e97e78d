"""Build the Redis client, and the store, that a lock URL names.

URLs are read by redis-py itself, so they behave exactly as they do in redis-py
and kombu:

``redis://``, ``rediss://``, ``unix://``
    one Redis (passwords, ACL usernames, ``ssl_*`` query options as in redis-py).
``redis+cluster://host:port[,host:port...]`` (or ``rediss+cluster://``)
    a Redis Cluster through redis-py's ``RedisCluster``; the listed nodes are
    only where discovery starts. A plain ``redis://`` URL with the transport
    option ``cluster=True`` means the same.
``sentinel://host:port[/db];sentinel://host:port...``
    Sentinel, as kombu and Celery's result backend spell it: the transport
    option ``master_name`` names the monitored master, ``sentinel_kwargs`` are
    the options of the connections to the sentinels themselves, and a password
    or username in the URL is the master's.
a list of URLs
    independent masters locked by quorum (Redlock), see :mod:`.quorum`.

``singleton_lock_transport_options`` holds redis-py keyword arguments, plus the
options of this module (taken out before redis-py sees them): ``master_name``,
``sentinel_kwargs``, ``min_other_sentinels``, ``cluster``, ``replica_ack``
(replicas that must acknowledge an acquire with ``WAIT``; 0 = off),
``replica_ack_timeout`` (seconds), ``quorum_node_timeout`` (seconds) and
``quorum_clock_drift`` (a fraction of the TTL). Timeouts are bounded by
default: a lock call against an unreachable Redis fails in seconds instead of
hanging a worker slot.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import unquote, urlsplit

import redis

from .backend import LockBackend
from .redaction import redact, split_urls
from .start_gate import start_gate

__all__ = ["connect", "open_store", "DEFAULT_CLIENT_OPTIONS", "LOCK_OPTIONS", "url_kind"]

#: Applied unless the caller's options (or the URL's ``?protocol=3``) say otherwise. RESP2, which
#: every redis-py the library supports speaks by default up to 7, lets a task's lock commands take
#: the short way to the socket (:mod:`.wire`); the lock protocol needs nothing of RESP3.
DEFAULT_CLIENT_OPTIONS: Dict[str, Any] = {
    "socket_connect_timeout": 2.0,
    "socket_timeout": 5.0,
    "health_check_interval": 30,
    "protocol": 2,
}

#: Per-node defaults of a quorum: a slow master must not hold an acquire up for seconds.
QUORUM_CLIENT_OPTIONS: Dict[str, Any] = {
    "socket_connect_timeout": 0.25,
    "socket_timeout": 0.5,
    "protocol": 2,
}

#: Transport options that belong to this library (or to kombu's Sentinel), not to redis-py.
LOCK_OPTIONS = ("master_name", "sentinel_kwargs", "min_other_sentinels", "cluster", "replica_ack",
                "replica_ack_timeout", "quorum_node_timeout", "quorum_clock_drift")

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


def url_kind(url: str) -> str:
    """``"single"``, ``"cluster"`` or ``"sentinel"`` by the URL's scheme."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in CLUSTER_SCHEMES:
        return "cluster"
    if scheme == "sentinel":
        return "sentinel"
    return "single"


def _split(options: Optional[Mapping[str, Any]]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(this library's options, redis-py keyword arguments)."""
    ours: Dict[str, Any] = {}
    client: Dict[str, Any] = {}
    for name, value in (options or {}).items():
        (ours if name in LOCK_OPTIONS else client)[name] = value
    return ours, client


def connect(url: str, options: Optional[Mapping[str, Any]] = None,
            defaults: Mapping[str, Any] = DEFAULT_CLIENT_OPTIONS, *, gated: bool = False,
            manager: Any = None) -> Any:
    """A client for ``url``; ``options`` are redis-py keyword arguments (they win over the URL).

    Returns a ``redis.Redis`` (one server, or Sentinel's current master) or a
    ``redis.cluster.RedisCluster``. A ``gated`` client is for grants: its connections
    refuse a server that started a moment ago (:mod:`.start_gate`). ``manager``: for a
    Sentinel URL, the sentinels (and their watch) of a client made before, shared.
    """
    ours, kwargs = _split(options)
    merged = dict(defaults)
    merged.update(kwargs)
    kind = url_kind(url)
    cluster = kind == "cluster" or (kind == "single" and bool(ours.get("cluster")))
    if gated:
        merged["redis_connect_func"] = start_gate(initialise=not cluster)
    if cluster:
        return _cluster_client(url, merged)
    if kind == "sentinel":
        return _sentinel_client(url, merged, ours, manager)
    return redis.Redis.from_url(url, **merged)


def _cluster_client(url: str, kwargs: Dict[str, Any]) -> Any:
    from redis.cluster import ClusterNode, RedisCluster

    scheme, rest = url.split("://", 1)
    scheme = scheme.lower().replace("+cluster", "")
    netloc, _, tail = rest.partition("/")
    auth, _, hosts = netloc.rpartition("@")
    nodes = [h for h in hosts.split(",") if h]
    if not nodes:
        raise ValueError(f"cluster URL {redact(url)!r} names no node")
    first = f"{scheme}://{auth + '@' if auth else ''}{nodes[0]}/{tail}"
    startup: List[ClusterNode] = []
    for node in nodes[1:]:
        host, _, port = node.rpartition(":")
        startup.append(ClusterNode(host or node, int(port) if host else 6379))
    kwargs.pop("health_check_interval", None)  # not a cluster-level option in every redis-py
    return RedisCluster(url=first, startup_nodes=startup, **kwargs)


def _sentinel_client(url: str, kwargs: Dict[str, Any], ours: Mapping[str, Any],
                     manager: Any = None) -> "redis.Redis":
    """A client of the master the sentinels name (asked again as :mod:`.sentinel_watch` says); ``manager``:
    the :class:`~.sentinel_watch.FollowingSentinel` of another client of the same store, to share its watch."""
    manager = _sentinel_manager(url, kwargs, ours) if manager is None else manager
    master_kwargs = dict(manager.master_kwargs)
    master_kwargs.update(kwargs)
    return manager.master_for(ours["master_name"], redis_class=redis.Redis, **master_kwargs)


def _sentinel_manager(url: str, kwargs: Dict[str, Any], ours: Mapping[str, Any]) -> Any:
    """The sentinels of ``url``, with their :class:`~.sentinel_watch.MasterWatch` and the master's
    credentials and db (``master_kwargs``)."""
    from .sentinel_watch import FollowingSentinel, MasterWatch

    master_name = ours.get("master_name")
    if not master_name:
        raise ValueError("a sentinel:// lock URL needs singleton_lock_transport_options={'master_name': ...}, "
                         "as kombu does")
    sentinels: List[Tuple[str, int]] = []
    master_kwargs: Dict[str, Any] = {}
    for one in filter(None, split_urls(url)):
        parts = urlsplit(one)
        sentinels.append((parts.hostname or "127.0.0.1", parts.port or 26379))
        if parts.password is not None and "password" not in master_kwargs:
            master_kwargs["password"] = unquote(parts.password)
        if parts.username and "username" not in master_kwargs:
            master_kwargs["username"] = unquote(parts.username)
        path = parts.path.strip("/")
        if path.isdigit() and "db" not in master_kwargs:
            master_kwargs["db"] = int(path)
    sentinel_kwargs = dict(ours.get("sentinel_kwargs") or {})
    for name in ("socket_connect_timeout", "socket_timeout"):
        sentinel_kwargs.setdefault(name, kwargs.get(name))
    min_other = int(ours.get("min_other_sentinels") or 0)
    manager = FollowingSentinel(sentinels, min_other_sentinels=min_other, sentinel_kwargs=sentinel_kwargs)
    manager.watch = MasterWatch(manager.sentinels, master_name, min_other)
    manager.master_kwargs = master_kwargs
    return manager


def open_store(url: Union[str, Sequence[str]], options: Optional[Mapping[str, Any]] = None) -> LockBackend:
    """The store a lock URL (or a list of them) names, with the behaviour its topology needs."""
    ours, _ = _split(options)
    if isinstance(url, (list, tuple)):
        from .quorum import QuorumBackend

        from .redis_backend import RedisBackend

        nodes = [RedisBackend(connect(one, options, QUORUM_CLIENT_OPTIONS),
                              connect(one, options, QUORUM_CLIENT_OPTIONS, gated=True)) for one in url]
        return QuorumBackend(nodes, node_timeout=float(ours.get("quorum_node_timeout", 0.25)),
                           clock_drift=float(ours.get("quorum_clock_drift", 0.01)))
    assert isinstance(url, str), f"singleton_lock_url: expected a URL or a list of URLs, got {url!r}"
    replicas = int(ours.get("replica_ack") or 0)
    if url_kind(url) == "sentinel":
        from .sentinel import sentinel_store

        client = connect(url, options)
        grants = connect(url, options, gated=True, manager=client.connection_pool.sentinel_manager)
        return sentinel_store(client.connection_pool.sentinel_manager, client, grants, replicas,
                              float(ours.get("replica_ack_timeout", 1.0)))
    client, grants = connect(url, options), connect(url, options, gated=True)
    from redis.cluster import RedisCluster

    if isinstance(client, RedisCluster):
        from .cluster import ClusterBackend

        return ClusterBackend(client, grants)
    if replicas > 0:
        from .replicas import ReplicaAckBackend

        return ReplicaAckBackend(client, grants, replicas=replicas,
                                 timeout=float(ours.get("replica_ack_timeout", 1.0)))
    from .redis_backend import RedisBackend

    return RedisBackend(client, grants)
