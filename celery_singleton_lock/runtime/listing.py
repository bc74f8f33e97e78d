"""The locks of an app as an operator reads them: ``celery locks list`` and the web view print the same.

One place builds the records and their public fields, so ``locks list --json`` and ``GET /api/locks``
cannot drift apart: the same names, the same order, the lock's own token left out.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional

from ..store import LockRecord, scan_locks
from .lock_runtime import LockRuntime

__all__ = ["store_client", "app_locks", "named_locks", "public_record", "listed", "OLDER_KEY_OF", "older_key_of"]

#: How the key a run holds as older commits name it (``singleton_lock_guard_old_keys``) describes
#: itself, followed by the run lock's key: the same run's second row, not a second run.
OLDER_KEY_OF = "older key of "


def store_client(runtime: LockRuntime) -> Optional[Any]:
    """The Redis client of the app's lock store (its locks are read from Redis itself); ``None`` for a
    store that is no single Redis server (a quorum, the memory backend)."""
    return getattr(runtime.store, "client", None)


def app_locks(app: Any, runtime: LockRuntime, client: Any, task: Optional[str] = None) -> Iterator[LockRecord]:
    """The locks of ``task`` (every lock when ``None``): those made by that task, whatever name its
    keys are under (``lock_name``, a ``SharedLock`` its body holds), and those under that name (a
    shared one: every task's). ``task`` is what the TASK or the NAME column shows."""
    if task is None:
        yield from scan_locks(client, runtime.layout)
        return
    yield from named_locks(client, runtime.layout, task)


def named_locks(client: Any, layout: Any, name: str) -> List[LockRecord]:
    """The locks whose TASK or NAME is ``name``: a task's calls under any lock name (a plain task's
    ``SharedLock`` blocks too), and every call under a lock name."""
    return [record for record in scan_locks(client, layout) if name in (record.task, record.name)]


def public_record(record: LockRecord, with_token: bool = False) -> Dict[str, Any]:
    """A record's fields by name; the holder's token only when asked (``locks show --json``)."""
    data = record.as_dict()
    if not with_token:
        data.pop("token")
    return data


def listed(app: Any, runtime: LockRuntime, client: Any, task: Optional[str] = None) -> List[LockRecord]:
    """The records ``locks list`` shows, in its order: by task, oldest holder first."""
    return sorted(app_locks(app, runtime, client, task), key=lambda r: (r.task, r.since_ms or 0))


def older_key_of(record: LockRecord) -> str:
    """The run lock a record is the older key of (:data:`OLDER_KEY_OF`), ``""`` for any other lock."""
    describe = record.describe or ""
    return describe[len(OLDER_KEY_OF):] if describe.startswith(OLDER_KEY_OF) else ""
