"""The system check of the lock settings, read from Django's settings as Celery reads them.

The settings are loaded into a throwaway Celery app under the namespace the project's app uses
(``"CELERY"`` unless its app says otherwise), so the check sees exactly the keys the worker will
see, opens no connection and does not finalize (nor import the tasks of) the project's app. It
runs the same checks a worker runs at start: misspelled names, the app-wide task defaults, the
lock store's URL, prefix and client options, and the metrics settings.
"""

from __future__ import annotations

from typing import Any, List

from celery import Celery, current_app
from django.conf import settings
from django.core.checks import Error

from ...config.settings import resolve_settings
from ...exceptions import ConfigurationError
from ...metrics.registry import check_settings as check_metrics_settings

__all__ = ["check_lock_settings", "ERROR_ID"]

ERROR_ID = "celery_singleton_lock.E001"


def _namespace() -> str:
    """The namespace the project's Celery app reads Django's settings under (Celery's Django default)."""
    namespace = getattr(current_app, "namespace", None)
    return namespace if isinstance(namespace, str) and namespace else "CELERY"


def check_lock_settings(app_configs: Any = None, **kwargs: Any) -> List[Error]:
    """Django system check: every ``<NAMESPACE>_SINGLETON_LOCK_*`` setting as a worker would judge it."""
    namespace = _namespace()
    probe = Celery("celery_singleton_lock_check", set_as_current=False)
    probe.config_from_object(settings, namespace=namespace)
    try:
        resolve_settings(probe.conf)
        check_metrics_settings(probe.conf)
    except ConfigurationError as exc:
        return [Error(str(exc), hint=f"the {namespace}_SINGLETON_LOCK_* settings are listed in the README "
                                     "and docs/django.md", obj="settings", id=ERROR_ID)]
    return []
