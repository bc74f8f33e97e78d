"""Celery-style signals sent by the library; connect to them as to Celery's own.

Every signal's ``sender`` is the task object (``None`` when it is not known
where the signal fires, for example in a shutdown hook).

``lock_acquired(sender, key, task_id, lock)``
    a task took its lock (``lock`` is the ``self.lock`` handle, with ``fencing_token``).
``lock_conflict(sender, key, task_id, holder, action, at)``
    a duplicate met a held lock; ``holder`` is the holder's task id, ``action`` one
    of ``skip``, ``retry``, ``wait``, ``raise``, ``ignore`` (a redelivery of the
    holder itself), ``replace`` (a call a newer one superseded, sent once, when its
    message reaches a worker; ``holder`` is then the newer call), ``at`` is ``"run"``
    or ``"enqueue"``. The newest call of a key under ``on_locked="replace"`` is no
    duplicate: it waits its turn, and no signal is sent for it.
``lock_released(sender, key, task_id, released)``
    a holder let go; ``released`` is False when the lock was no longer its own.
``lock_lost(sender, key, task_id, reason, lock)``
    the heartbeat learned that a held lock is gone while its body still runs.

Example::

    from celery_singleton_lock.signals import lock_conflict

    @lock_conflict.connect
    def count_duplicates(sender=None, action=None, **kwargs):
        metrics.increment("duplicates", tags={"task": sender.name, "action": action})
"""

from __future__ import annotations

from celery.utils.dispatch import Signal

__all__ = ["lock_acquired", "lock_conflict", "lock_released", "lock_lost"]

lock_acquired = Signal(name="lock_acquired", providing_args={"key", "task_id", "lock"})
lock_conflict = Signal(name="lock_conflict", providing_args={"key", "task_id", "holder", "action", "at"})
lock_released = Signal(name="lock_released", providing_args={"key", "task_id", "released"})
lock_lost = Signal(name="lock_lost", providing_args={"key", "task_id", "reason", "lock"})
