"""A solo worker's releases ride with its next task's acquire (see :mod:`~..runtime.held_releases`).

Only the solo pool runs tasks in the thread that runs the worker's event loop; every other
pool runs them elsewhere (pool processes, threads, greenlets), where releases are written at once.
"""

from __future__ import annotations

from typing import Any

from kombu.asynchronous import get_event_loop

from ..runtime.lock_runtime import peek_runtime, runtime_for

__all__ = ["hold_releases_in_loop", "write_held_releases"]


def hold_releases_in_loop(app: Any, consumer: Any) -> None:
    """Worker ready, in its loop's thread: a solo pool's releases are held back from now on."""
    from celery.concurrency.solo import TaskPool

    hub = get_event_loop()
    if hub is not None and isinstance(getattr(consumer, "pool", None), TaskPool):
        runtime_for(app).held_releases.attach(hub)


def write_held_releases(app: Any) -> None:
    """Worker shutdown: what is held back goes now, and nothing is held back any more."""
    runtime = peek_runtime(app)
    if runtime is not None:
        runtime.held_releases.detach()
