"""Task options and app settings, resolved and validated once per task.

A task option is an ordinary ``@app.task(...)`` keyword (Celery turns it into a
class attribute). When the task leaves it unset, the app-wide default
``app.conf.singleton_lock_<name>`` applies, then the built-in default. All of it
is checked when the task is bound to its app (definition, or at the latest the
worker's start), so a wrong value never surfaces inside a running worker.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import Any, Callable, Collection, Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import parse_qsl, urlsplit

from .exceptions import ConfigurationError
from .store import redact

__all__ = ["LockOptions", "AppSettings", "SCOPES", "ON_LOCKED", "ON_LOCK_ERROR", "resolve_options",
           "resolve_settings", "broker_url", "OPTION_NAMES", "refuse_unknown_options"]

SCOPES = ("running", "queued", "queued_or_running")
ON_LOCKED = ("skip", "retry", "wait", "raise")
ON_LOCK_ERROR = ("retry", "run", "raise")

# task attribute -> (app.conf key, built-in default)
_OPTIONS: Dict[str, Tuple[str, Any]] = {
    "lock_key": ("singleton_lock_key", None),
    "lock_scope": ("singleton_lock_scope", "running"),
    "lock_queue_ttl": ("singleton_lock_queue_ttl", 3600.0),
    "on_locked": ("singleton_lock_on_locked", "skip"),
    "lock_ttl": ("singleton_lock_ttl", 30.0),
    "lock_heartbeat": ("singleton_lock_heartbeat", None),  # None: lock_ttl / 3
    "lock_retry_delay": ("singleton_lock_retry_delay", 5.0),
    "lock_retry_max": ("singleton_lock_retry_max", None),
    "lock_wait_timeout": ("singleton_lock_wait_timeout", 30.0),
    "on_lock_error": ("singleton_lock_on_lock_error", "retry"),
}
OPTION_NAMES = tuple(_OPTIONS)
#: Every ``app.conf`` setting of the library; any other ``singleton_lock_*`` key is a typo.
SETTING_NAMES = ("singleton_lock_url", "singleton_lock_prefix", "singleton_lock_transport_options",
                 "singleton_lock_backend",
                 *(conf_key for conf_key, _ in _OPTIONS.values()))
#: Task attributes with these prefixes are lock options; any other such name is a typo.
_OPTION_PREFIXES = ("lock_", "on_lock")


@dataclass(frozen=True)
class LockOptions:
    """One task's resolved lock options (seconds as floats)."""

    key: Union[None, Tuple[str, ...], Callable[..., str]]
    scope: str
    queue_ttl: float
    on_locked: str
    ttl: float
    heartbeat: float
    retry_delay: float
    retry_max: Optional[int]
    wait_timeout: float
    on_lock_error: str

    @property
    def at_enqueue(self) -> bool:
        """Whether ``apply_async`` takes a lock before publishing."""
        return self.scope != "running"


@dataclass(frozen=True)
class AppSettings:
    """App-wide connection settings."""

    url: Union[str, Tuple[str, ...]]
    prefix: str
    transport_options: Mapping[str, Any]
    #: A lock store object given instead of a URL (``singleton_lock_backend``: the in-memory
    #: backend in unit tests); ``None`` when the store is opened from ``url``.
    backend: Any = None


def _fail(task: str, message: str) -> ConfigurationError:
    return ConfigurationError(f"task {task!r}: {message}", task=task)


