"""Errors raised by celery-singleton-lock.

Every error derives from :class:`SingletonLockError`, so one ``except`` clause
catches all of them; each one carries the task name and lock key it is about,
because "which lock?" is the first question an operator asks.

.. code-block:: text

    SingletonLockError
    ├── ConfigurationError          (also ValueError)  bad option or lock store set up wrong
    ├── UnencodableArgumentError    (also TypeError)   argument with no canonical form
    │   └── UnserializableArgumentError  (also kombu's EncodeError)  ... which the task's
    │                                                   serializer refuses too
    ├── LockedError                                    a duplicate met on_locked="raise"
    ├── LockLostError                                  the heartbeat found the lock gone
    └── LockBackendError                               Redis could not be reached (an outage)
"""

from __future__ import annotations

from typing import Any, Optional

from kombu.exceptions import EncodeError

__all__ = [
    "SingletonLockError",
    "ConfigurationError",
    "UnencodableArgumentError",
    "UnserializableArgumentError",
    "LockedError",
    "LockLostError",
    "LockBackendError",
]


class SingletonLockError(Exception):
    """Root of the library's errors; carries the task and key when known.

    The context travels in ``args`` after the message, so an error rebuilt from a
    result backend (Celery calls ``cls(*args)``, whatever the serializer) keeps it.
    """

    def __init__(self, message: str, task: Optional[str] = None, key: Optional[str] = None, *context: Any) -> None:
        super().__init__(message, task, key, *context)
        self.task = task
        self.key = key

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConfigurationError(SingletonLockError, ValueError):
    """An option or setting is wrong; raised when the task is defined or the worker starts.

    Also what a task ends with, and what ``apply_async`` raises, when the lock store
    itself is set up wrong (a wrong password, a missing ACL permission, a read-only
    replica): waiting does not fix that, so ``on_lock_error`` does not apply.
    """


class UnencodableArgumentError(SingletonLockError, TypeError):
    """An argument has no canonical encoding, so no stable lock key can be derived for it."""

    def __init__(self, message: str, task: Optional[str] = None, key: Optional[str] = None,
                 parameter: Optional[str] = None) -> None:
        super().__init__(message, task, key, parameter)
        self.parameter = parameter


class UnserializableArgumentError(UnencodableArgumentError, EncodeError):
    """An argument with no canonical encoding that the task's serializer cannot encode either.

    Celery raises kombu's ``EncodeError`` for such a call; this error is one too, so code that
    catches what Celery raises keeps catching it, and it still names the task and parameter.
    """


class LockedError(SingletonLockError):
    """A duplicate of a task that holds the lock; ``holder`` is the holder's task id."""

    def __init__(self, message: str, task: Optional[str] = None, key: Optional[str] = None,
                 holder: Optional[str] = None) -> None:
        super().__init__(message, task, key, holder)
        self.holder = holder


class LockLostError(SingletonLockError):
    """The lock expired or was taken over while its holder still ran."""


class LockBackendError(SingletonLockError):
    """Redis could not be reached while taking a lock (down, a timeout, a failover): it may pass."""
