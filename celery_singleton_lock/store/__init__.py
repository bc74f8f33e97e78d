"""The lock protocol against Redis, behind one declared seam (:class:`LockBackend`).

Nothing in this package imports Celery, so the protocol can be read, tested and
benchmarked on its own. The Celery layer uses only the names exported here.
"""

from .backend import (GRANT, NOT_OURS, Completion, Conflict, Grant, Holder, LockBackend, NotOurs, Outcome, ReleaseEvents,
                      new_token)
from .admin import ClearResult, LockRecord, clear_lock, find_locks, read_lock, scan_locks
from .connect import connect, open_store, redact
from .errors import STORE_ERRORS, error_text, is_permanent, permanent_problem
from .heartbeat import Renewer
from .lease import Lease
from .keys import DEFAULT_PREFIX, KeyLayout, LockKeys
from .memory import MemoryBackend
from .probe import ProbeFailed, probe_store
from . import record
from .places import QUORUM_LIMIT, Limit, keeps_one_place, limited
from .redis_backend import RedisBackend
from .start_gate import WINDOW_S as START_WINDOW_S, RestartWait

__all__ = ["LockBackend", "ReleaseEvents", "Holder", "Grant", "GRANT", "Conflict", "NotOurs", "NOT_OURS", "Outcome",
           "Completion", "new_token", "RedisBackend", "RestartWait", "START_WINDOW_S", "MemoryBackend", "KeyLayout",
           "LockKeys", "DEFAULT_PREFIX",
           "Lease", "Renewer", "connect", "open_store", "redact", "STORE_ERRORS", "error_text", "is_permanent",
           "permanent_problem", "ProbeFailed", "probe_store", "LockRecord", "ClearResult", "scan_locks", "read_lock",
           "find_locks", "clear_lock", "record", "Limit", "limited", "QUORUM_LIMIT", "keeps_one_place"]
