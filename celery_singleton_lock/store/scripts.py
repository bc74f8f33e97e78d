"""The Lua scripts of the lock protocol, one per operation, read from the ``lua/`` directory.

Each script names every key it touches in ``KEYS`` (never built inside Lua),
so it runs on Redis Cluster. A lock is a hash:

    token    the holder's unique token; every compare is against it
    fence    fencing number, from the task's counter at acquire time
    task_id  holder's Celery task id (diagnostics, same-id redelivery)
    host     holder's hostname          pid   holder's process id
    since    acquire time, ms since the epoch (holder's clock)
    ttl      lease length in ms         hb    renewal period in ms
    state    "running", or "queued" for an enqueue lock not yet started
    redelivered  set when a redelivered copy of the holder's message met the lock

Each ``.lua`` file's header names its ``KEYS``, its ``ARGV`` and its reply. The helpers
that more than one script calls live in ``_common.lua``, put in front of those scripts
here. The files are read once, at import, from the installed package (a wheel too).
"""

from __future__ import annotations

from importlib.resources import files

__all__ = ["ACQUIRE", "RELEASE", "MARK_REDELIVERED", "RENEW", "ADOPT", "REQUEUE", "RAISE_FENCE", "COMPLETED"]

# Python 3.9's files() takes no namespace package and its joinpath takes one name at a time:
# start from this module's package and step down with "/".
_LUA = files(__name__.rpartition(".")[0]) / "lua"


def _read(name: str) -> str:
    return (_LUA / name).read_text(encoding="utf-8")


_COMMON = _read("_common.lua")


def _script(name: str, *, common: bool = False) -> str:
    """The text of ``lua/<name>.lua``, after ``_common.lua`` when it calls the shared helpers."""
    text = _read(f"{name}.lua")
    return _COMMON + "\n" + text if common else text


ACQUIRE = _script("acquire", common=True)
RELEASE = _script("release")
MARK_REDELIVERED = _script("mark_redelivered")
RENEW = _script("renew", common=True)
ADOPT = _script("adopt", common=True)
REQUEUE = _script("requeue")
RAISE_FENCE = _script("raise_fence")
COMPLETED = _script("completed")
