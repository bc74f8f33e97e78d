"""The operator's view of a key's places (:mod:`.places`): one record per place, as ``celery locks`` lists them.

A places key holds one entry per holder, each with its own lease, so each becomes a
:class:`~.admin.LockRecord` of its own, judged as a singleton lock is (its lease's
``ttl - left`` is the time since its holder last renewed it) and cleared by its own token:
``clear`` keeps its safety rules per holder. Every record of a key also says how many of
its places are taken (``held`` of ``limit``) and how long its window still keeps it
(``window_ms``); a released place that only its window keeps is listed as ``released``, with
how long ago it was released (``released_ms``). Clearing keeps a key's window (the rate holds)
unless the operator forces it: then :func:`end_window` drops the places only the window keeps.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional

from . import places, scripts

__all__ = ["place_records", "end_window"]

#: Builds one record from a key and its lock fields, as :mod:`.admin` judges a lock (the last
#: argument is the :class:`~.liveness.Reader` that judges).
Build = Callable[[Any, str, Dict[str, str], int, int, Any], Optional[Any]]


def place_records(client: Any, layout: Any, key: str, now_ms: int, reader: Any, build: Build) -> List[Any]:
    """The live places of ``key``, one record each, newest holder last."""
    read = client.register_script(scripts.PLACE_READ)
    server_now, *flat = read(keys=(key,))
    server_now = int(server_now)
    fields = {places.text(f): v for f, v in zip(flat[::2], flat[1::2])}
    limit = int(places.text(fields.pop("~n", "1")))
    fields.pop("~w", None)
    live = []
    for token, value in fields.items():
        if token.startswith("~"):
            continue  # a turn handed out (see places.py): no place
        info = places.decode(value)
        lease, keep = int(info["lease_end"] or 0), int(info["keep_until"] or 0)
        released = info["state"] == "released"
        ends = keep if released else max(lease, keep)
        if ends > server_now:
            ago = server_now - lease if released and lease > 0 else None
            live.append((token, info, (keep if released else lease) - server_now, keep - server_now, ago))
    found = []
    for token, info, pttl, window, ago in live:
        record = build(layout, key[: -len(places.SUFFIX)], dict(info, token=token), pttl, now_ms, reader)
        if record is not None:
            found.append(replace(record, key=key, held=len(live), limit=limit,
                                 window_ms=window if window > 0 else None, released_ms=ago))
    return sorted(found, key=lambda r: r.since_ms or 0)


def end_window(client: Any, key: str) -> int:
    """Drop the places of ``key`` that only their window keeps (released ones): the key's window
    ends, and calls may start at once up to its limit. How many were dropped."""
    return int(client.register_script(scripts.PLACE_END_WINDOW)(keys=(key,)))
