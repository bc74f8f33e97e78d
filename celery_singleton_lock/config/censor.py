"""Our settings as Celery shows them: ``celery report``, ``celery inspect conf``, Flower's config page.

Celery censors the settings it prints by name (``HIDDEN_SETTINGS``: a name with
``PASS``, ``KEY``, ``SECRET``...) and redacts ``broker_url`` and the result
backend's URL; ``singleton_lock_url`` is neither, so a password in it went out in
clear to anyone who can send a remote-control command, that is anyone who can
publish to the broker. Every path that prints settings goes through
``celery.app.utils.filter_hidden_settings`` (``Settings.table`` looks it up when
called), so it is wrapped once, here, to also censor our settings: the lock URL
or URLs with their passwords masked (the hosts stay readable), the transport
options with every secret-sounding value masked.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional

from ..store import redact, redact_options

__all__ = ["censor_settings", "install_censor"]


def _censor_url(value: Any) -> Any:
    """A URL redacted, a list of them as a list; anything else masked (it is no URL anyone can read)."""
    if isinstance(value, (list, tuple)):
        return [redact(one) for one in value]
    return value if value is None else redact(value)


#: Each setting of ours that can hold a secret, and how it is shown.
_CENSORS: Dict[str, Callable[[Any], Any]] = {
    "singleton_lock_url": _censor_url,
    "singleton_lock_transport_options": redact_options,
}


def _censor_for(name: Any) -> Optional[Callable[[Any], Any]]:
    """How a key is shown: ours however it is written (``CELERY_SINGLETON_LOCK_URL`` under Django's
    namespace, any other namespace, or upper case), matched on its end: the table Celery prints
    does not say which namespace the app reads."""
    if not isinstance(name, str):
        return None
    lowered = name.lower()
    for ours, censor in _CENSORS.items():
        if lowered == ours or lowered.endswith("_" + ours):
            return censor
    return None


def censor_settings(settings: Mapping[Any, Any]) -> Dict[Any, Any]:
    """``settings`` with our secrets masked, whatever the namespace they were given under."""
    shown = {}
    for name, value in settings.items():
        censor = _censor_for(name)
        shown[name] = value if censor is None else censor(value)
    return shown


def install_censor() -> None:
    """Wrap Celery's ``filter_hidden_settings`` (idempotent; Celery's own censoring runs first, unchanged)."""
    from celery.app import utils

    original = utils.filter_hidden_settings
    if getattr(original, "__singleton_lock_wrapped__", False):
        return

    def filter_hidden_settings(conf: Mapping[Any, Any]) -> Dict[Any, Any]:
        return censor_settings(original(conf))

    filter_hidden_settings.__doc__ = original.__doc__
    filter_hidden_settings.__singleton_lock_wrapped__ = True  # type: ignore[attr-defined]
    utils.filter_hidden_settings = filter_hidden_settings
