"""Places: up to N holders of one key at once, each kept at least a window after it was taken.

A singleton lock is one string (:mod:`.record`) taken with ``SET NX``. A key with a
*limit* above one, or a *window*, is a room of its own: a hash of **places**, one field per
holder's token (as Redisson's ``RPermitExpirableSemaphore`` keeps one entry per permit id
with its own lease, never a shared counter that a killed holder would leak)::

    <lock key>:places          one hash per key (and <lock key>:queued:places for ``queued``)
      <token>  ->  "<state> <flags> <lease_end> <keep_until> <hb> <ttl> <since> <pid> <host> <task_id>[\t<call>]"
      ~n       ->  the limit of the last grant (a waiter's ask compares against it)
      ~w       ->  present while a waiter asks for the next release to be announced
      ~t<task id> -> "<at> <lapses>": a turn (below)

``state`` is ``running``, ``queued`` (an enqueue place waiting for its message) or
``released``; ``flags`` is ``-`` or ``r`` (a redelivered copy of the holder's message met
it). ``lease_end`` and ``keep_until`` are the *server's* clock in ms since the epoch
(``TIME``), so every holder, whatever its own clock, is judged by one clock:

- **Lease.** A running or queued place lives until ``lease_end``; the holder's heartbeat
  moves it (``place_renew.lua``), as it extends a singleton lock's TTL. A holder that died
  stops renewing, and its place ends at ``lease_end``.
- **Window.** ``keep_until`` is the grant's time plus the window, counted from the ms after
  the grant (the clock is in whole ms, and the start may fall anywhere in its ms: no later
  start may come less than a window after it). A released place stays
  (state ``released``) until then, so at most *limit* places are *taken* in any span of
  the window's length: a place ends at ``max(lease_end, keep_until)`` while held and at
  ``keep_until`` once released. A dead holder's place is kept until its window ends too.
  A released place's ``lease_end`` says when it was released (``celery locks show`` says so;
  ``0`` in a place released before it was written): the release rewrites the place anyway,
  and a singleton lock, deleted on release, keeps no such record.
- **Pruning.** Every script that looks at a key's places first drops those that ended
  (``survey`` in ``_places.lua``); the hash never holds more than *limit* live places plus
  the dead ones since the last look, and the key's TTL follows its latest place's end, so a
  key nobody touches again disappears with it. ``~n`` and ``~w`` go with the key.
- **Turns.** A call refused because the windows of a full key have not ended, and that will
  come back for a place (``on_locked="retry"``: :attr:`Limit.turns`), is handed a turn: the
  time ``at`` when a place will be its, counted behind the places taken and the turns handed
  out before (the limit-th latest of their window ends, a turn's window counting from its
  ``at``), so it is re-queued once, to then, whatever the backlog, instead of coming back at
  every window's end with all the others. A turn is no place: it holds nothing, and lapses a
  window after ``at`` (at least five seconds), so a call that never comes back costs one
  window's slot at most. Calls that hold no turn, or come before theirs, queue behind every
  turn; a call whose turn has come takes any free place. Turns are the task id's (a re-queue
  keeps it) and the refusal says when the call's turn comes (``turn_ms``).
- **Tokens and fences.** Every change compares the caller's token (its own field), so no
  caller renews, releases or hands back a place it does not hold; a released or lapsed
  place is not its token's any more. Fences come from the key's bucket counter, as a
  singleton lock's do, and only to a token that holds a live place: one counter per
  bucket, so they strictly increase per key across every holder of every place.
- **Cluster.** The places key carries its lock key's hash tag, so all of one key's places,
  its enqueue places and its fencing counter sit in one slot; different keys spread as
  their lock keys do.

**One seam, dispatching on the key.** The Celery layer calls the same
:class:`~.backend.LockBackend` methods for both rooms: :meth:`~.backend.LockBackend.acquire`
and :meth:`~.backend.LockBackend.adopt` take the call's :class:`Limit` (``None``: the
singleton lock), and every other method (renew, release, release_many, fence, requeue,
holder, release_events, mark_redelivered) recognises a places key by its name
(:func:`is_places`). The keys themselves come from :func:`limited`, applied once to a
call's :class:`~.keys.LockKeys`, so a limited call's lease, exits and heartbeat carry a
places key and need no branch of their own. ``Limit(1, 0)`` is never a room: a call with
no limit and no window keeps the singleton lock's exact path (``SET NX``, the same
release and renew scripts).

A refused acquire answers a :class:`~.backend.Conflict` for the place that frees soonest
(``pttl_ms``: until its lease or window ends), with ``held`` places of ``limit`` taken and
``window_ms``, the time until the soonest window of the taken places ends (known: nobody can
extend a window, and no place frees before its window ends), for a retry to aim at; ``None``
when one of them is a run past its window, which may end at any moment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import record
from .backend import SINGLETON, Conflict, Holder, Limit
from .keys import LockKeys

__all__ = ["Limit", "SINGLETON", "SUFFIX", "is_places", "places_key", "limited", "tail", "decode", "conflict",
           "split", "merge", "state_of", "text", "renew_args", "QUORUM_LIMIT", "refuse_limit",
           "keeps_one_place"]

#: What a places key's name ends with.
SUFFIX = ":places"

#: A place's fields, in the order the value lists them.
FIELDS = ("state", "flags", "lease_end", "keep_until", "hb", "ttl", "since", "pid", "host", "task_id")


def is_places(key: str) -> bool:
    """Whether ``key`` names a room of places (else a singleton lock)."""
    return key.endswith(SUFFIX)


def places_key(key: str) -> str:
    """The places key beside a lock key (same hash tag, so the same Cluster slot)."""
    return key if is_places(key) else key + SUFFIX


def limited(keys: LockKeys, limit: Optional[Limit]) -> LockKeys:
    """A call's keys under ``limit``: unchanged for the singleton lock, places keys otherwise."""
    if limit is None or limit.singleton:
        return keys
    return keys._replace(lock=places_key(keys.lock), queued=places_key(keys.queued))


