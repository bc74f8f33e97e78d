"""celery-singleton-lock: one run at a time per distinct arguments, guarded by Redis.

``@app.task(base=LockedTask)`` is the whole set-up; ``SharedLock("name", limit=N)`` holds
places on a named resource in any block of code. Every option and setting: docs/reference.md.
"""

from .exceptions import (
    ConfigurationError,
    LockBackendError,
    LockedError,
    LockLostError,
    SingletonLockError,
    UnencodableArgumentError,
    UnserializableArgumentError,
)
from .config.censor import install_censor as _install_censor
from .run.handle import ExecutionLock
from .run.outcome import superseded
from .calls.ticks import tick_key
from .shared import SharedLock
from .printable import install_log_filter as _install_log_filter
from .worker.receivers import connect_receivers as _connect_receivers
from .signals import lock_acquired, lock_conflict, lock_lost, lock_released, lock_store_error, lock_waited
from .task import LockedTask

__all__ = [
    "LockedTask",
    "SharedLock",
    "ExecutionLock",
    "superseded",
    "tick_key",
    "SingletonLockError",
    "ConfigurationError",
    "UnencodableArgumentError",
    "UnserializableArgumentError",
    "LockedError",
    "LockLostError",
    "LockBackendError",
    "lock_acquired",
    "lock_conflict",
    "lock_released",
    "lock_lost",
    "lock_waited",
    "lock_store_error",
]

__version__ = "0.1.0"

_connect_receivers()
_install_censor()
_install_log_filter()
