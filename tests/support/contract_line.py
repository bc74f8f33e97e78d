"""The lock-store contract for waiters in line (``store/line.py``): first come, first served.

Registered in :data:`tests.support.contract.CHECKS` beside the other checks, so they run against
every store the contract runs against. Each reads Given / When / Then.
"""

from __future__ import annotations

from typing import Optional

from celery_singleton_lock.store import Conflict, Grant
from celery_singleton_lock.store.places import Limit, limited

from tests.support.contract import LONG_MS, Bench, _token, check, holder


def _key(bench: Bench, limit: Optional[Limit]) -> str:
    keys = bench.keys()
    return limited(keys, limit).lock if limit is not None else keys.lock


def _hold(bench: Bench, key: str, name: str, limit: Optional[Limit]) -> str:
    token = _token(name)
    assert isinstance(bench.backend.acquire(key, token, LONG_MS, holder(f"task-{name}"), limit=limit), Grant)
    return token


def _in_line(bench: Bench, key: str, name: str, limit: Optional[Limit], lease_ms: int = LONG_MS):
    return bench.backend.line.acquire(key, _token(name), LONG_MS, holder(f"task-{name}"), limit=limit,
                                      lease_ms=lease_ms)


def _served_in_order(bench: Bench, limit: Optional[Limit]) -> None:
    key = _key(bench, limit)
    count = limit.count if limit is not None else 1
    # Given every place held, and three waiters that joined the line in the order w1, w2, w3
    held = [_hold(bench, key, f"h{n}", limit) for n in range(count)]
    for name in ("w1", "w2", "w3"):
        assert isinstance(_in_line(bench, key, name, limit), Conflict)
    # When one place is given back, then only the first in line gets it, whoever asks first
    assert bench.backend.release(key, held[0]) is True
    behind = _in_line(bench, key, "w3", limit)
    assert isinstance(behind, Conflict) and behind.ahead == 2  # each refusal says how many are ahead
    assert isinstance(_in_line(bench, key, "w2", limit), Conflict)
    assert isinstance(_in_line(bench, key, "w1", limit), Grant)
    # and a newcomer in line comes after those still in it
    assert isinstance(_in_line(bench, key, "w4", limit), Conflict)
    assert bench.backend.release(key, _token("w1")) is True
    assert isinstance(_in_line(bench, key, "w4", limit), Conflict)
    assert isinstance(_in_line(bench, key, "w3", limit), Conflict)
    assert isinstance(_in_line(bench, key, "w2", limit), Grant)
    assert bench.backend.release(key, _token("w2")) is True
    assert isinstance(_in_line(bench, key, "w4", limit), Conflict)
    assert isinstance(_in_line(bench, key, "w3", limit), Grant)


@check
def waiters_in_line_are_granted_in_the_order_they_began_to_wait(bench: Bench) -> None:
    _served_in_order(bench, None)


@check
def waiters_in_line_for_places_are_granted_in_the_order_they_began_to_wait(bench: Bench) -> None:
    _served_in_order(bench, Limit(2))


@check
def a_waiter_that_gives_up_or_dies_leaves_the_line(bench: Bench) -> None:
    for limit in (None, Limit(2)):
        key = _key(bench, limit)
        count = limit.count if limit is not None else 1
        held = [_hold(bench, key, f"h{n}", limit) for n in range(count)]
        # Given a waiter that will die (a short lease in line), one that gives up, and one behind both
        assert isinstance(_in_line(bench, key, "dies", limit, lease_ms=bench.short_ms), Conflict)
        assert isinstance(_in_line(bench, key, "gives-up", limit), Conflict)
        assert isinstance(_in_line(bench, key, "last", limit), Conflict)
        # When the one gives up, and the other's lease in line ends without its asking again
        bench.backend.line.leave(key, _token("gives-up"))
        bench.elapse(bench.short_ms + 50)
        # then a place given back goes to the last, which nobody holds up
        assert bench.backend.release(key, held[0]) is True
        assert isinstance(_in_line(bench, key, "last", limit), Grant)
        # and the dead waiter, asking again, is a newcomer at the end of the line
        assert isinstance(_in_line(bench, key, "dies", limit), Conflict)
        for token in [*held[1:], _token("last")]:
            bench.backend.release(key, token)
        assert isinstance(_in_line(bench, key, "dies", limit), Grant)
