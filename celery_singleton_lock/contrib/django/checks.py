"""The system check of the lock settings and task options, read from Django's settings as Celery reads them.

The settings are loaded into a throwaway Celery app under the namespace the project's app uses
(``"CELERY"`` unless its app says otherwise), so the check sees exactly the keys the worker will
see, opens no connection and does not finalize the project's app. Every setting is judged on its
own and each wrong one is reported, all at once, under its own check id (:data:`CHECK_IDS`, the
table in docs/django.md); a ``SINGLETON_LOCK_*`` setting written without the namespace, which
Celery never reads, is a warning. Then the ``tasks`` modules of the installed apps (the ones a
worker's autodiscovery imports) are imported and their tasks bound to a second throwaway app, with
the wrong settings left out: each task whose options a worker would refuse, and each pair of tasks
that share a ``lock_name`` but not its shape, is reported too.
"""

from __future__ import annotations

import importlib
import importlib.util
import types
from typing import AbstractSet, Any, Dict, List, Set, Tuple

from celery import Celery, current_app
from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning

from ...config import refused
from ...config.options import SETTING_NAMES
from ...config.settings import setting_problems
from ...exceptions import ConfigurationError
from ...metrics.registry import PORT_SETTING, REGISTRY_SETTING, check_settings, metrics_address
from ...task import LockedTask

__all__ = ["check_lock_settings", "CHECK_IDS", "TASK_ID", "SHARED_ID", "UNNAMESPACED_ID", "IMPORT_ID"]

_PREFIX = "celery_singleton_lock."
#: Each setting's check id ("" is a name that is no setting of ours: a typo).
CHECK_IDS: Dict[str, str] = {
    "": "E001",
    "singleton_lock_url": "E002",
    "singleton_lock_prefix": "E003",
    "singleton_lock_transport_options": "E004",
    "singleton_lock_backend": "E005",
    PORT_SETTING: "E006",
    REGISTRY_SETTING: "E007",
    "singleton_lock_describe": "E008",
    "singleton_lock_guard_old_keys": "E009",
    "singleton_lock_key": "E010",
    "singleton_lock_scope": "E011",
    "singleton_lock_queue_ttl": "E012",
    "singleton_lock_on_locked": "E013",
    "singleton_lock_ttl": "E014",
    "singleton_lock_heartbeat": "E015",
    "singleton_lock_retry_delay": "E016",
    "singleton_lock_retry_max": "E017",
    "singleton_lock_wait_timeout": "E018",
    "singleton_lock_on_lock_error": "E019",
    "singleton_lock_debounce": "E020",
    "singleton_lock_debounce_max": "E021",
    "singleton_lock_limit": "E022",
    "singleton_lock_window": "E023",
}
#: A task's own options refused; tasks sharing a ``lock_name`` that disagree on it.
TASK_ID, SHARED_ID = "E030", "E031"
#: A ``SINGLETON_LOCK_*`` setting without the namespace; a ``tasks`` module that cannot be imported.
UNNAMESPACED_ID, IMPORT_ID = "W001", "W002"
_HINT = "the {namespace}_SINGLETON_LOCK_* settings and the check ids are listed in docs/django.md"


def _namespace() -> str:
    """The namespace the project's Celery app reads Django's settings under (Celery's Django default)."""
    namespace = getattr(current_app, "namespace", None)
    return namespace if isinstance(namespace, str) and namespace else "CELERY"


def _settings_app(namespace: str, dropped: AbstractSet[str] = frozenset()) -> Celery:
    """A throwaway app reading Django's settings as the project's app does, less the ``dropped`` keys."""
    probe = Celery("celery_singleton_lock_check", set_as_current=False)
    names = [name for name in dir(settings) if name.isupper() and name not in dropped]
    probe.config_from_object(types.SimpleNamespace(**{name: getattr(settings, name) for name in names}),
                             namespace=namespace)
    return probe


