"""The operator's view of the locks: find them with SCAN, judge them, clear them by token.

This is what ``celery locks`` stands on, kept free of Celery and of printing so
it can be tested and reused (the demo's live view reads the same records).

Finding locks never uses ``KEYS``: a SCAN cursor walks the key space in bounded
batches and each batch's values are read in one pipelined round trip, so a big
database is never blocked. Judging a lock needs no clock agreement between
hosts for the question that matters ("is its holder still renewing it?"): a
live holder pushes the key's TTL back to ``ttl`` every ``hb`` milliseconds, so
``ttl - PTTL`` is the time since the last renewal, measured by Redis alone.

Clearing goes through the protocol's own compare-and-delete by token
(:meth:`RedisBackend.release`), with the token read a moment before: if the lock
changed hands in between, nothing is deleted. The release is announced like
any other, to the waiters that asked, so ``on_locked="wait"`` duplicates wake up.
"""

from __future__ import annotations

import os
import re
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

from .backend import LockBackend
from .redis_backend import Client
from .keys import KeyLayout
from . import record as lock_value
from .admin_places import place_records
from .places import is_places

__all__ = ["LockRecord", "scan_locks", "read_lock", "find_locks", "clear_lock", "ClearResult",
           "STALE_HEARTBEATS"]

#: A running lock not renewed for this many heartbeat periods has a holder that stopped renewing.
STALE_HEARTBEATS = 1.5

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _int(value: Optional[str]) -> Optional[int]:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _glob_escape(text: str) -> str:
    return _GLOB_SPECIAL.sub(r"\\\1", text)


def split_key(layout: KeyLayout, key: str) -> Optional[Tuple[str, str]]:
    """``(task, rest)`` of a key under ``layout``'s prefix, ``rest`` being ``digest`` or ``digest:queued``."""
    head = f"{layout.prefix}:{{"
    if not key.startswith(head) or "}:" not in key:
        return None
    tag, rest = key[len(head):].rsplit("}:", 1)
    task, _, bucket = tag.rpartition(":")
    return (task, rest) if task and len(bucket) == 1 else None


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
    state: str                # "running", or "queued" while the message waits in the queue
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
    held: Optional[int] = None       # a place of a key with a limit or a window: places taken...
    limit: Optional[int] = None      # ... of how many (see admin_places.py)
    window_ms: Optional[int] = None  # how long its window still keeps the place

    @property
    def live(self) -> bool:
        """Whether clearing it would take the lock from a holder that still uses it."""
        return not (self.stale or self.lost)

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _judge(state: str, ttl_ms: Optional[int], pttl_ms: int, heartbeat_ms: Optional[int], host: str,
           pid: Optional[int], local_host: str) -> Tuple[Optional[int], bool, bool, str]:
    """``(since_renewal_ms, stale, lost, reason)`` for one lock."""
    if state == "released":
        return None, False, False, f"released: its window keeps the place {pttl_ms / 1000:.1f}s more"
    if state == "queued":
        # Nobody renews an enqueue lock: it lives lock_queue_ttl while its message waits.
        return None, False, False, f"enqueue lock: its message waits in the queue (expires in {pttl_ms / 1000:.1f}s)"
    if pttl_ms < 0:
        return None, True, False, "the key has no expiry: nothing will ever free it"
    since_renewal = ttl_ms - pttl_ms if ttl_ms is not None else None
    overdue = since_renewal is not None and bool(heartbeat_ms) and \
        since_renewal > STALE_HEARTBEATS * heartbeat_ms  # type: ignore[operator]
    if pid and host == local_host and not _pid_running(pid):
        return since_renewal, overdue, True, (
            f"its holder pid {pid} is not running on this host ({host}); it expires in {pttl_ms / 1000:.1f}s")
    if since_renewal is None or not heartbeat_ms:
        return since_renewal, False, False, "no renewal data (written by another tool?)"
    if overdue:
        return since_renewal, True, False, (
            f"not renewed for {since_renewal / 1000:.1f}s (heartbeat {heartbeat_ms / 1000:g}s): its holder "
            f"is dead or paused; it expires in {pttl_ms / 1000:.1f}s")
    return since_renewal, False, False, (
        f"its holder renewed it {since_renewal / 1000:.1f}s ago (heartbeat {heartbeat_ms / 1000:g}s), "
        "so it is alive")


