"""The lock protocol against Redis, behind one declared seam (:class:`LockBackend`).

Nothing in this package imports Celery, so the protocol can be read, tested and
benchmarked on its own. The Celery layer uses only the names exported here.
"""

from .backend import (GRANT, MAX_DURATION_MS, MAX_LIMIT, NOT_OURS, Completion, Conflict, Grant, Holder, LockBackend, NotOurs, Outcome, ReleaseEvents,
                      new_token)
from .admin import (MIN_PREFIX, ClearResult, LockRecord, clear_lock, end_window, find_locks, pid_running, read_lock,
                    scan_locks)
from .connect import connect, open_store
from .redaction import ambiguous_credentials, redact, redact_options, split_urls
from .errors import STORE_ERRORS, error_text, is_permanent, permanent_problem
from .heartbeat import Renewer
from .tls import unverified_tls
from .lease import Lease
from .generations import Claim, GenerationStore, Reservation
from .keys import DEFAULT_PREFIX, KeyLayout, LockKeys
from .memory import MemoryBackend
from .probe import ProbeFailed, probe_store
from . import record
from .places import QUORUM_LIMIT, Limit, is_places, keeps_one_place, limited
from .redis_backend import RedisBackend
from .start_gate import WINDOW_S as START_WINDOW_S, RestartWait, wait_for_gate
from .line import LEASE_MS as LINE_LEASE_MS
from .line_wait import wait_in_line

__all__ = ["MIN_PREFIX", "pid_running", "LockBackend", "ReleaseEvents", "Holder", "Grant", "GRANT", "Conflict", "NotOurs", "NOT_OURS", "Outcome",
           "Completion", "new_token", "RedisBackend", "RestartWait", "START_WINDOW_S", "wait_for_gate", "LINE_LEASE_MS", "wait_in_line", "MemoryBackend", "KeyLayout",
           "LockKeys", "DEFAULT_PREFIX", "GenerationStore", "Reservation", "Claim",
           "Lease", "Renewer", "connect", "open_store", "redact", "redact_options", "split_urls",
           "ambiguous_credentials", "unverified_tls", "STORE_ERRORS", "error_text", "is_permanent",
           "permanent_problem", "ProbeFailed", "probe_store", "LockRecord", "ClearResult", "scan_locks", "read_lock",
           "find_locks", "clear_lock", "end_window", "record", "Limit", "MAX_LIMIT", "MAX_DURATION_MS", "limited",
           "is_places", "QUORUM_LIMIT", "keeps_one_place"]
