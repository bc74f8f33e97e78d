"""The operator's view of the locks: find them with SCAN, judge them, clear them by token.

This is what ``celery locks`` stands on, kept free of Celery and of printing so
it can be tested and reused (the demo's live view reads the same records).

Finding locks never uses ``KEYS``: a SCAN cursor walks the key space in bounded
batches and each batch's values are read in one pipelined round trip, so a big
database is never blocked. How a lock is judged live, stale
or lost is :mod:`.liveness`'s business.

Clearing goes through the protocol's own compare-and-delete by token
(:meth:`RedisBackend.release`), with the token read a moment before: if the lock
changed hands in between, nothing is deleted. The release is announced like
any other, to the waiters that asked, so ``on_locked="wait"`` duplicates wake up.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, fields
from typing import Any, Dict, Iterator, List, Optional, Tuple

from .backend import LockBackend
from .redis_backend import Client, RedisBackend
from .keys import KeyLayout
from . import foreign, record as lock_value
from .liveness import STALE_HEARTBEATS, Reader, judge, pid_running
from .admin_places import end_window, place_records
from .places import is_places

__all__ = ["LockRecord", "scan_locks", "read_lock", "find_locks", "clear_lock", "ClearResult",
           "STALE_HEARTBEATS", "MIN_PREFIX", "pid_running", "end_window"]

#: The fewest digest characters that name a lock (as git abbreviates, but never fewer).
MIN_PREFIX = 4


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _int(value: Optional[str]) -> Optional[int]:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class LockRecord:
    """One lock as Redis holds it, with what an operator wants to know about it.

    ``age_ms`` is measured against the holder's clock (``since`` was written by
    it); ``since_renewal_ms`` is measured by Redis alone and decides ``stale``.
    """

    key: str
    task: str
    digest: str
    kind: str                 # "run" (the lock key) or "queued" (a queued-scope enqueue lock)
    state: str                # "running", "queued" while the message waits in the queue, or
                              # "foreign": the key holds something this library did not write
    task_id: str
    host: str
    pid: Optional[int]
    since_ms: Optional[int]
    age_ms: Optional[int]
    ttl_ms: Optional[int]     # the lease length the holder asked for
    pttl_ms: int              # TTL left; -1 when the key has no expiry
    heartbeat_ms: Optional[int]
    since_renewal_ms: Optional[int]
    token: str
    stale: bool               # a running lock whose holder has stopped renewing it
    lost: bool                # its holder process is known to be gone (same host, pid not running)
    reason: str               # one sentence: why the flags are what they are
    holds: str = "lock"       # "lock", or what a foreign key holds: "other-type" or "string"
    pid_ns: str = ""          # the holder's PID namespace ("" when not recorded): see liveness.py
    describe: str = ""        # the call behind the lock, when the app stores it (singleton_lock_describe)
    held: Optional[int] = None       # a place of a key with a limit or a window: places taken...
    limit: Optional[int] = None      # ... of how many (see admin_places.py)
    window_ms: Optional[int] = None  # how long its window still keeps the place
    released_ms: Optional[int] = None  # a released place: how long ago it was released (None: not known)
    name: str = ""            # the name the key is made under: the task's, or a shared one (lock_name,
                              # a SharedLock); ``task`` is then the task that made the call, if one did
    waiting: bool = False     # a copy waits for its release (on_locked="wait" asked to be told)

    @property
    def live(self) -> bool:
        """Whether clearing it would take the lock from a holder that still uses it."""
        return not (self.stale or self.lost)

    def as_dict(self) -> Dict[str, Any]:
        """Every field by name, in their order (flat: no copy of nested values is needed, which
        ``dataclasses.asdict`` makes field by field, at a cost a list of many thousand locks feels)."""
        return {name: getattr(self, name) for name in _FIELD_NAMES}


#: :class:`LockRecord`'s fields, in their order (every value is a str, an int, a bool or None).
_FIELD_NAMES = tuple(f.name for f in fields(LockRecord))


def _where(layout: KeyLayout, key: str) -> Optional[Tuple[str, str, str]]:
    """``(task, digest, kind)`` of a lock key; ``None`` for a key of another shape."""
    parts = layout.split(key)
    if parts is None:
        return None
    task, rest = parts
    return (task, rest[: -len(":queued")], "queued") if rest.endswith(":queued") else (task, rest, "run")


def _record(layout: KeyLayout, key: str, fields: Dict[str, str], pttl_ms: int, now_ms: int,
            reader: Reader) -> Optional[LockRecord]:
    where = _where(layout, key)
    if where is None:
        return None
    task, digest, kind = where
    state = fields.get("state") or "running"
    ttl_ms, heartbeat_ms, pid = _int(fields.get("ttl")), _int(fields.get("hb")), _int(fields.get("pid"))
    since_ms = _int(fields.get("since"))
    host, pid_ns = fields.get("host", ""), fields.get("pid_ns", "")
    verdict = judge(state, ttl_ms, pttl_ms, heartbeat_ms, host, pid, pid_ns, reader)
    return LockRecord(
        key=key, task=fields.get("task") or task, digest=digest, kind=kind, state=state,
        task_id=fields.get("task_id", ""),
        host=host, pid=pid, since_ms=since_ms, age_ms=now_ms - since_ms if since_ms else None,
        ttl_ms=ttl_ms, pttl_ms=pttl_ms, heartbeat_ms=heartbeat_ms, since_renewal_ms=verdict.since_renewal_ms,
        token=fields["token"], stale=verdict.stale, lost=verdict.lost, reason=verdict.reason, pid_ns=pid_ns,
        describe=fields.get("describe", ""), name=task, waiting=bool(fields.get("waiting")))


def _foreign(layout: KeyLayout, key: str, holds: str, pttl_ms: int) -> Optional[LockRecord]:
    """The record of a key at a lock's name that is no lock (see :mod:`.foreign`)."""
    where = _where(layout, key)
    if where is None:
        return None
    task, digest, kind = where
    what = "a value of another Redis type" if holds == foreign.OTHER_TYPE else "a string that is no lock value"
    expiry = "it never expires" if pttl_ms < 0 else f"it expires in {pttl_ms / 1000:.1f}s"
    return LockRecord(
        key=key, task=task, digest=digest, kind=kind, state=foreign.STATE, task_id="", host="", pid=None,
        since_ms=None, age_ms=None, ttl_ms=None, pttl_ms=pttl_ms, heartbeat_ms=None, since_renewal_ms=None,
        token="", stale=True, lost=False, name=task,
        reason=(f"not a lock: {what} that this library did not write ({expiry}); every call of these arguments "
                "meets it as a holder until it is cleared"), holds=holds)


