"""The per-app lock machinery: one store, one renewer, one identity per process.

It hangs off the Celery app object instead of a module global, so two apps in
one process (or two tests) never share a connection or a heartbeat; it is built
lazily on first use, after the app is configured and, in a prefork worker,
after the fork.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any, Optional

from .. import signals
from . import holds
from .childwatch import ChildWatch
from .held_releases import HeldReleases
from ..calls.describe import describe_enabled
from ..metrics import enable_metrics
from ..config.settings import AppSettings, broker_url, guard_old_keys, resolve_settings
from ..store import KeyLayout, Lease, LockBackend, Renewer, open_store

__all__ = ["LockRuntime", "runtime_for", "peek_runtime"]

logger = logging.getLogger("celery_singleton_lock")

_ATTR = "_singleton_lock_runtime"
_CREATE = threading.Lock()


class LockRuntime:
    """Everything one app needs to take, renew and release locks."""

    def __init__(self, app: Any, settings: AppSettings) -> None:
        self.app = app
        self.settings = settings
        self.layout = KeyLayout(settings.prefix)
        # One Redis, a Redis Cluster, Sentinel's master, or a quorum of masters (a list of URLs).
        self.store: LockBackend = settings.backend or open_store(settings.url, settings.transport_options)
        self.renewer = Renewer(self.store, on_lost=self.report_lost)
        #: Releases held back to ride with the next acquire, in a worker whose loop runs tasks.
        self.held_releases = HeldReleases(app, self.store)
        self.hostname = socket.gethostname()
        self._child_watch: Optional[ChildWatch] = None
        #: After how long the broker hands an unacknowledged message out again while its first
        #: delivery may still run (Redis, SQS); ``None`` for brokers that redeliver only when the
        #: consumer's connection is lost (AMQP).
        self.visibility_timeout = _visibility_timeout(app.conf)
        enable_metrics(app)  # counted from the signals, when the app's settings ask for metrics
        #: Whether locks store a short description of their call (``singleton_lock_describe``).
        self.describe = describe_enabled(app.conf)
        #: Whether runs hold their keys as older commits named them too (``singleton_lock_guard_old_keys``).
        self.guard_old_keys = guard_old_keys(app.conf)

    @property
    def child_watch(self) -> ChildWatch:
        """The worker main process's watch over pool children (created on first use)."""
        if self._child_watch is None:
            self._child_watch = ChildWatch(on_exit=self._release_holds_of)
        return self._child_watch

    def _release_holds_of(self, pid: int) -> None:
        holds.release_holds_of(self.store, self.app, pid, f"pool process {pid} exited")

    def report_lost(self, lease: Lease, reason: str) -> None:
        """Log at ERROR and send ``lock_lost``: the body ran (or runs) without its lock."""
        handle = lease.context
        task_name = getattr(handle, "task_name", "?")
        task_id = getattr(handle, "task_id", "?")
        who = getattr(handle, "who", None) or f"task {task_name}[{task_id}]"
        unguarded = getattr(handle, "unguarded", None) or "the body keeps running unguarded"
        logger.error("singleton lock LOST: %s key %s: %s; %s", who, lease.key, reason, unguarded)
        task = getattr(handle, "sender", None) or (self.app.tasks.get(task_name) if task_name != "?" else None)
        signals.lock_lost.send(sender=task, key=lease.key, task_id=task_id, reason=reason, lock=handle,
                               description=getattr(handle, "description", None))

    def close(self) -> None:
        """Stop the heartbeat and the child watch, and drop connections (tests, shutdown)."""
        self.held_releases.detach()
        self.renewer.close()
        if self._child_watch is not None:
            self._child_watch.close()
            self._child_watch = None
        self.store.close()


def _visibility_timeout(conf: Any) -> Optional[float]:
    options = conf.get("broker_transport_options") or {}
    if options.get("visibility_timeout") is not None:
        return float(options["visibility_timeout"])
    scheme = broker_url(conf).split("://", 1)[0].lower()
    return 3600.0 if scheme in ("redis", "rediss", "sentinel", "sqs") else None  # kombu's default


def runtime_for(app: Any) -> LockRuntime:
    """The app's runtime, created on first use."""
    runtime: Optional[LockRuntime] = app.__dict__.get(_ATTR)
    if runtime is None:
        with _CREATE:
            runtime = app.__dict__.get(_ATTR)
            if runtime is None:
                runtime = LockRuntime(app, resolve_settings(app.conf))
                setattr(app, _ATTR, runtime)
    return runtime


def peek_runtime(app: Any) -> Optional[LockRuntime]:
    """The app's runtime if one was created (shutdown hooks must not create one)."""
    return app.__dict__.get(_ATTR) if app is not None else None
