"""Prometheus metrics of the locks, counted from the library's own signals.

``pip install celery-singleton-lock[metrics]``, then one of two app settings:

``singleton_lock_metrics_port``
    a port (or ``"host:port"``): the worker's main process serves ``/metrics`` there,
    with the values of every pool process summed (``prometheus_client``'s multiprocess
    mode; see :mod:`.serve`).
``singleton_lock_metrics_registry``
    a ``prometheus_client.CollectorRegistry`` of yours: the metrics are registered there
    and you serve it (in a web app that publishes, a solo/threads/gevent worker, or under
    prefork with your own ``PROMETHEUS_MULTIPROC_DIR`` and ``MultiProcessCollector``).

The names are :data:`~.instruments.METRIC_NAMES`; docs/observability.md describes each.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Dict, Optional, Tuple

from ..exceptions import ConfigurationError

__all__ = ["metrics_for", "enable_metrics", "serve_worker_metrics", "stop_worker_metrics", "metrics_address",
           "PORT_SETTING", "REGISTRY_SETTING"]

PORT_SETTING = "singleton_lock_metrics_port"
REGISTRY_SETTING = "singleton_lock_metrics_registry"

_ATTR = "_singleton_lock_metrics"
_SERVER_ATTR = "_singleton_lock_metrics_server"
_CREATE = threading.Lock()
#: Metric objects are per process and per registry: two apps naming the same registry count into
#: the same series (a registry dropped takes its metrics with it).
_BY_REGISTRY: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
#: The metrics a served worker writes to its multiprocess files (registered in no registry).
_UNREGISTERED: Dict[None, Any] = {}


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
        raise ConfigurationError(f"{PORT_SETTING} must be a port number or 'host:port', not {value!r}")
    return host, number


def _settings(conf: Any) -> Tuple[Optional[Tuple[str, int]], Any]:
    address, registry = metrics_address(conf), conf.get(REGISTRY_SETTING)
    if address is None and registry is None:
        return None, None
    if address is not None and registry is not None:
        raise ConfigurationError(f"set {PORT_SETTING} (the worker serves the metrics) or {REGISTRY_SETTING} "
                                 "(you serve your registry), not both")
    try:
        import prometheus_client
    except ImportError:
        raise ConfigurationError(f"{PORT_SETTING if address else REGISTRY_SETTING} needs prometheus_client: "
                                 "pip install 'celery-singleton-lock[metrics]'") from None
    if registry is not None and not isinstance(registry, prometheus_client.CollectorRegistry):
        raise ConfigurationError(f"{REGISTRY_SETTING} must be a prometheus_client.CollectorRegistry, not "
                                 f"{type(registry).__name__}")
    return address, registry


def metrics_for(app: Any) -> Any:
    """The app's :class:`~.instruments.LockMetrics` in this process; ``None`` when metrics are off."""
    metrics = app.__dict__.get(_ATTR, False)
    if metrics is not False:
        return metrics
    with _CREATE:
        address, registry = _settings(app.conf)
        if address is None and registry is None:
            metrics = None
        else:
            from .instruments import LockMetrics

            shared: Any = _UNREGISTERED if registry is None else _BY_REGISTRY
            metrics = shared.get(registry)
            if metrics is None:
                metrics = shared[registry] = LockMetrics(registry)
        setattr(app, _ATTR, metrics)
    return metrics


def enable_metrics(app: Any) -> bool:
    """Start counting lock events for ``app`` if its settings ask for metrics (idempotent)."""
    if metrics_for(app) is None:
        return False
    from .counting import connect_counting

    connect_counting()
    return True


def serve_worker_metrics(app: Any) -> None:
    """Worker main process, before the pool starts: serve the metrics if a port is set."""
    address = metrics_address(app.conf)
    _settings(app.conf)  # refuse a wrong combination now, at the worker's start
    if address is None or app.__dict__.get(_SERVER_ATTR) is not None:
        enable_metrics(app)
        return
    from .serve import WorkerServer

    server = WorkerServer(address)
    server.start()  # first: the multiprocess directory must be set before any metric exists
    setattr(app, _SERVER_ATTR, server)
    enable_metrics(app)


def stop_worker_metrics(app: Any) -> None:
    """Worker shutdown: stop serving and remove the private multiprocess directory."""
    server = app.__dict__.pop(_SERVER_ATTR, None) if app is not None else None
    if server is not None:
        server.stop()
