"""A lock's value in Redis: its token, its state and its holder, in one string.

One string instead of a hash of fields, so a free lock is taken with a plain
``SET key value NX PX ttl`` (no script) and a conflict is described by one ``GET``::

    <token> <state> <flags> <hb> <ttl> <since> <pid> <host> <task_id>

``state`` is ``running`` or ``queued`` (an enqueue lock not yet started); ``flags`` is
``-`` or letters: ``r`` once a redelivered copy of the holder's message met the lock,
``w`` while a waiter asks for the release to be announced (``lua/await.lua``); ``hb``
and ``ttl`` are ms, ``since`` ms since the epoch (the holder's clock); ``pid`` is followed by
``/<namespace>`` when the holder's PID namespace is known (:mod:`.pid_namespace`; a reader
that expects a number finds none, and judges nothing by it). The task id comes
last because it is the one field that may contain spaces; when the app describes its
calls (``singleton_lock_describe``) a tab and the description follow it, and when the call's task
is not the key's name (``lock_name``, a shared lock) another tab and the task's name. The scripts read only the
first three fields (``^(%S+) (%S+) (%S+)``) and the task id; a lock a renewal took back
after a restart is written whole again, from what its holder's lease keeps (:func:`tail`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Dict, Optional, Sequence

from . import foreign
from .backend import Conflict, Holder

__all__ = ["encode", "tail", "who", "head", "decode", "is_lock", "conflict", "FIELDS", "STATES"]

#: The states of a lock value; a string at a lock's name in no such state is no lock (see :mod:`.foreign`).
STATES = ("running", "queued")

FIELDS = ("token", "state", "flags", "hb", "ttl", "since", "pid", "host", "task_id")

_SPACE = re.compile(r"\s")


def _word(value: Any) -> str:
    """A field that must not contain a space (nor be empty: the scripts split on spaces)."""
    text = str(value)
    if text.isalnum():  # a token, mostly: nothing to replace (every task writes one)
        return text
    return _SPACE.sub("_", text) or "-"


#: :func:`_word` of the fields that are the same for every lock a process takes (its host, its
#: PID namespace).
_process_word = lru_cache(maxsize=64)(_word)


#: The tab ends the task id (a description follows it); a description keeps to one line.
_BREAKS = re.compile(r"[\t\r\n]")
#: A field as a lock's (or a place's) value writes it.
word = _word


def encode(token: str, state: str, ttl_ms: int, holder: Holder) -> str:
    return f"{_word(token)} {state} - {int(holder.heartbeat_ms)} {int(ttl_ms)} {tail(holder)}"


def tail(holder: Holder, pid_ns: bool = True) -> str:
    """The holder's part of a value, after its ttl (``<since> <pid> <host> <task_id>...``): the same in a
    lock's value and in a place's (which writes no PID namespace), so a renewal that takes either back
    after a restart writes who holds it."""
    pid = f"{int(holder.pid)}/{_process_word(holder.pid_ns)}" if holder.pid_ns and pid_ns else int(holder.pid)
    return f"{int(holder.since_ms)} {pid} {_process_word(holder.host)} {who(holder)}"


def who(holder: Holder) -> str:
    """A value's last part: the holder's task id (a tab in it made a space), then a tab and the
    call's description when the app stores one (kept to one line), then a tab and the task that
    made the call when its keys are under another name (``lock_name``)."""
    task_id = holder.task_id.replace("\t", " ")
    if holder.task:
        return f"{task_id}\t{_BREAKS.sub(' ', holder.describe)}\t{_BREAKS.sub(' ', holder.task)}"
    return f"{task_id}\t{_BREAKS.sub(' ', holder.describe)}" if holder.describe else task_id


def head(token: str, state: str) -> str:
    """How the value of ``token``'s lock in ``state`` starts while no flag is set: the scripts
    check this head alone in the common case (nobody waits, no redelivery met the lock)."""
    return f"{_word(token)} {state} -"


def decode(value: Any, names: Sequence[str] = FIELDS) -> Dict[str, str]:
    """The fields by name (``''`` for one a short value lacks); ``redelivered`` and ``waiting`` (a copy
    waits for the release) are ``'1'`` or ``''``,
    ``pid_ns`` the holder's PID namespace (``''`` when not recorded). ``names``: the fields in the
    value's order, the last one taking the rest (a place's differ)."""
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    parts = text.split(" ", len(names) - 1)
    fields = dict(zip(names, parts + [""] * (len(names) - len(parts))))
    flags = fields.pop("flags")
    fields["redelivered"] = "1" if "r" in flags else ""
    fields["waiting"] = "1" if "w" in flags else ""
    fields["pid"], _, fields["pid_ns"] = fields["pid"].partition("/")
    fields["task_id"], _, fields["describe"] = fields["task_id"].partition("\t")
    fields["describe"], _, fields["task"] = fields["describe"].partition("\t")
    return fields


def is_lock(fields: Dict[str, str]) -> bool:
    """Whether :func:`decode`'s fields are a lock's (and not another program's string)."""
    return bool(fields["token"]) and fields["state"] in STATES


def _int(value: str) -> Optional[int]:
    try:
        return int(value)
    except ValueError:
        return None


def conflict(value: Any, pttl_ms: Any, token: Optional[str]) -> Conflict:
    """The :class:`Conflict` a lock's value describes; ``same_token`` when it holds ``token``
    (a foreign holder when the value is no lock's)."""
    fields = decode(value)
    if not is_lock(fields):
        return foreign.holder(pttl_ms)
    return Conflict(task_id=fields["task_id"], host=fields["host"], pid=_int(fields["pid"]),
                    since_ms=_int(fields["since"]), pttl_ms=max(int(pttl_ms or 0), 0),
                    heartbeat_ms=_int(fields["hb"]), state=fields["state"],
                    same_token=token is not None and fields["token"] == token)