def _record(layout: KeyLayout, key: str, fields: Dict[str, str], pttl_ms: int, now_ms: int,
            local_host: str) -> Optional[LockRecord]:
    parts = split_key(layout, key)
    if parts is None or not fields.get("token"):
        return None
    task, rest = parts
    kind = "queued" if rest.endswith(":queued") else "run"
    digest = rest[: -len(":queued")] if kind == "queued" else rest
    state = fields.get("state") or "running"
    ttl_ms, heartbeat_ms, pid = _int(fields.get("ttl")), _int(fields.get("hb")), _int(fields.get("pid"))
    since_ms = _int(fields.get("since"))
    host = fields.get("host", "")
    since_renewal, stale, lost, reason = _judge(state, ttl_ms, pttl_ms, heartbeat_ms, host, pid, local_host)
    return LockRecord(
        key=key, task=task, digest=digest, kind=kind, state=state, task_id=fields.get("task_id", ""),
        host=host, pid=pid, since_ms=since_ms, age_ms=now_ms - since_ms if since_ms else None,
        ttl_ms=ttl_ms, pttl_ms=pttl_ms, heartbeat_ms=heartbeat_ms, since_renewal_ms=since_renewal,
        token=fields["token"], stale=stale, lost=lost, reason=reason)


def _read_batch(client: Client, layout: KeyLayout, keys: List[str],
                local_host: str) -> List[LockRecord]:
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.get(key)
        pipe.pttl(key)
    replies = pipe.execute(raise_on_error=False)  # a key of another type answers WRONGTYPE: skip it
    for reply in replies:
        if isinstance(reply, Exception) and not str(reply).startswith("WRONGTYPE"):
            raise reply  # a refused command (NOPERM...) is no missing lock
    now_ms = int(time.time() * 1000)
    found = []
    for index, key in enumerate(keys):
        value, pttl = replies[2 * index], replies[2 * index + 1]
        if isinstance(value, Exception) and is_places(key):
            found.extend(place_records(client, layout, key, now_ms, local_host, _record))
            continue
        if isinstance(value, Exception) or value is None or isinstance(pttl, Exception) or pttl == -2:
            continue  # gone since the SCAN saw it, or not a lock
        record = _record(layout, key, lock_value.decode(value), int(pttl), now_ms, local_host)
        if record is not None:
            found.append(record)
    return found


def scan_locks(client: Client, layout: KeyLayout, task: Optional[str] = None, *,
               batch: int = 500, local_host: Optional[str] = None) -> Iterator[LockRecord]:
    """Every lock under ``layout`` (of one task when given), read batch by batch with SCAN."""
    local_host = local_host or socket.gethostname()
    pattern = layout.pattern(_glob_escape(task)) if task else layout.pattern()
    pending: List[str] = []
    for raw in client.scan_iter(match=pattern, count=batch):
        key = _text(raw)
        if layout.is_bookkeeping(key):
            continue
        pending.append(key)
        if len(pending) >= batch:
            yield from _read_batch(client, layout, pending, local_host)
            pending = []
    if pending:
        yield from _read_batch(client, layout, pending, local_host)


def read_lock(client: Client, layout: KeyLayout, key: str,
              local_host: Optional[str] = None) -> Optional[LockRecord]:
    """One lock by its full key name; ``None`` when it is free."""
    found = _read_batch(client, layout, [key], local_host or socket.gethostname())
    return found[0] if found else None


def find_locks(client: Client, layout: KeyLayout, name: str) -> List[LockRecord]:
    """Locks named by a full key, a digest, or a digest's first characters (as git abbreviates)."""
    if split_key(layout, name) is not None:
        record = read_lock(client, layout, name)
        return [record] if record else []
    if not re.fullmatch(r"[0-9a-f]{4,32}(:queued)?", name):
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
    who = f"task {record.task_id or '?'} on {record.host or '?'} pid {record.pid or '?'}"
    if record.live and not force:
        risk = ("a second copy be queued beside that message" if record.state == "queued"
                else "a duplicate run beside that execution")
        return ClearResult(record, False, (
            f"refused: {record.key} is held by {who}; {record.reason}. Clearing it would let {risk}. "
            "Pass --force to clear it anyway."))
    if not store.release(record.key, record.token):
        return ClearResult(record, False, (
            f"not cleared: {record.key} was released or changed hands since it was read; nothing was deleted"))
    if record.live:
        return ClearResult(record, True, (
            f"cleared {record.key} held by {who} (forced; {record.reason}). Its holder logs "
            "'singleton lock LOST' at its next heartbeat and keeps running unguarded."))
    return ClearResult(record, True, f"cleared {record.key} held by {who} ({record.reason})")