def _read_batch(client: Client, layout: KeyLayout, keys: List[str], reader: Reader) -> List[LockRecord]:
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.get(key)
        pipe.pttl(key)
    replies = pipe.execute(raise_on_error=False)  # a key of another type answers WRONGTYPE: a foreign one
    for reply in replies:
        if isinstance(reply, Exception) and not str(reply).startswith("WRONGTYPE"):
            raise reply  # a refused command (NOPERM...) is no missing lock
    now_ms = int(time.time() * 1000)
    found = []
    for index, key in enumerate(keys):
        value, pttl = replies[2 * index], replies[2 * index + 1]
        if isinstance(value, Exception) and is_places(key):
            found.extend(place_records(client, layout, key, now_ms, reader, _record))
            continue
        if value is None or isinstance(pttl, Exception) or pttl == -2:
            continue  # gone since the SCAN saw it
        fields = None if isinstance(value, Exception) else lock_value.decode(value)
        if fields is None or not lock_value.is_lock(fields):  # WRONGTYPE, or a string of another program
            record = _foreign(layout, key, foreign.OTHER_TYPE if fields is None else foreign.STRING, int(pttl))
        else:
            record = _record(layout, key, fields, int(pttl), now_ms, reader)
        if record is not None:
            found.append(record)
    return found