def tail(ttl_ms: int, holder: Holder) -> str:
    """The part of a place's value after its clock fields: who holds it (see :mod:`.record`)."""
    return f"{int(holder.heartbeat_ms)} {int(ttl_ms)} {record.tail(holder, pid_ns=False)}"


def decode(value: Any) -> Dict[str, str]:
    """A place's fields by name (``''`` for those a short value lacks); ``redelivered`` is ``'1'`` or ``''``."""
    return record.decode(value, FIELDS)


def state_of(value: Any) -> str:
    return decode(value)["state"]


def _int(value: str) -> Optional[int]:
    try:
        return int(value)
    except ValueError:
        return None


def conflict(reply: Sequence[Any], token: Optional[str], limit: int) -> Conflict:
    """The :class:`Conflict` of a refusal ``{0, value, pttl, held, window (-1: none), same, token[, turn]}``."""
    _, value, pttl, held, window, same, holder_token = reply[:7]
    turn = int(reply[7]) if len(reply) > 7 else None
    fields = decode(value)
    window_ms = int(window)
    return Conflict(task_id=fields["task_id"], host=fields["host"], pid=_int(fields["pid"]),
                    since_ms=_int(fields["since"]), pttl_ms=max(int(pttl or 0), 0),
                    heartbeat_ms=_int(fields["hb"]), state=fields["state"],
                    same_token=token is not None and int(same) == 1,
                    held=int(held), limit=limit, window_ms=window_ms if window_ms >= 0 else None,
                    holder_token=text(holder_token), turn_ms=turn)


def text(value: Any) -> str:
    """A reply as text (redis-py answers bytes unless told to decode)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def split(items: Sequence[Tuple[Any, ...]]) -> Tuple[List[int], List[int]]:
    """The indices of singleton-lock items and of places items, each in order."""
    plain = [i for i, item in enumerate(items) if not is_places(item[0])]
    placed = [i for i, item in enumerate(items) if is_places(item[0])]
    return plain, placed


def renew_args(items: Sequence[Tuple[Any, ...]]) -> Tuple[List[str], List[Any]]:
    """RENEW's and PLACE_RENEW's KEYS and ARGV for ``(key, token, ttl_ms[, heartbeat_ms[, tail]])``
    items (heartbeat defaults to a third of the ttl, as a task's does; the tail, the holder's part of
    the value a take-back writes, to none)."""
    keys = [item[0] for item in items]
    args = ([item[1] for item in items] + [item[2] for item in items]
            + [item[3] if len(item) > 3 else item[2] // 3 for item in items]
            + [item[4] if len(item) > 4 else "" for item in items])
    return keys, args


def merge(size: int, *parts: Tuple[List[int], Sequence[Any]]) -> List[bool]:
    """Answers per item from ``(indices, answers)`` parts, back in the items' order."""
    out = [False] * size
    for indices, answers in parts:
        for index, answer in zip(indices, answers):
            out[index] = bool(answer)
    return out


#: Why a quorum of masters takes one place per key at most.
QUORUM_LIMIT = ("a quorum of independent Redis masters cannot keep lock_limit > 1: each master counts the places "
                "it saw, different masters admit different holders, and more than lock_limit of them can each "
                "win a majority (with 3 masters and a limit of 3, four holders can each hold 2 of 3); "
                "use one Redis, Sentinel or a Redis Cluster for lock_limit > 1 (lock_window works on a quorum)")


def keeps_one_place(url: Any, backend: Any) -> bool:
    """Whether the store a lock URL (or a list of them) or a store object names keeps one place
    per key at most: a quorum of masters (:data:`QUORUM_LIMIT`)."""
    if backend is not None:
        return not backend.counts_places
    return isinstance(url, (list, tuple)) and len(url) > 1


def refuse_limit(limit: Optional[Limit]) -> None:
    """A quorum of masters (:mod:`.quorum`) takes one place per key at most (:data:`QUORUM_LIMIT`);
    the task definition refuses more first, so this only stops a direct caller."""
    if limit is not None and limit.count > 1:
        raise ValueError(QUORUM_LIMIT)
