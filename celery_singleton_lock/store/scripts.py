"""The Lua scripts of the lock protocol, one per operation, read from the ``lua/`` directory.

Each script names every key it touches in ``KEYS`` (never built inside Lua),
so it runs on Redis Cluster. A lock is a string: its token, its state and its
holder (see :mod:`.record`). Taking a free lock needs no script (``SET NX``).

Each ``.lua`` file's header names its ``KEYS``, its ``ARGV`` and its reply. The helpers
that more than one script calls live in ``_common.lua``, put in front of those scripts
here. The files are read once, at import, from the installed package (a wheel too).
"""

from __future__ import annotations

from importlib.resources import files

__all__ = ["RELEASE", "MARK_REDELIVERED", "RENEW", "ADOPT", "REQUEUE", "FENCE", "RAISE_FENCE", "COMPLETED", "AWAIT",
           "CLEAR_FOREIGN", "GEN_SUPERSEDE", "GEN_PEEK", "GEN_CLAIM", "GEN_RESERVE",
           "PLACE_ACQUIRE", "PLACE_RELEASE", "PLACE_RENEW", "PLACE_FENCE", "PLACE_ADOPT", "PLACE_REQUEUE",
           "PLACE_AWAIT", "PLACE_MARK_REDELIVERED", "PLACE_READ", "PLACE_END_WINDOW", "LINE_ACQUIRE", "LINE_LEAVE",
           "PLACE_LINE_ACQUIRE"]


# Python 3.9's files() takes no namespace package and its joinpath takes one name at a time:
# start from this module's package and step down with "/".
_LUA = files(__name__.rpartition(".")[0]) / "lua"


def _read(name: str) -> str:
    return (_LUA / name).read_text(encoding="utf-8")


_COMMON = _read("_common.lua")
_PLACES = _read("_places.lua")


def _script(name: str, *, common: bool = False) -> str:
    """The text of ``lua/<name>.lua``, after ``_common.lua`` when it calls the shared helpers."""
    text = _read(f"{name}.lua")
    return _COMMON + "\n" + text if common else text


def _place_script(name: str) -> str:
    """The text of ``lua/place_<name>.lua``, after ``_common.lua`` and ``_places.lua`` (see :mod:`.places`)."""
    return "\n".join((_COMMON, _PLACES, _read(f"place_{name}.lua")))


RELEASE = _script("release")
MARK_REDELIVERED = _script("mark_redelivered")
RENEW = _script("renew", common=True)
ADOPT = _script("adopt")
FENCE = _script("fence", common=True)
REQUEUE = _script("requeue")
RAISE_FENCE = _script("raise_fence", common=True)
COMPLETED = _script("completed")
AWAIT = _script("await")
CLEAR_FOREIGN = _script("clear_foreign")
GEN_SUPERSEDE = _script("gen_supersede", common=True)
GEN_PEEK = _script("gen_peek", common=True)
GEN_CLAIM = _script("gen_claim", common=True)
GEN_RESERVE = _script("gen_reserve", common=True)

PLACE_ACQUIRE = _place_script("acquire")
PLACE_RELEASE = _place_script("release")
PLACE_RENEW = _place_script("renew")
PLACE_FENCE = _place_script("fence")
PLACE_ADOPT = _place_script("adopt")
PLACE_REQUEUE = _place_script("requeue")
PLACE_AWAIT = _place_script("await")
PLACE_MARK_REDELIVERED = _place_script("mark_redelivered")
PLACE_READ = _place_script("read")
PLACE_END_WINDOW = _place_script("end_window")
_LINE = _read("_line.lua")
#: Waiting in line (see line.py): after _common.lua (and _places.lua for a places key) and _line.lua.
LINE_ACQUIRE = "\n".join((_COMMON, _LINE, _read("line_acquire.lua")))
LINE_LEAVE = "\n".join((_COMMON, _LINE, _read("line_leave.lua")))
PLACE_LINE_ACQUIRE = "\n".join((_COMMON, _PLACES, _LINE, _read("place_line_acquire.lua")))
