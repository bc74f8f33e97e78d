"""Celery signal receivers, connected once when the package is imported.

Receivers are module-level functions connected with ``weak=False`` and a
``dispatch_uid``, so importing the package twice (or reloading it in tests)
never connects them twice and garbage collection never disconnects them.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import current_app
from celery import signals as celery_signals

from ..config import refused
from ..config.refused import EXIT_SETTINGS
from ..config.settings import check_written_settings
from ..exceptions import ConfigurationError
from ..run.exits import release_all, release_enqueue_lock
from ..metrics import serve_worker_metrics, stop_worker_metrics
from ..metrics.registry import check_settings as check_metrics_settings
from .pool_watch import claim_hold_directory, forget_pool, in_pool_process, watch_pool
from .solo_releases import hold_releases_in_loop, write_held_releases
from .start_check import check_lock_store

__all__ = ["connect_receivers"]

logger = logging.getLogger("celery_singleton_lock")

#: The worker's exit status when its lock store is set up wrong (sysexits' "configuration error").
EXIT_CONFIG = getattr(os, "EX_CONFIG", 78)


def on_worker_setup(sender: Any = None, instance: Any = None, **kwargs: Any) -> None:
    """Main process, logging set up, before the pool and the consumer start: probe the lock store.

    A lock store that is set up wrong stops the worker here, with one line that says
    what is wrong, instead of failing every task it would take; one that is merely
    down lets it start, with a warning.
    """
    app = getattr(instance, "app", None) or current_app
    try:
        _check_settings(app)
    except ConfigurationError as exc:
        logger.critical("singleton lock: the worker refuses to start: %s", exc)
        raise SystemExit(EXIT_SETTINGS) from None
    try:
        claim_hold_directory()
        warning = check_lock_store(app)
        serve_worker_metrics(app)
    except ConfigurationError as exc:
        logger.critical("singleton lock: the worker refuses to start: %s", exc)
        raise SystemExit(EXIT_CONFIG) from None
    refused.started()
    if warning:
        logger.warning("singleton lock: %s", warning)


def _check_settings(app: Any) -> None:
    """The settings and every locked task's options, judged before the lock store is probed: one of
    them wrong ends the start with :data:`EXIT_SETTINGS`, a store set up wrong with ``EX_CONFIG``."""
    from ..task import LockedTask

    check_written_settings(app.conf)
    check_metrics_settings(app.conf)
    for task in list(app.tasks.values()):
        if isinstance(task, LockedTask):
            task.singleton_lock()


def on_app_finalize(app: Any) -> None:
    """Any app, as it is finalized (before its tasks are bound): a misspelled setting of ours or a
    wrong app-wide default fails here, in the web process too, not at the first call that reads it
    (the app's other tasks are built first, so the refusal stays the same at every later call)."""
    try:
        check_written_settings(app.conf)
    except ConfigurationError as exc:
        raise refused.refuse(app, exc)


def on_beat_init(sender: Any = None, **kwargs: Any) -> None:
    """Beat has loaded its tasks and starts its schedule: a refusal from now on raises as anywhere."""
    refused.started()


def on_worker_init(sender: Any = None, **kwargs: Any) -> None:
    """Any worker (an embedded test worker too) has built its app's tasks: a task refused from now on
    (one defined in a test, say) raises as anywhere; the worker's own start check ends it instead."""
    if getattr(getattr(sender, "app", None), "finalized", False):
        refused.started()


def on_worker_ready(sender: Any = None, **kwargs: Any) -> None:
    """Main process, the pool started: watch its processes for the shared holds they may die in."""
    app = getattr(sender, "app", None) or current_app
    try:
        watch_pool(app, sender)
    except Exception:
        logger.exception("singleton lock: watching the pool's processes failed; a shared hold of a pool process "
                         "that dies ends within its ttl")
    try:
        hold_releases_in_loop(app, sender)
    except Exception:
        logger.exception("singleton lock: releases are written one by one in this worker")


def on_worker_process_init(sender: Any = None, **kwargs: Any) -> None:
    """A prefork pool process starts: it notes its shared holds where its main process reads them."""
    in_pool_process()


def on_worker_shutdown(sender: Any = None, **kwargs: Any) -> None:
    """Main process, end of shutdown: free what in-flight executions still hold."""
    from celery.worker import state

    from .request import LockedRequest

    for request in list(state.active_requests):
        if isinstance(request, LockedRequest):
            request.release_for_child("worker shutdown", shutdown=True)
    app = getattr(sender, "app", None) or current_app
    write_held_releases(app)
    release_all(app, "worker shutdown")
    stop_worker_metrics(app)
    forget_pool()


def on_worker_process_shutdown(sender: Any = None, **kwargs: Any) -> None:
    """A pool process is exiting: whatever it still holds goes now rather than at TTL."""
    release_all(current_app, "pool process exit")


def on_task_revoked(sender: Any = None, request: Any = None, terminated: bool = False, **kwargs: Any) -> None:
    """Main process: a message revoked before it started frees the enqueue lock it carried.

    A terminated execution is released by its request once the pool reports the child gone.
    """
    from ..task import LockedTask

    if terminated or not isinstance(sender, LockedTask) or request is None or not hasattr(request, "get"):
        return
    release_enqueue_lock(sender, request.get("id"), request, "revoked before start")


def _release_revoked_in_memory(task_ids: Any) -> None:
    """Free the enqueue locks of revoked messages this worker holds but has not started.

    Celery discards a reserved or scheduled (ETA) request only when its turn comes;
    its lock should not wait that long.
    """
    from celery.utils.functional import maybe_list
    from celery.worker import state

    from .request import LockedRequest

    for task_id in maybe_list(task_ids) or ():
        request = state.requests.get(task_id)
        if isinstance(request, LockedRequest) and request not in state.active_requests:
            request.release_enqueue_lock("revoked while waiting in the worker")


def _install_revoke_hook() -> None:
    """Wrap the worker's ``revoke`` control command (idempotent; Celery's behaviour unchanged)."""
    from celery.worker.control import Panel

    original = Panel.data.get("revoke")
    if original is None or getattr(original, "__singleton_lock_wrapped__", False):
        return

    def revoke(state: Any, task_id: Any, terminate: bool = False, signal: Any = None, **kwargs: Any) -> Any:
        reply = original(state, task_id, terminate=terminate, signal=signal, **kwargs)
        if not terminate:
            try:
                _release_revoked_in_memory(task_id)
            except Exception:
                logger.exception("singleton lock: releasing enqueue locks of revoked tasks failed")
        return reply

    revoke.__doc__ = original.__doc__
    revoke.__singleton_lock_wrapped__ = True  # type: ignore[attr-defined]
    Panel.data["revoke"] = revoke


def connect_receivers() -> None:
    from celery._state import connect_on_app_finalize

    _install_revoke_hook()
    connect_on_app_finalize(on_app_finalize)  # a set: connecting twice keeps one
    celery_signals.celeryd_after_setup.connect(on_worker_setup, weak=False,
                                               dispatch_uid="celery_singleton_lock.celeryd_after_setup")
    celery_signals.beat_init.connect(on_beat_init, weak=False, dispatch_uid="celery_singleton_lock.beat_init")
    celery_signals.worker_init.connect(on_worker_init, weak=False, dispatch_uid="celery_singleton_lock.worker_init")
    celery_signals.task_revoked.connect(on_task_revoked, weak=False,
                                        dispatch_uid="celery_singleton_lock.task_revoked")
    celery_signals.worker_ready.connect(on_worker_ready, weak=False,
                                        dispatch_uid="celery_singleton_lock.worker_ready")
    celery_signals.worker_process_init.connect(on_worker_process_init, weak=False,
                                               dispatch_uid="celery_singleton_lock.worker_process_init")
    celery_signals.worker_shutdown.connect(on_worker_shutdown, weak=False,
                                           dispatch_uid="celery_singleton_lock.worker_shutdown")
    celery_signals.worker_process_shutdown.connect(on_worker_process_shutdown, weak=False,
                                                   dispatch_uid="celery_singleton_lock.worker_process_shutdown")
