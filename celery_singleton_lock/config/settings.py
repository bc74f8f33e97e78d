"""App settings: where the lock store is, under which prefix, with which client options.

Read from ``app.conf`` (under the app's namespace too: ``CELERY_SINGLETON_LOCK_URL``) and
checked when the app is finalized, when a task is bound and when a worker starts: a URL
that cannot name a Redis lock store, a quorum that lists one server twice, or a misspelled
``singleton_lock_*`` setting is refused with an error that says what is wrong, naming the
key as it was written.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple, Union
from urllib.parse import parse_qsl, urlsplit

from ..exceptions import ConfigurationError
from .namespace import spelled, written_settings
from .options import SETTING_NAMES, app_default_problems, check_app_defaults
from ..store import LockBackend, ambiguous_credentials, redact, redact_options, split_urls

__all__ = ["AppSettings", "resolve_settings", "check_written_settings", "setting_problems", "as_written",
           "named_as_written", "broker_url", "guard_old_keys"]

URL, PREFIX, TRANSPORT = "singleton_lock_url", "singleton_lock_prefix", "singleton_lock_transport_options"
BACKEND, DESCRIBE = "singleton_lock_backend", "singleton_lock_describe"
#: Whether runs also hold their keys as versions before keys by name and values named them.
GUARD_OLD_KEYS = "singleton_lock_guard_old_keys"


@dataclass(frozen=True)
class AppSettings:
    """App-wide connection settings (their ``repr`` shows no password: it ends up in tracebacks and logs)."""

    url: Union[str, Tuple[str, ...]]
    prefix: str
    transport_options: Mapping[str, Any]
    #: A lock store object given instead of a URL (``singleton_lock_backend``: the in-memory
    #: backend in unit tests); ``None`` when the store is opened from ``url``.
    backend: Any = None

    def __repr__(self) -> str:
        return (f"AppSettings(url={redact(self.url)!r}, prefix={self.prefix!r}, "
                f"transport_options={redact_options(self.transport_options)!r}, backend={self.backend!r})")


_SINGLE_SCHEMES = ("redis", "rediss", "unix")
_TOPOLOGY_SCHEMES = ("redis+cluster", "rediss+cluster", "sentinel")
#: Names of this host's loopback interface: one server, however it is spelled.
_LOOPBACK = ("localhost", "127.0.0.1", "::1", "ip6-localhost")


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def _check_scheme(url: str, in_quorum: bool, name: str) -> None:
    """One Redis, a Cluster or Sentinel (as redis-py and kombu spell them); a quorum lists single masters."""
    parts = [p for p in split_urls(url) if p] or [url]
    schemes = {_scheme(p) for p in parts}
    allowed = _SINGLE_SCHEMES if in_quorum else _SINGLE_SCHEMES + _TOPOLOGY_SCHEMES
    if len(parts) > 1 and schemes != {"sentinel"}:
        raise ConfigurationError(f"{name} {redact(url)!r}: only sentinel:// URLs may be joined with ';'")
    if not schemes <= set(allowed):
        schemes_text = ", ".join(f"{s}://" for s in allowed)
        where = " in a quorum list (independent masters)" if in_quorum else ""
        raise ConfigurationError(f"{name} {redact(url)!r}: scheme must be one of {schemes_text}{where}")
    for part in parts:
        _check_host(part, url, name)


def _check_host(part: str, url: str, name: str) -> None:
    """Refuse a URL that names no server: redis-py would pick localhost, a different Redis on every host."""
    scheme = _scheme(part)
    if ambiguous_credentials(part):
        raise ConfigurationError(
            f"{name} {redact(url)!r} cannot be read: it has an '@' after a '/', '?' or '#'; "
            "percent-encode a password's '/', '?', '#', '@' and ';' (urllib.parse.quote(password, safe='')), "
            "and an '@' in a query value")
    try:
        pieces = urlsplit(part)
        if scheme == "unix":
            named = bool(pieces.path.strip("/"))
        elif scheme.endswith("+cluster"):
            named = any(node.strip() for node in pieces.netloc.rpartition("@")[2].split(","))
        else:
            named = bool(pieces.hostname)
            pieces.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:  # its text quotes the piece it could not read: a password's, maybe
        raise ConfigurationError(f"{name} {redact(url)!r} cannot be read: its host or port is not "
                                 "one (percent-encode a password's '/', '?', '#', '@' and ';')") from None
    if not named:
        what = "socket path" if scheme == "unix" else "host"
        raise ConfigurationError(
            f"{name} {redact(url)!r} names no {what}: redis-py would use localhost, a different Redis "
            f"on every machine, which keeps nothing from running twice across hosts; set {name} to "
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


def _refuse_duplicates(urls: Sequence[str], name: str) -> None:
    """A quorum of one server named twice is no quorum: no fault tolerance, and false lost-lock reports."""
    seen: Dict[Tuple[str, str, int, int], str] = {}
    for url in urls:
        server = _server(url)
        if server in seen:
            kind, host, port, db = server
            where = f"socket {host}" if kind == "unix" else f"{host}:{port}"
            raise ConfigurationError(
                f"{name} names one Redis server twice: {redact(seen[server])!r} and {redact(url)!r} "
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
    why = f"the broker {redact(broker)!r} is not Redis" if broker else "no broker URL is set"
    namespaced = spelled(conf, "singleton_lock_url", like=getattr(conf, "prefix", None) or None)
    where = "app.conf.singleton_lock_url"
    if namespaced != "singleton_lock_url":
        where += f" ({namespaced} in the settings)"
    raise ConfigurationError(
        f"{namespaced} is not set and {why}: set {where} to the Redis URL that "
        "every worker and publisher shares (a localhost default would be a different Redis on every host, "
        "and keep nothing from running twice across hosts)")


def _unknown_settings(conf: Mapping[str, Any]) -> List[ConfigurationError]:
    """A misspelled ``singleton_lock_*`` setting would leave the default in force without a word;
    each is named as written (``CELERY_SINGLETON_LOCK_TLL`` under Django's namespace)."""
    unknown = []
    for written, name in written_settings(conf):
        if name not in SETTING_NAMES:
            close = difflib.get_close_matches(name, SETTING_NAMES, n=1, cutoff=0.5)
            hint = (f"did you mean {spelled(conf, close[0], written)}?" if close
                    else f"the settings are {', '.join(spelled(conf, one, written) for one in SETTING_NAMES)}")
            where = written if written != name else f"app.conf.{name}"
            unknown.append(ConfigurationError(f"unknown setting {where}: {hint}"))
    return unknown


def as_written(conf: Mapping[str, Any], name: str) -> str:
    """Our setting ``name`` as the user wrote it (``CELERY_SINGLETON_LOCK_URL``), else ``name``."""
    return next((written for written, ours in written_settings(conf) if ours == name), name)


def named_as_written(conf: Mapping[str, Any], text: str) -> str:
    """``text`` (the lock store's own words, which name our settings plainly) with each setting named
    as the user wrote it: ``point CELERY_SINGLETON_LOCK_URL at the master`` under Django's namespace."""
    for name in (URL, TRANSPORT):
        written = as_written(conf, name)
        if written != name:
            text = text.replace(name, written)
    return text


def _defaults_written(conf: Mapping[str, Any]) -> Dict[str, str]:
    return {name: written if written != name else f"app.conf.{name}" for written, name in written_settings(conf)}


def _bool(name: str) -> Callable[[Mapping[str, Any]], None]:
    """The check of a bool setting: a string such as ``"yes"`` would fail every locked task, or
    (``"False"``) turn on what it meant to turn off."""
    def check(conf: Mapping[str, Any]) -> None:
        value = conf.get(name)
        if value is not None and not isinstance(value, bool):
            raise ConfigurationError(f"{as_written(conf, name)} must be True or False, not {value!r}")
    return check


_describe, _guard_old_keys = _bool(DESCRIBE), _bool(GUARD_OLD_KEYS)


def guard_old_keys(conf: Mapping[str, Any]) -> bool:
    """Whether runs hold their keys as older versions named them too (a rolling deploy across the change)."""
    _guard_old_keys(conf)
    return bool(conf.get(GUARD_OLD_KEYS, False))


def check_written_settings(conf: Mapping[str, Any]) -> None:
    """The settings the user wrote, checked without opening anything: no misspelled name, and each
    app-wide task default right on its own (a task that sets its own ``on_locked`` never reads a
    wrong ``singleton_lock_on_locked``). Run when the app is finalized, before any task is bound,
    and with every resolve (a task bound, a worker starting)."""
    for unknown in _unknown_settings(conf)[:1]:
        raise unknown
    check_app_defaults(conf, _defaults_written(conf))
    _describe(conf)
    _guard_old_keys(conf)


def setting_problems(conf: Mapping[str, Any]) -> List[Tuple[str, ConfigurationError]]:
    """Every setting of ours that is wrong, each judged on its own: (our name, what is wrong), an
    unknown name as ``""``. What a worker would refuse one at a time, all at once (``manage.py check``)."""
    problems: List[Tuple[str, ConfigurationError]] = [("", exc) for exc in _unknown_settings(conf)]
    problems += app_default_problems(conf, _defaults_written(conf))
    for name, check in ((DESCRIBE, _describe), (GUARD_OLD_KEYS, _guard_old_keys), (URL, _url), (PREFIX, _prefix),
                        (TRANSPORT, _transport), (BACKEND, _backend)):
        try:
            check(conf)
        except ConfigurationError as exc:
            problems.append((name, exc))
    return problems


def resolve_settings(conf: Mapping[str, Any]) -> AppSettings:
    """The connection settings of an app, with the broker URL as the fallback when it is Redis."""
    check_written_settings(conf)
    backend = _backend(conf)
    if backend is not None:
        return AppSettings(url=f"<{type(backend).__name__}>", prefix=_prefix(conf), transport_options={},
                           backend=backend)
    url = _url(conf)
    return AppSettings(url=url, prefix=_prefix(conf), transport_options=_transport(conf, url))


def _url(conf: Mapping[str, Any]) -> Union[str, Tuple[str, ...]]:
    """``singleton_lock_url``: one URL or a quorum's list, else the broker's when it is Redis."""
    if conf.get(BACKEND) is not None:
        return ""  # a store object wins over a URL (see _backend)
    url = conf.get(URL)
    if url is None:
        url = _lock_url_from_broker(conf)
    name = as_written(conf, URL)
    if isinstance(url, (list, tuple)):
        if not url or not all(isinstance(u, str) for u in url):
            raise ConfigurationError(f"{name} must be a URL or a non-empty list of URLs, not "
                                     f"{redact([u for u in url if isinstance(u, str)])!r} ({len(url)} item(s))")
        url = tuple(url)
    elif not isinstance(url, str):
        raise ConfigurationError(f"{name} must be a URL string or a list of them, not {type(url).__name__}")
    for one in (url if isinstance(url, tuple) else (url,)):
        _check_scheme(one, isinstance(url, tuple), name)
    if isinstance(url, tuple):
        _refuse_duplicates(url, name)
    return url


def _transport(conf: Mapping[str, Any], url: Any = None) -> Dict[str, Any]:
    """``singleton_lock_transport_options``: redis-py's client options, with the master a Sentinel URL needs."""
    transport = conf.get(TRANSPORT) or {}
    if not isinstance(transport, Mapping):
        raise ConfigurationError(f"{as_written(conf, TRANSPORT)} must be a dict of redis-py options, not "
                                 f"{type(transport).__name__}")
    url = conf.get(URL) if url is None else url
    if isinstance(url, str) and url.lower().startswith("sentinel://") and not transport.get("master_name"):
        raise ConfigurationError(f"{as_written(conf, URL)} {redact(url)!r} is a Sentinel URL: name the monitored "
                                 f"master in {as_written(conf, TRANSPORT)}={{'master_name': ...}}, as kombu does")
    return dict(transport)


def _prefix(conf: Mapping[str, Any]) -> str:
    prefix = conf.get(PREFIX) or "singleton_lock"
    if not isinstance(prefix, str) or any(c in prefix for c in "{} \n"):
        raise ConfigurationError(f"{as_written(conf, PREFIX)} {prefix!r} must be a string without braces or spaces")
    return prefix


#: What a lock store object must offer: the methods of the declared seam.
_BACKEND_METHODS = tuple(name for name, member in vars(LockBackend).items()
                         if not name.startswith("_") and callable(member))


def _backend(conf: Mapping[str, Any]) -> Any:
    """``singleton_lock_backend``: a store object instead of a URL. Given beside a URL it wins: an
    object can only be handed in code, on purpose (test settings over a project's settings that
    name the deployed Redis), while the URL is usually inherited."""
    backend = conf.get(BACKEND)
    if backend is None:
        return None
    missing = [name for name in _BACKEND_METHODS if not callable(getattr(backend, name, None))]
    if missing:
        raise ConfigurationError(f"{as_written(conf, BACKEND)} {type(backend).__name__} is no lock backend: it "
                                 f"lacks {', '.join(missing)} (see celery_singleton_lock.store.LockBackend)")
    return backend
