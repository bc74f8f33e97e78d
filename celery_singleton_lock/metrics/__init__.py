"""Prometheus metrics of the locks, counted from the library's own signals.

``pip install celery-singleton-lock[metrics]``, then one of two app settings:

``singleton_lock_metrics_port``
    a port (or ``"host:port"``): the worker's main process serves ``/metrics`` there,
    with the values of every pool process summed (``prometheus_client``'s multiprocess
    mode; see :mod:`.serve`).
``singleton_lock_metrics_registry``
    a ``prometheus_client.CollectorRegistry`` of yours: the metrics are registered there
    and you serve it (in a web app that publishes, a solo/threads/gevent worker, or under
    prefork with your own ``PROMETHEUS_MULTIPROC_DIR`` and ``MultiProcessCollector``, calling
    :func:`mark_process_dead` for an exited child).

The names are :data:`~.instruments.METRIC_NAMES`; docs/observability.md describes each.
"""

from __future__ import annotations

from typing import Any

from .registry import PORT_SETTING, REGISTRY_SETTING, check_settings, metrics_address, metrics_for

__all__ = ["metrics_for", "enable_metrics", "mark_process_dead", "serve_worker_metrics", "stop_worker_metrics",
           "metrics_address", "PORT_SETTING", "REGISTRY_SETTING"]

_SERVER_ATTR = "_singleton_lock_metrics_server"


def mark_process_dead(pid: int, path: Any = None) -> None:
    """prometheus_client's ``mark_process_dead``, which also forgets the library's gauges of ``pid``."""
    from .serve import mark_process_dead as forget

    forget(pid, path)


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
    check_settings(app.conf)  # refuse a wrong combination now, at the worker's start
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
