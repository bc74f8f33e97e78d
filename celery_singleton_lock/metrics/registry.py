"""Which metrics an app counts into, from its settings: a registry of the user's, or the
worker's multiprocess files; metric objects are made once per process and registry."""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Dict, Optional, Tuple

from ..exceptions import ConfigurationError

__all__ = ["metrics_for", "metrics_address", "check_settings", "PORT_SETTING", "REGISTRY_SETTING"]

PORT_SETTING = "singleton_lock_metrics_port"
#: Where prometheus_client's multiprocess mode keeps each process's numbers.
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
REGISTRY_SETTING = "singleton_lock_metrics_registry"

#: Where an app keeps its metrics once made (``None``: off).
_ATTR = "_singleton_lock_metrics"
_CREATE = threading.Lock()
#: Metric objects are per process and per registry: two apps naming the same registry count into
#: the same series (a registry dropped takes its metrics with it).
_BY_REGISTRY: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
#: The metrics a served worker writes to its multiprocess files (registered in no registry).
_UNREGISTERED: Dict[None, Any] = {}


def _as_written(conf: Any, setting: str) -> str:
    """A setting as the user wrote it (``CELERY_SINGLETON_LOCK_METRICS_PORT`` under Django's namespace)."""
    keys = conf.keys() if hasattr(conf, "keys") else ()
    return next((key for key in keys if isinstance(key, str) and key.lower().endswith(setting)), setting)


def metrics_address(conf: Any) -> Optional[Tuple[str, int]]:
    """(host, port) the worker serves its metrics on; ``None`` when the setting is unset."""
    value = conf.get(PORT_SETTING)
    if value is None:
        return None
    host, port = "", value
    if isinstance(value, str):
        host, _, port = value.rpartition(":")
        host = host.strip("[]")
    try:
        number = int(port)
    except (TypeError, ValueError):
        number = -1
    if isinstance(value, bool) or not 0 <= number <= 65535:
        raise ConfigurationError(f"{_as_written(conf, PORT_SETTING)} must be a port number or 'host:port', "
                                 f"not {value!r}")
    return host, number


def check_settings(conf: Any) -> Tuple[Optional[Tuple[str, int]], Any]:
    address, registry = metrics_address(conf), conf.get(REGISTRY_SETTING)
    if address is None and registry is None:
        return None, None
    port, mine = _as_written(conf, PORT_SETTING), _as_written(conf, REGISTRY_SETTING)
    if address is not None and registry is not None:
        raise ConfigurationError(f"set {port} (the worker serves the metrics) or {mine} (you serve your registry), "
                                 "not both")
    try:
        import prometheus_client
    except ImportError:
        raise ConfigurationError(f"{port if address else mine} needs prometheus_client: "
                                 "pip install 'celery-singleton-lock[metrics]'") from None
    if registry is not None and not isinstance(registry, prometheus_client.CollectorRegistry):
        raise ConfigurationError(f"{mine} must be a prometheus_client.CollectorRegistry, not "
                                 f"{type(registry).__name__}")
    return address, registry


def metrics_for(app: Any) -> Any:
    """The app's :class:`~.instruments.LockMetrics` in this process; ``None`` when metrics are off."""
    metrics = app.__dict__.get(_ATTR, False)
    if metrics is not False:
        return metrics
    with _CREATE:
        address, registry = check_settings(app.conf)
        if address is None and registry is None:
            metrics = None
        else:
            from .instruments import LockMetrics

            shared: Any = _UNREGISTERED if registry is None else _BY_REGISTRY
            metrics = shared.get(registry)
            if metrics is None:
                # A multiprocess directory (the worker's own, or the user's) holds every process's numbers.
                metrics = shared[registry] = LockMetrics(registry, os.environ.get(MULTIPROCESS_ENV) or None)
        setattr(app, _ATTR, metrics)
    return metrics
