"""Celery-style signals sent by the library; connect to them as to Celery's own.

Every signal's ``sender`` is the task object (``None`` when it is not known
where the signal fires, for example in a shutdown hook); for a ``SharedLock`` hold it is the
``SharedLock`` (its ``name`` is what the metrics count it under), ``task_id`` the running task's
id when the block runs in one, and ``lock_conflict``'s ``at`` is ``"hold"``.

``lock_acquired(sender, key, task_id, lock, acquire_seconds)``
    a task took its lock (``lock`` is the ``self.lock`` handle, with ``fencing_token``);
    ``acquire_seconds`` is how long the ask that was granted took.
``lock_conflict(sender, key, task_id, holder, action, at, places)``
    a duplicate met a held lock; ``holder`` is the holder's task id, ``action`` one
    of ``skip``, ``retry``, ``wait``, ``raise``, ``ignore`` (a redelivery of the
    holder itself), ``replace`` (a call a newer one superseded, sent once, when its
    message reaches a worker; ``holder`` is then the newer call), ``at`` is ``"run"``
    or ``"enqueue"``; ``places`` is ``"k of N places taken"`` for a key with ``lock_limit``
    or ``lock_window``, else ``None``. The newest call of a key under ``on_locked="replace"``
    is no duplicate: it waits its turn, and no signal is sent for it.
``lock_released(sender, key, task_id, released, exit)``
    a holder let go; ``released`` is False when the lock was no longer its own;
    ``exit`` is how the execution ended, one of :data:`EXITS`.
``lock_lost(sender, key, task_id, reason, lock)``
    the heartbeat learned that a held lock is gone while its body still runs.
``lock_waited(sender, key, task_id, holder, waited, acquired)``
    a duplicate with ``on_locked="wait"`` stopped waiting after ``waited`` seconds:
    it took the lock (``acquired``) or gave up at ``lock_wait_timeout``.
``lock_store_error(sender, key, task_id, kind, error)``
    the store did not grant or refuse a lock: ``kind`` is ``"outage"`` (it may answer
    later; ``on_lock_error`` applies) or ``"misconfiguration"`` (it refused: the task fails).

With ``app.conf.singleton_lock_describe = True`` every one of them also carries
``description``: the call behind the lock in a few words (``account_id=42``); ``None`` otherwise.

Example::

    from celery_singleton_lock.signals import lock_conflict

    @lock_conflict.connect
    def count_duplicates(sender=None, action=None, **kwargs):
        metrics.increment("duplicates", tags={"task": sender.name, "action": action})
"""

from __future__ import annotations

import logging
from typing import Any, Callable, List, Tuple

from celery.utils.dispatch import Signal

logger = logging.getLogger("celery_singleton_lock")


class LockSignal(Signal):
    """A Celery signal whose library-side observers (the metrics extra) are told first, directly.

    Celery's dispatch costs about a microsecond per receiver and signal, paid on every task; an
    observer is called with ``(sender, **arguments)`` for a fraction of that. Receivers connected
    the usual way are served exactly as by any Celery signal.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.observers: Tuple[Callable[..., None], ...] = ()

    def observe(self, observer: Callable[..., None]) -> None:
        if observer not in self.observers:
            self.observers = (*self.observers, observer)

    def unobserve(self, observer: Callable[..., None]) -> None:
        self.observers = tuple(o for o in self.observers if o is not observer)

    @property
    def heard(self) -> bool:
        """Whether an observer or a receiver listens: every task sends two of these signals, and a
        sender nobody hears need not even build the arguments."""
        return bool(self.observers or self.receivers)

    def send(self, sender: Any, **named: Any) -> List[Tuple[Any, Any]]:
        for observer in self.observers:
            try:
                observer(sender, **named)
            except Exception:  # an observer must not change what the task does
                logger.exception("singleton lock: observer %r of %s failed", observer, self.name)
        return super().send(sender, **named) if self.receivers else []


__all__ = ["lock_acquired", "lock_conflict", "lock_released", "lock_lost", "lock_waited", "lock_store_error",
           "EXITS", "ACTIONS", "STORE_ERROR_KINDS", "LockSignal"]

#: How an execution let go of its lock (``lock_released``'s ``exit``): the body returned, raised,
#: called ``self.retry()``, or raised Celery's ``Ignore``/``Reject``; it was revoked with
#: ``terminate=True``; its pool process died (killed, lost, hard time limit); the worker or the
#: pool process shut down.
EXITS = ("success", "failure", "retry", "ignore", "revoke", "child_death", "shutdown")
#: What a duplicate did (``lock_conflict``'s ``action``); ``replace`` is kept for a policy to come.
ACTIONS = ("skip", "retry", "wait", "raise", "ignore", "replace")
#: ``lock_store_error``'s ``kind``.
STORE_ERROR_KINDS = ("outage", "misconfiguration")

lock_acquired = LockSignal(name="lock_acquired",
                       providing_args={"key", "task_id", "lock", "acquire_seconds", "description"})
lock_conflict = LockSignal(name="lock_conflict", providing_args={"key", "task_id", "holder", "action", "at", "description"})
lock_released = LockSignal(name="lock_released", providing_args={"key", "task_id", "released", "exit", "description"})
lock_lost = LockSignal(name="lock_lost", providing_args={"key", "task_id", "reason", "lock", "description"})
lock_waited = LockSignal(name="lock_waited",
                     providing_args={"key", "task_id", "holder", "waited", "acquired", "description"})
lock_store_error = LockSignal(name="lock_store_error", providing_args={"key", "task_id", "kind", "error"})
