"""The lock protocol against Redis: key layout, Lua scripts, acquire/renew/release, heartbeat.

Nothing in this package imports Celery, so the protocol can be read, tested and
benchmarked on its own.
"""

from .client import Conflict, Grant, Holder, LockStore
from .connect import connect, open_store
from .heartbeat import Lease, Renewer
from .keys import KeyLayout

__all__ = ["Conflict", "Grant", "Holder", "KeyLayout", "Lease", "LockStore", "Renewer", "connect", "open_store"]
