"""The worker's main process watches every prefork pool process from its start, for its shared holds.

A task's lock is released for a dead pool process by its request (:mod:`.request`). A
``SharedLock`` hold is taken in any task's body, a plain one too, so the main process
watches every pool process (:meth:`~.runtime.childwatch.ChildWatch.watch_child`), the ones
running when the worker is ready and every one the pool starts later (a replacement for a
dead one, ``max_tasks_per_child``); when one exits, the holds it noted are given back
(:mod:`.runtime.holds`). Other pools (threads, gevent, solo) run holds in the main process
itself: its own exit releases them, or their lease ends.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ..runtime import holds
from ..runtime.lock_runtime import runtime_for

__all__ = ["claim_hold_directory", "watch_pool", "in_pool_process", "forget_pool"]

logger = logging.getLogger("celery_singleton_lock")


def _processes(pool: Any) -> Any:
    """Billiard's pool inside Celery's prefork pool (``None`` for other pools)."""
    inner = getattr(pool, "_pool", None)
    return inner if inner is not None and hasattr(inner, "on_process_up") else None


def claim_hold_directory() -> None:
    """Main process, before the pool starts: the hold-file directory is this user's own, or the worker
    refuses to start (:class:`~.runtime.hold_dir.UntrustedDirectory`, a ``ConfigurationError``)."""
    holds.claim(os.getpid())


def watch_pool(app: Any, consumer: Any) -> None:
    """Main process, worker ready: watch the pool's processes now and every one started later."""
    inner = _processes(getattr(consumer, "pool", None))
    if inner is None:
        return
    watch = runtime_for(app).child_watch
    if not watch.supported:
        return
    for process in list(getattr(inner, "_pool", ()) or ()):
        if getattr(process, "pid", None):
            watch.watch_child(process.pid)
    started = inner.on_process_up
    if getattr(started, "__singleton_lock_wrapped__", False):
        return

    def on_process_up(process: Any) -> Any:
        result = started(process) if started is not None else None
        try:
            watch.watch_child(process.pid)
        except Exception:
            logger.exception("singleton lock: watching pool process %s failed", getattr(process, "pid", "?"))
        return result

    on_process_up.__singleton_lock_wrapped__ = True  # type: ignore[attr-defined]
    inner.on_process_up = on_process_up


def in_pool_process() -> None:
    """A prefork pool process starts: it notes its shared holds for its main process.

    The solo pool sends ``worker_process_init`` in the worker's main process itself: nothing
    watches it from above (its own exit releases its holds), so it writes nothing (it used to
    write under its parent's pid, where nothing removed the files).
    """
    from billiard.process import current_process

    main_pid = getattr(current_process(), "_parent_pid", None)  # None in a main process
    if main_pid:
        holds.enable(main_pid)


def forget_pool() -> None:
    """The worker's main process is done: its pool processes' notes go."""
    holds.forget_all(os.getpid())
