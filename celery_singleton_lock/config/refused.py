"""A refusal at definition stays the same refusal for the life of the process.

Celery builds an app's tasks when it finalizes the app: it marks the app finalized, then calls
each finalize callback (one per task decorator) in turn. A task whose binding raises stops that
loop, so the tasks after it are never built and every later call of them says
``NotRegistered`` (and a Django debug page that looks at a task proxy crashes on it). Here a
refusal is kept with the refused task's class, the rest of the app's registry is built before
the refusal is raised, and every later use of the task raises the same error again.

A worker or beat that meets a refusal while it starts ends with one line naming what is wrong
and :data:`EXIT_SETTINGS`, as it does when its lock store is set up wrong (``EX_CONFIG``),
rather than with Celery's traceback.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from celery import _state
from celery.app.task import Task
from celery.utils.functional import maybe_evaluate

from ..exceptions import ConfigurationError

__all__ = ["EXIT_SETTINGS", "keep", "kept", "refuse", "complete_registry", "judging", "end_start", "started"]

logger = logging.getLogger("celery_singleton_lock")

#: The exit status of a worker or beat refusing a setting or a task option (sysexits' "data error";
#: a lock store set up wrong ends it with ``EX_CONFIG``, 78).
EXIT_SETTINGS = getattr(os, "EX_DATAERR", 65)

_KEPT = "_singleton_lock_refusal"
_COMPLETING = threading.local()
_JUDGING = threading.local()
#: Set once this process's worker or beat has passed its start: a task bound later (in a pool
#: process, say) that is refused raises as in any process, it never ends the program.
_STARTED = threading.Event()


def keep(app: Any, cls: type, exc: ConfigurationError) -> None:
    """Keep ``exc`` as ``cls``'s refusal under ``app``."""
    setattr(cls, _KEPT, (app, str(exc), exc.task))


def kept(app: Any, cls: type) -> Optional[ConfigurationError]:
    """A fresh copy of the refusal kept for ``cls`` under ``app`` (raising the kept object again
    would grow its traceback with every call), ``None`` when it was not refused."""
    refusal = vars(cls).get(_KEPT)
    if refusal is None or refusal[0] is not app:
        return None
    return ConfigurationError(refusal[1], task=refusal[2])


def refuse(app: Any, exc: ConfigurationError, *refused: type) -> ConfigurationError:
    """Keep ``exc`` for each of the ``refused`` task classes, finish ``app``'s registry, and give
    ``exc`` back to raise; a worker or beat that is starting ends here instead."""
    for cls in refused:
        keep(app, cls, exc)
    if getattr(_COMPLETING, "app", None) is app:
        return exc  # met while the registry is being finished: raised again at the task's use
    if getattr(app, "finalized", False):
        complete_registry(app)
    end_start(exc)
    return exc


def complete_registry(app: Any) -> None:
    """Build and bind every task ``app`` would have had, had its finalize not been stopped by a
    refusal (each step is idempotent; a refusal met on the way is kept with its task)."""
    if getattr(_COMPLETING, "app", None) is app:
        return
    _COMPLETING.app = app
    try:
        with warnings.catch_warnings():
            # Celery's own tasks are built again as new closures: each is found registered already.
            warnings.filterwarnings("ignore", message=r"Task name .* is already registered")
            for build in list(_state._on_app_finalizers):
                _quietly(build, app)
        pending = getattr(app, "_pending", None)
        while pending:
            _quietly(maybe_evaluate, pending.popleft())
        for task in list(app._tasks.values()):
            _quietly(task.bind, app)
    finally:
        _COMPLETING.app = None


def _quietly(step: Any, arg: Any) -> None:
    try:
        step(arg)
    except ConfigurationError:
        pass  # kept with its task: raised again at its next use


def started() -> None:
    """This process's worker or beat is past its start: refusals raise from now on."""
    _STARTED.set()


def _starting() -> bool:
    """Whether this process is a Celery worker or beat that has not started yet: the worker sets up
    its task tracing (and finalizes the app) first, beat loads its task modules first."""
    if _STARTED.is_set():
        return False
    if getattr(Task, "_stackprotected", False):
        return True
    current = _state.get_current_app()
    loader = current.__dict__.get("loader") if current is not None else None
    return bool(getattr(loader, "worker_initialized", False))


@contextmanager
def judging() -> Iterator[None]:
    """Refusals met inside only raise, even in a worker that is starting: apps built to judge tasks
    (Django's system check, which Celery's Django fixup runs as a worker starts) never end it."""
    _JUDGING.on = True
    try:
        yield
    finally:
        _JUDGING.on = False


def end_start(exc: ConfigurationError) -> None:
    """A worker or beat that is starting ends with one line and :data:`EXIT_SETTINGS`."""
    if getattr(_JUDGING, "on", False) or not _starting():
        return
    logger.critical("singleton lock: refusing to start: %s", exc)
    raise SystemExit(EXIT_SETTINGS)
