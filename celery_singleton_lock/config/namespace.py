"""Our settings' names as the user wrote them, whatever namespace the app reads its settings under.

``app.config_from_object(settings, namespace="CELERY")`` (every Django project) makes Celery
look ``singleton_lock_ttl`` up as ``CELERY_SINGLETON_LOCK_TTL`` too, so reading needs nothing
of ours; but a check that walks the keys, or a censor that matches names, sees the key as
written. Here a written key is brought back to the library's name, and a library name is
spelled the way the user writes them, so errors name what is in the user's file.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Optional, Tuple

__all__ = ["OUR_PREFIX", "written_settings", "canonical", "spelled"]

#: The prefix every setting of the library carries (after the app's namespace, if any).
OUR_PREFIX = "singleton_lock_"


def _namespace(conf: Any) -> str:
    """The app's namespace prefix (``"CELERY_"``), ``""`` when it has none."""
    prefix = getattr(conf, "prefix", None)
    return prefix if isinstance(prefix, str) else ""


def canonical(name: Any, namespace: str = "") -> Optional[str]:
    """The library's name for a key as written (``CELERY_SINGLETON_LOCK_TLL`` -> ``singleton_lock_tll``),
    ``None`` for a key that is not one of ours."""
    if not isinstance(name, str):
        return None
    if namespace and name.lower().startswith(namespace.lower()):
        name = name[len(namespace):]
        name = name.lower() if namespace.isupper() else name
    return name if name.startswith(OUR_PREFIX) else None


def written_settings(conf: Mapping[str, Any]) -> Iterator[Tuple[str, str]]:
    """(key as written, library name) of every key of ours in the app's settings."""
    keys = list(conf.keys())  # reading the keys loads a pending configuration (and with it its namespace)
    namespace = _namespace(conf)
    for key in keys:
        name = canonical(key, namespace)
        if name is not None:
            yield key, name


def spelled(conf: Any, name: str, like: Optional[str] = None) -> str:
    """A library name (``singleton_lock_ttl``) as the user writes them: under the app's namespace
    when ``like`` (the key the user wrote) carries it, else plain."""
    namespace = _namespace(conf)
    if not namespace or like is None or not like.lower().startswith(namespace.lower()):
        return name
    written = namespace + name
    return written.upper() if namespace.isupper() else written.lower()