def _metrics_problems(conf: Any) -> List[Tuple[str, ConfigurationError]]:
    try:
        metrics_address(conf)
    except ConfigurationError as exc:
        return [(PORT_SETTING, exc)]
    try:
        check_settings(conf)
    except ConfigurationError as exc:
        return [(REGISTRY_SETTING if conf.get(REGISTRY_SETTING) is not None else PORT_SETTING, exc)]
    return []


def _written(namespace: str, name: str) -> str:
    return f"{namespace}_{name.upper()}"


def _unnamespaced(namespace: str) -> List[CheckMessage]:
    """``SINGLETON_LOCK_TTL = 5`` beside a ``CELERY`` namespace is never read: the default stays in force."""
    found = []
    for name in dir(settings):
        ours = name.lower()
        if name.isupper() and ours.startswith("singleton_lock_"):
            meant = _written(namespace, ours)
            known = ours in SETTING_NAMES
            found.append(Warning(
                f"{name} is not read: the Celery app reads its settings under the {namespace} namespace"
                + (f"; did you mean {meant}?" if known else ""),
                hint=_HINT.format(namespace=namespace), obj="settings", id=_PREFIX + UNNAMESPACED_ID))
    return found


def _import_task_modules() -> List[CheckMessage]:
    """Import each installed app's ``tasks`` module, as a worker's autodiscovery does."""
    failed = []
    for config in apps.get_app_configs():
        module = f"{config.name}.tasks"
        try:
            if importlib.util.find_spec(module) is None:
                continue
            importlib.import_module(module)
        except Exception as exc:  # the worker would fail on it too; its tasks go unchecked here
            failed.append(Warning(f"{module} could not be imported, so its tasks' lock options were not checked: "
                                  f"{type(exc).__name__}: {exc}", obj=module, id=_PREFIX + IMPORT_ID))
    return failed


def _task_problems(namespace: str, dropped: Set[str], url_wrong: bool) -> List[CheckMessage]:
    """Bind every task the imported modules define to a throwaway app, and report each refusal once."""
    probe = _settings_app(namespace, dropped)
    if url_wrong:  # judged as if on one Redis server: the URL's own error is reported already
        probe.conf.singleton_lock_url = "redis://localhost:6379/0"
    try:
        with refused.judging():  # Celery's Django fixup runs this check as a worker starts: never end it
            probe.finalize()
    except ConfigurationError:
        pass  # kept with each refused task (see config.refused)
    errors: List[CheckMessage] = []
    seen: Set[str] = set()
    for name, task in sorted(probe._tasks.items()):
        if not isinstance(task, LockedTask):
            continue
        refusal = refused.kept(probe, type(task))
        if refusal is None or str(refusal) in seen:
            continue
        seen.add(str(refusal))
        shared = "share lock_name=" in str(refusal)
        errors.append(Error(str(refusal), hint="task options are listed in docs/reference.md (Task options)", obj=name,
                            id=_PREFIX + (SHARED_ID if shared else TASK_ID)))
    return errors


def check_lock_settings(app_configs: Any = None, **kwargs: Any) -> List[CheckMessage]:
    """Django system check: every ``<NAMESPACE>_SINGLETON_LOCK_*`` setting as a worker would judge it,
    and the lock options of every task the installed apps' ``tasks`` modules define."""
    namespace = _namespace()
    conf = _settings_app(namespace).conf
    problems = setting_problems(conf) + _metrics_problems(conf)
    messages: List[CheckMessage] = [
        Error(str(exc), hint=_HINT.format(namespace=namespace), obj="settings", id=_PREFIX + CHECK_IDS[name])
        for name, exc in problems]
    messages += _unnamespaced(namespace)
    messages += _import_task_modules()
    dropped = {_written(namespace, name) for name, _ in problems if name}
    dropped |= {key for key in dir(settings) if key.startswith(f"{namespace}_SINGLETON_LOCK_")
                and key[len(namespace) + 1:].lower() not in SETTING_NAMES}
    url_wrong = any(name in ("singleton_lock_url", "singleton_lock_backend") for name, _ in problems)
    messages += _task_problems(namespace, dropped, url_wrong)
    return messages
