"""Observers of the library's signals that count into the sender's app's metrics.

Attached once to each signal (:meth:`~..signals.LockSignal.observe`: called directly, ahead
of Celery's dispatch, which would cost more than the counting) when an app first turns
metrics on; a signal from an app without metrics then costs one dictionary look-up.
"""

from __future__ import annotations

from typing import Any, Optional

from celery import current_app

from .. import signals
from .registry import metrics_for

__all__ = ["connect_counting", "disconnect_counting"]


def _metrics(sender: Any) -> Any:
    # A task's bound app (``Task.app`` would check the binding again on every call).
    return metrics_for(getattr(sender, "_app", None) or current_app)


def _task(sender: Any) -> str:
    return getattr(sender, "name", None) or "unknown"


def on_acquired(sender: Any = None, key: str = "", task_id: Optional[str] = None,
                acquire_seconds: Optional[float] = None, **kwargs: Any) -> None:
    metrics = _metrics(sender)
    if metrics is not None:
        metrics.on_acquired(_task(sender), key, task_id, acquire_seconds)


def on_released(sender: Any = None, key: str = "", task_id: Optional[str] = None, exit: str = "success",
                released: bool = True, **kwargs: Any) -> None:
    metrics = _metrics(sender)
    if metrics is not None:
        metrics.on_released(_task(sender), key, task_id, exit, released)


def on_conflict(sender: Any = None, action: str = "skip", at: str = "run", **kwargs: Any) -> None:
    metrics = _metrics(sender)
    if metrics is not None:
        metrics.on_conflict(_task(sender), action, at)


def on_lost(sender: Any = None, **kwargs: Any) -> None:
    metrics = _metrics(sender)
    if metrics is not None:
        metrics.on_lost(_task(sender))


def on_waited(sender: Any = None, waited: float = 0.0, acquired: bool = False, **kwargs: Any) -> None:
    metrics = _metrics(sender)
    if metrics is not None:
        metrics.on_waited(_task(sender), waited, acquired)


def on_store_error(sender: Any = None, kind: str = "outage", **kwargs: Any) -> None:
    metrics = _metrics(sender)
    if metrics is not None:
        metrics.on_store_error(_task(sender), kind)


_OBSERVERS = ((signals.lock_acquired, on_acquired), (signals.lock_released, on_released),
              (signals.lock_conflict, on_conflict), (signals.lock_lost, on_lost),
              (signals.lock_waited, on_waited), (signals.lock_store_error, on_store_error))


def connect_counting() -> None:
    for signal, observer in _OBSERVERS:
        signal.observe(observer)


def disconnect_counting() -> None:
    """Stop counting in this process (the benchmark's metrics-off rounds)."""
    for signal, observer in _OBSERVERS:
        signal.unobserve(observer)
