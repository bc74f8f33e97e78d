"""The worker-start check of the lock store: set up wrong stops the worker, merely down only warns.

It sits above :mod:`.task` (it asks whether an app has any ``LockedTask``), and only the
worker-start receiver calls it, so the per-app machinery in :mod:`.runtime` never reaches
up to the task class.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

from ..exceptions import ConfigurationError
from ..config.settings import as_written, check_written_settings, named_as_written, resolve_settings
from ..config.sharing import refuse_disagreeing
from ..shared import refuse_unbound
from ..store import (STORE_ERRORS, KeyLayout, ProbeFailed, error_text, open_store, permanent_problem, probe_store,
                    redact, unverified_tls)
from ..task import LockedTask

__all__ = ["check_lock_store"]


def check_lock_store(app: Any) -> Optional[str]:
    """Probe the app's lock store once, as a worker starts (see :mod:`.store.probe`).

    Raises :class:`ConfigurationError` when it is set up wrong (on any master of a
    quorum), when a ``SharedLock`` made without ``app=`` asks what the store cannot keep,
    or when tasks sharing a ``lock_name`` disagree on the lock's shape: that
    does not pass by waiting. Returns a warning when it is merely
    unreachable (the worker may start: tasks follow ``on_lock_error`` until it
    answers) or talked to over TLS that verifies nothing, ``None`` when all is
    well or the app has no locked task.
    """
    check_written_settings(app.conf)  # whether or not a task reads them
    refuse_unbound(app)  # a module's SharedLock(limit=3) on a quorum: here, not inside a running task
    locked = [task for task in app.tasks.values() if isinstance(task, LockedTask)]
    if not locked:
        return None
    refuse_disagreeing((task.name, task.singleton_lock()[0], task.singleton_lock()[1].arity) for task in locked)
    latest_wins = any(task.singleton_lock()[0].latest_wins for task in locked)
    placed = any(_has_places(task.singleton_lock()[0]) for task in locked)
    settings = resolve_settings(app.conf)
    if settings.backend is not None:  # a store object handed in (the in-memory backend): nothing to connect to
        url = app.conf.get("singleton_lock_url")
        if url is None:
            return None
        backend, lock_url = as_written(app.conf, "singleton_lock_backend"), as_written(app.conf, "singleton_lock_url")
        return (f"{backend} {type(settings.backend).__name__} is in use and {lock_url} "
                f"{redact(url)!r} is ignored (a backend object wins over a URL: test settings); a worker "
                "on an in-memory backend keeps nothing from running twice across processes")
    urls = settings.url if isinstance(settings.url, tuple) else (settings.url,)
    layout = KeyLayout(settings.prefix)
    problems, outages = [], []

    def judge(url: Union[str, Tuple[str, ...]], exc: BaseException, step: Optional[str] = None) -> None:
        problem = permanent_problem(exc, step)
        if problem is not None:
            problems.append(f"{redact(url)}: {named_as_written(app.conf, problem)}")
        else:
            outages.append(f"{redact(url)} ({error_text(exc)})")

    try:
        store = open_store(settings.url, settings.transport_options)
    except STORE_ERRORS as exc:  # a Cluster client connects at once
        judge(settings.url, exc)
    except (ValueError, TypeError) as exc:
        named = as_written(app.conf, "singleton_lock_url")
        raise ConfigurationError(f"{named} {redact(settings.url)} cannot be used: "
                                 f"{error_text(exc)}") from exc
    else:
        try:
            for url, node in zip(urls, getattr(store, "nodes", None) or [store]):
                try:
                    probe_store(node, layout, generations=latest_wins, places=placed)
                except ProbeFailed as failed:
                    if not isinstance(failed.error, STORE_ERRORS):
                        raise failed.error
                    judge(url, failed.error, failed.step)
        finally:
            store.close()
    if problems:
        raise ConfigurationError("the lock store is set up wrong: " + "; ".join(problems))
    warnings = [f"TLS to {redact(url)} verifies no certificate (ssl_cert_reqs is none): anyone on the network "
                "path can pose as the lock store; give ssl_ca_certs instead (docs/security.md, TLS)"
                for url in urls if unverified_tls(url, settings.transport_options)]
    if outages:
        warnings.append(f"the lock store is unreachable at worker start: {'; '.join(outages)}; starting anyway, "
                        "and until it answers every locked task follows its on_lock_error")
    return "; ".join(warnings) or None


def _has_places(options: Any) -> bool:
    """Whether a task's keys may be places (a limit above one, a limit chosen per call, or a window)."""
    return callable(options.limit) or options.limit != 1 or options.window > 0
