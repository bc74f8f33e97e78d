"""A Cluster call that meets a dead or moving master is asked again on a fresh slot map, within a budget.

redis-py's ``RedisCluster`` reloads its slot map when a master does not answer and asks
again at once, a few times. While a killed master's replica is not promoted yet, the
cluster still names the dead master, so those tries all fail within milliseconds, and a
lock call made a moment before the promotion fails although the slot is served again an
instant later. :func:`healed` keeps asking, with short pauses, reloading the slot map
before each try, until the call's budget (:data:`BUDGET`) is spent: a call made during a
failover succeeds as soon as the replica serves the slot, and one that cannot says which
slot and master did not answer, and for how long. A subscription to a key's releases fails
as it is, but reloads the map first (:func:`reloading`), so the waiter's next try subscribes
on the live master.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, TypeVar

from redis import exceptions as rex

from .errors import error_text, permanent_problem

__all__ = ["healed", "reloading", "ClusterSlotUnavailable", "BUDGET", "PASSING"]

logger = logging.getLogger("celery_singleton_lock")

T = TypeVar("T")

#: How long one lock call keeps asking through a failover (seconds): a promotion that comes
#: within it costs the call that long at most; a master still dead after it is an outage.
BUDGET = 2.0
#: First pause between two tries, doubled up to the most (seconds).
FIRST_PAUSE = 0.02
MAX_PAUSE = 0.2

#: What a master that died, or a slot being handed to its replica, answers (``MOVED``, ``ASK`` and
#: ``TRYAGAIN`` of a slot migration are redis-py's to follow).
PASSING = (rex.ConnectionError, rex.TimeoutError, rex.ClusterDownError, rex.SlotNotCoveredError,
           rex.MasterDownError)


class ClusterSlotUnavailable(rex.ConnectionError):
    """No master served a key's slot within the call's budget (an outage: ``on_lock_error`` applies)."""


def healed(client: Any, call: Callable[[], T], key: Optional[str] = None, budget: float = BUDGET,
           clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> T:
    """``call()``, asked again on a reloaded slot map until it answers or ``budget`` is spent."""
    deadline = clock() + budget
    pause = FIRST_PAUSE
    while True:
        try:
            return call()
        except PASSING as exc:
            if budget <= 0 or permanent_problem(exc) is not None:
                raise  # a wrong password or certificate answers the same on every try
            if clock() + pause > deadline:
                raise ClusterSlotUnavailable(_unserved(client, key, budget, exc)) from exc
            logger.debug("singleton lock: cluster call failed, reloading the slot map: %s", error_text(exc))
        sleep(pause)
        pause = min(pause * 2, MAX_PAUSE)
        _reload(client, key)


@contextmanager
def reloading(client: Any) -> Iterator[None]:
    """Reload the slot map when the block fails as a dead master makes it fail, and let the error go
    on: for what cannot simply be asked again (a subscription and the waits on it), so the caller's
    next try (a waiting block's, a task's retry) goes to the master that serves the slot now."""
    try:
        yield
    except PASSING:
        _reload(client)
        raise


def _reload(client: Any, key: Optional[str] = None) -> None:
    """Ask the cluster for its slot map again (a node that does not answer is skipped by redis-py).

    redis-py takes the map of the first node that answers; a node that has not yet heard of a
    promotion still names the dead master. So when the map names the same master for ``key``'s
    slot as before, the slot's replicas are asked too: one that serves the slot now becomes its
    master in the map, as a ``MOVED`` from it would make it.
    """
    before = _primary(client, key)
    try:
        client.nodes_manager.initialize()
    except Exception as exc:  # every known node is down, or the cluster is being reconfigured
        logger.debug("singleton lock: reloading the cluster's slot map failed: %s", error_text(exc))
    after = _primary(client, key)
    if before is not None and after is not None and after.name == before.name:
        _follow_promoted_replica(client, client.keyslot(key))


def _primary(client: Any, key: Optional[str]) -> Any:
    if key is None:
        return None
    try:
        nodes = client.nodes_manager.slots_cache.get(client.keyslot(key))
    except Exception:  # a map being rebuilt
        return None
    return nodes[0] if nodes else None


def _follow_promoted_replica(client: Any, slot: int) -> None:
    """Make the slot's replica that serves it now (it names itself for the slot) its master in the map."""
    nodes = list(client.nodes_manager.slots_cache.get(slot) or [])
    for node in nodes[1:]:
        try:
            ranges = client.get_redis_connection(node).execute_command("CLUSTER", "SLOTS")
        except Exception:  # that replica is down too
            continue
        for first, last, primary, *_ in ranges:
            host = primary[0].decode() if isinstance(primary[0], bytes) else str(primary[0])
            if int(first) <= slot <= int(last) and int(primary[1]) == node.port and host in ("", node.host):
                client.nodes_manager.move_slot(_Moved(node.host, node.port, slot))
                return


class _Moved:
    """What redis-py's ``move_slot`` reads of a ``MOVED`` reply: where the slot is served now."""

    def __init__(self, host: str, port: int, slot_id: int) -> None:
        self.host, self.port, self.slot_id = host, port, slot_id


def _unserved(client: Any, key: Optional[str], budget: float, exc: BaseException) -> str:
    """Which slot and master did not answer, and for how long."""
    where = "the Redis Cluster"
    if key is not None:
        try:
            slot = client.keyslot(key)
            node = client.nodes_manager.get_node_from_slot(slot)
            where = f"slot {slot} of the Redis Cluster (its master {node.name} in the client's slot map)"
        except Exception:  # no node known for the slot at all
            pass
    return (f"{where} did not answer for {budget:g}s, and no replica took its place meanwhile "
            f"(last error: {error_text(exc)})")