def scan_locks(client: Client, layout: KeyLayout, task: Optional[str] = None, *,
               batch: int = 500, local_host: Optional[str] = None) -> Iterator[LockRecord]:
    """Every lock under ``layout`` (of one task when given), read batch by batch with SCAN."""
    reader = Reader.here(local_host)
    pending: List[str] = []
    for raw in client.scan_iter(match=layout.pattern(task or None), count=batch):
        key = _text(raw)
        # The pattern is a glob: it also matches a task whose name goes on after this one's
        if layout.is_bookkeeping(key) or (task and (layout.split(key) or ("",))[0] != task):
            continue
        pending.append(key)
        if len(pending) >= batch:
            yield from _read_batch(client, layout, pending, reader)
            pending = []
    if pending:
        yield from _read_batch(client, layout, pending, reader)


def read_lock(client: Client, layout: KeyLayout, key: str,
              local_host: Optional[str] = None) -> Optional[LockRecord]:
    """One lock by its full key name; ``None`` when it is free."""
    found = _read_batch(client, layout, [key], Reader.here(local_host))
    return found[0] if found else None


def find_locks(client: Client, layout: KeyLayout, name: str) -> List[LockRecord]:
    """Locks named by a full key, a digest, or a digest's first characters (as git abbreviates)."""
    if layout.split(name) is not None:
        return _read_batch(client, layout, [name], Reader.here(None))  # a key with places: each of them
    if not re.fullmatch(r"[0-9a-f]{%d,32}(:queued)?" % MIN_PREFIX, name):
        return []
    queued = name.endswith(":queued")
    stem = name[: -len(":queued")] if queued else name
    return [r for r in scan_locks(client, layout)
            if r.digest.startswith(stem) and (r.kind == "queued") == queued]


@dataclass(frozen=True)
class ClearResult:
    """What happened to one lock an operator asked to clear."""

    record: LockRecord
    cleared: bool
    message: str


def clear_lock(store: LockBackend, record: LockRecord, *, force: bool = False) -> ClearResult:
    """Delete ``record``'s lock if it still has the token that was read, refusing a live one unless ``force``."""
    if record.state == foreign.STATE:
        return _clear_foreign(store, record)
    who = f"task {record.task_id or '?'} on {record.host or '?'} pid {record.pid or '?'}"
    if record.live and not force:
        risk = ("a second copy be queued beside that message" if record.state == "queued"
                else "a duplicate run beside that execution")
        return ClearResult(record, False, (
            f"refused: {record.key} is held by {who}; {record.reason}. Clearing it would let {risk}. "
            "Pass --force to clear it anyway."))
    if not store.release(record.key, record.token, None, record.state):
        return ClearResult(record, False, (
            f"not cleared: {record.key} was released or changed hands since it was read; nothing was deleted"))
    if record.live:
        return ClearResult(record, True, (
            f"cleared {record.key} held by {who} (forced; {record.reason}). Its holder logs "
            "'singleton lock LOST' at its next heartbeat and keeps running unguarded."))
    return ClearResult(record, True, f"cleared {record.key} held by {who} ({record.reason})")


def _clear_foreign(store: LockBackend, record: LockRecord) -> ClearResult:
    """Delete a key that is no lock, while it is still what was read (never a lock taken since)."""
    if not isinstance(store, RedisBackend):
        return ClearResult(record, False, f"not cleared: {record.key} is no lock, and is cleared on one Redis server")
    if not store.clear_foreign(record.key, record.holds):
        return ClearResult(record, False, (
            f"not cleared: {record.key} is gone or holds a lock since it was read; nothing was deleted"))
    return ClearResult(record, True, f"cleared {record.key}, which was {record.reason}")