def _choice(task: str, name: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise _fail(task, f"{name}={value!r} is not one of {', '.join(map(repr, allowed))}")
    return value


def _seconds(task: str, name: str, value: Any, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(task, f"{name} must be a number of seconds, not {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise _fail(task, f"{name}={value!r} must be {bound}")
    return float(value)


def refuse_unknown_options(task: str, attributes: Iterable[Tuple[str, Any]], allowed: Collection[str] = ()) -> None:
    """Refuse a ``lock_*`` / ``on_lock*`` attribute that is no option (``lock_tll=5``): silently
    ignored, it would leave the default in force. ``allowed`` are names the task class itself uses."""
    for name, value in attributes:
        if not name.startswith(_OPTION_PREFIXES) or name in OPTION_NAMES or name in allowed:
            continue
        close = difflib.get_close_matches(name, OPTION_NAMES, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]}?" if close else f"the options are {', '.join(OPTION_NAMES)}"
        raise _fail(task, f"unknown lock option {name}={value!r}: {hint}")


def resolve_options(task: str, attrs: Callable[[str], Any], conf: Mapping[str, Any]) -> LockOptions:
    """Merge task attributes over app settings over defaults, and check every value."""

    def pick(name: str) -> Any:
        value = attrs(name)
        if value is None:
            conf_key, default = _OPTIONS[name]
            value = conf.get(conf_key, default)
            value = default if value is None else value
        return value

    key = pick("lock_key")
    if isinstance(key, list):
        key = tuple(key)
    scope = _choice(task, "lock_scope", pick("lock_scope"), SCOPES)
    on_locked = _choice(task, "on_locked", pick("on_locked"), ON_LOCKED)
    on_lock_error = _choice(task, "on_lock_error", pick("on_lock_error"), ON_LOCK_ERROR)
    ttl = _seconds(task, "lock_ttl", pick("lock_ttl"))
    if ttl < 0.01:
        raise _fail(task, f"lock_ttl={ttl!r} is below the 10 ms Redis can keep")
    heartbeat_value = pick("lock_heartbeat")
    heartbeat = ttl / 3 if heartbeat_value is None else _seconds(task, "lock_heartbeat", heartbeat_value)
    if heartbeat >= ttl:
        raise _fail(task, f"lock_heartbeat={heartbeat!r} must be shorter than lock_ttl={ttl!r} "
                          "(the lock would expire between renewals)")
    retry_max = pick("lock_retry_max")
    if retry_max is not None and (isinstance(retry_max, bool) or not isinstance(retry_max, int) or retry_max < 0):
        raise _fail(task, f"lock_retry_max must be None or an int >= 0, not {retry_max!r}")
    options = LockOptions(
        key=key,
        scope=scope,
        queue_ttl=_seconds(task, "lock_queue_ttl", pick("lock_queue_ttl")),
        on_locked=on_locked,
        ttl=ttl,
        heartbeat=heartbeat,
        retry_delay=_seconds(task, "lock_retry_delay", pick("lock_retry_delay"), allow_zero=True),
        retry_max=retry_max,
        wait_timeout=_seconds(task, "lock_wait_timeout", pick("lock_wait_timeout"), allow_zero=True),
        on_lock_error=on_lock_error,
    )
    if scope == "queued_or_running" and on_locked == "wait":
        raise _fail(task, 'on_locked="wait" makes no sense with lock_scope="queued_or_running": '
                          "apply_async would block the caller until the queued copy has run; "
                          'use "skip", "raise" or "retry"')
    return options


_SINGLE_SCHEMES = ("redis", "rediss", "unix")
_TOPOLOGY_SCHEMES = ("redis+cluster", "rediss+cluster", "sentinel")
#: Names of this host's loopback interface: one server, however it is spelled.
_LOOPBACK = ("localhost", "127.0.0.1", "::1", "ip6-localhost")


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def _check_scheme(url: str, in_quorum: bool) -> None:
    """One Redis, a Cluster or Sentinel (as redis-py and kombu spell them); a quorum lists single masters."""
    parts = [p.strip() for p in url.split(";") if p.strip()] or [url]
    schemes = {_scheme(p) for p in parts}
    allowed = _SINGLE_SCHEMES if in_quorum else _SINGLE_SCHEMES + _TOPOLOGY_SCHEMES
    if len(parts) > 1 and schemes != {"sentinel"}:
        raise ConfigurationError(f"singleton_lock_url {redact(url)!r}: only sentinel:// URLs may be joined with ';'")
    if not schemes <= set(allowed):
        spelled = ", ".join(f"{s}://" for s in allowed)
        where = " in a quorum list (independent masters)" if in_quorum else ""
        raise ConfigurationError(f"singleton_lock_url {redact(url)!r}: scheme must be one of {spelled}{where}")
    for part in parts:
        _check_host(part, url)


def _check_host(part: str, url: str) -> None:
    """Refuse a URL that names no server: redis-py would pick localhost, a different Redis on every host."""
    scheme = _scheme(part)
    try:
        pieces = urlsplit(part)
        if scheme == "unix":
            named = bool(pieces.path.strip("/"))
        elif scheme.endswith("+cluster"):
            named = any(node.strip() for node in pieces.netloc.rpartition("@")[2].split(","))
        else:
            named = bool(pieces.hostname)
            pieces.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        raise ConfigurationError(f"singleton_lock_url {redact(url)!r} cannot be read: {exc}") from exc
    if not named:
        what = "socket path" if scheme == "unix" else "host"
        raise ConfigurationError(
            f"singleton_lock_url {redact(url)!r} names no {what}: redis-py would use localhost, a different Redis "
            "on every machine, which keeps nothing from running twice across hosts; set singleton_lock_url to "
            "the Redis every worker and publisher shares")


def _server(url: str) -> Tuple[str, str, int, int]:
    """(kind, host or socket path, port, db) of a single-server URL, however it is spelled."""
    pieces = urlsplit(url)
    query = dict(parse_qsl(pieces.query))
    if _scheme(url) == "unix":
        db = query.get("db", "0")
        return "unix", os.path.normpath(pieces.path), 0, int(db) if db.isdigit() else 0
    host = (pieces.hostname or "").rstrip(".").lower()
    host = "localhost" if host in _LOOPBACK else host
    path = pieces.path.strip("/") or query.get("db", "0")
    return "tcp", host, pieces.port or 6379, int(path) if path.isdigit() else 0


def _refuse_duplicates(urls: Sequence[str]) -> None:
    """A quorum of one server named twice is no quorum: no fault tolerance, and false lost-lock reports."""
    seen: Dict[Tuple[str, str, int, int], str] = {}
    for url in urls:
        server = _server(url)
        if server in seen:
            kind, host, port, db = server
            where = f"socket {host}" if kind == "unix" else f"{host}:{port}"
            raise ConfigurationError(
                f"singleton_lock_url names one Redis server twice: {redact(seen[server])!r} and {redact(url)!r} "
                f"are both {where} db {db}; a quorum lock needs independent masters: list each once")
        seen[server] = url


def broker_url(conf: Mapping[str, Any]) -> str:
    """The app's (first) broker URL as Celery reads it: CELERY_BROKER_URL (``celery -b``) overrides it."""
    broker = getattr(conf, "broker_url", None) or conf.get("broker_url") or ""
    broker = broker[0] if isinstance(broker, (list, tuple)) and broker else broker
    return broker if isinstance(broker, str) else ""


def _lock_url_from_broker(conf: Mapping[str, Any]) -> str:
    """The broker URL, when it is a Redis one; else there is no safe default."""
    broker = broker_url(conf)
    if _scheme(broker) in ("redis", "rediss", "unix", "socket"):
        return broker.split(";", 1)[0]
    spelled = f"the broker {redact(broker)!r} is not Redis" if broker else "no broker URL is set"
    raise ConfigurationError(
        f"singleton_lock_url is not set and {spelled}: set app.conf.singleton_lock_url to the Redis URL that "
        "every worker and publisher shares (a localhost default would be a different Redis on every host, "
        "and keep nothing from running twice across hosts)")


def _refuse_unknown_settings(conf: Mapping[str, Any]) -> None:
    """A misspelled ``singleton_lock_*`` setting would leave the default in force without a word."""
    for name in conf.keys():
        if isinstance(name, str) and name.startswith("singleton_lock_") and name not in SETTING_NAMES:
            close = difflib.get_close_matches(name, SETTING_NAMES, n=1, cutoff=0.5)
            hint = f"did you mean {close[0]}?" if close else f"the settings are {', '.join(SETTING_NAMES)}"
            raise ConfigurationError(f"unknown setting app.conf.{name}: {hint}")


def resolve_settings(conf: Mapping[str, Any]) -> AppSettings:
    """The connection settings of an app, with the broker URL as the fallback when it is Redis."""
    _refuse_unknown_settings(conf)
    backend = conf.get("singleton_lock_backend")
    if backend is not None:
        return _with_backend(conf, backend)
    url = conf.get("singleton_lock_url")
    if url is None:
        url = _lock_url_from_broker(conf)
    if isinstance(url, (list, tuple)):
        if not url or not all(isinstance(u, str) for u in url):
            raise ConfigurationError(f"singleton_lock_url must be a URL or a non-empty list of URLs, not "
                                     f"{redact([u for u in url if isinstance(u, str)])!r} ({len(url)} item(s))")
        url = tuple(url)
    elif not isinstance(url, str):
        raise ConfigurationError(f"singleton_lock_url must be a URL string or a list of them, not "
                                 f"{type(url).__name__}")
    for one in (url if isinstance(url, tuple) else (url,)):
        _check_scheme(one, in_quorum=isinstance(url, tuple))
    if isinstance(url, tuple):
        _refuse_duplicates(url)
    prefix = _prefix(conf)
    transport = conf.get("singleton_lock_transport_options") or {}
    if not isinstance(transport, Mapping):
        raise ConfigurationError(
            f"singleton_lock_transport_options must be a dict of redis-py options, not {type(transport).__name__}")
    if isinstance(url, str) and url.lower().startswith("sentinel://") and not transport.get("master_name"):
        raise ConfigurationError(f"singleton_lock_url {redact(url)!r} is a Sentinel URL: name the monitored master "
                                 "in singleton_lock_transport_options={'master_name': ...}, as kombu does")
    return AppSettings(url=url, prefix=prefix, transport_options=dict(transport))


def _prefix(conf: Mapping[str, Any]) -> str:
    prefix = conf.get("singleton_lock_prefix") or "singleton_lock"
    if not isinstance(prefix, str) or any(c in prefix for c in "{} \n"):
        raise ConfigurationError(f"singleton_lock_prefix {prefix!r} must be a string without braces or spaces")
    return prefix


def _with_backend(conf: Mapping[str, Any], backend: Any) -> AppSettings:
    """``singleton_lock_backend``: a store object instead of a URL; both at once is refused."""
    if conf.get("singleton_lock_url") is not None:
        raise ConfigurationError("set singleton_lock_url or singleton_lock_backend, not both")
    missing = [name for name in ("acquire", "adopt", "renew", "release", "release_events") if
               not callable(getattr(backend, name, None))]
    if missing:
        raise ConfigurationError(f"singleton_lock_backend {type(backend).__name__} is no lock backend: it lacks "
                                 f"{', '.join(missing)} (see celery_singleton_lock.store.LockBackend)")
    return AppSettings(url=f"<{type(backend).__name__}>", prefix=_prefix(conf), transport_options={},
                       backend=backend)
