"""Releases held back to ride with the next task's acquire, in a worker whose event loop runs tasks.

A release written on its own wakes the lock store for one short command, and in a solo
worker the next task's acquire follows a moment later on the same connection: written
together, the two cost the worker (and Redis) one write and one wake-up instead of two.
The catch is a release that nothing follows: it must still go out at once. So a release
is held back only where the worker's own event loop (kombu's hub) runs the task, in that
loop's thread, because that loop can be asked to call back when it next has a moment:

* the next task of the app takes it along with its acquire (or writes it, right after
  its acquire, when that acquire went elsewhere);
* any other task writes it before its body runs (``task_prerun``);
* the loop writes it from a timer :attr:`HeldReleases.delay` after it was held back, so a
  worker that goes idle lets go within that delay (a busy one's timer finds the release
  held back a moment ago, and lets it wait for the next task);
* worker shutdown writes it, and the heartbeat thread's tick reads (and so writes) every
  posted release in any case.

A prefork pool process has no such loop of its own (it waits on a pipe), nor has a thread
of the threads pool: their releases are written at once, as everywhere else.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Any, Optional

from celery.signals import task_prerun

from ..store import LockBackend

__all__ = ["HeldReleases"]

logger = logging.getLogger("celery_singleton_lock")


class HeldReleases:
    """One app's releases held back in the thread that runs its worker's event loop."""

    #: How long a held-back release waits for a next task before the loop writes it (seconds).
    delay = 0.005

    def __init__(self, app: Any, store: LockBackend) -> None:
        self._app = app
        self._store = store
        self._hub: Any = None
        self._thread: Optional[int] = None
        self._armed = False
        self._since = 0.0
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: (ref() is not None) and ref()._forget())  # type: ignore

    def _forget(self) -> None:
        # A forked child does not run its parent's loop; what the parent held back is the parent's.
        self._hub, self._thread, self._armed = None, None, False

    def attach(self, hub: Any) -> None:
        """Hold releases back in this thread, which runs ``hub`` (the worker's, as it starts)."""
        if hub is None or not callable(getattr(self._store, "flush_posted", None)):
            return
        self._hub, self._thread = hub, threading.get_ident()
        task_prerun.connect(self._before_task, weak=False, dispatch_uid=f"singleton_lock.held.{id(self)}")

    def detach(self) -> None:
        """Write what is held back, and hold nothing back from now on (worker shutdown)."""
        if self._thread is None:
            return
        self._hub, self._thread = None, None
        task_prerun.disconnect(dispatch_uid=f"singleton_lock.held.{id(self)}")
        if self._armed:
            self._write()

    def holds_back(self) -> bool:
        """Whether a release made now may be held back: in the loop's thread only."""
        return self._thread is not None and self._thread == threading.get_ident()

    def held(self) -> None:
        """A release was held back: the loop writes it after :attr:`delay`, unless a task does first."""
        self._since = time.monotonic()
        if not self._armed and self._hub is not None:
            self._armed = True
            self._hub.call_later(self.delay, self._due)

    def write_now(self) -> None:
        """Write what is held back (if anything may be)."""
        if self._armed:
            self._store.flush_posted()  # type: ignore[attr-defined]

    def _due(self) -> None:
        """The loop's timer: a release held back less than :attr:`delay` ago (a busy worker's last
        task just ended) still waits for the next task, until its own delay is up."""
        wait = self._since + self.delay - time.monotonic()
        if wait > 0 and self._hub is not None:
            self._hub.call_later(wait, self._due)
            return
        self._armed = False  # one timer at a time: only the timer itself disarms
        self._write()

    def _write(self) -> None:
        try:
            self._store.flush_posted()  # type: ignore[attr-defined]
        except Exception:  # a failed write tells the release's own answer; the loop must go on
            logger.exception("singleton lock: writing held-back releases failed")

    def _before_task(self, sender: Any = None, **_: Any) -> None:
        """Another app's task, or one without a lock: its body may run long, so what is held back goes now."""
        if self._armed and (getattr(sender, "app", None) is not self._app or not hasattr(sender, "singleton_lock")):
            self._write()
