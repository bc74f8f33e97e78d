"""Sentinel failover: holders follow the new master, and nobody is granted a lock an untold holder still runs under.

Given a master, two replicas and three sentinels started here (:class:`SentinelTrio`), and
real prefork workers whose task bodies record when they started, when they learned their
lock was lost and when they ended, when ``SENTINEL FAILOVER`` promotes a replica:

- a holder whose lock reached the new master renews it there and keeps it past its ttl;
- a holder whose lock did not reach it is told before anyone else is granted the key, and
  that grant comes from the new master, not from the old one that still answers as a master;
- with ``replica_ack``, the old master refuses grants once a replica left it (promoted before any
  sentinel noticed), so no lock or window it hands out is missing on the new master;
- with ``replica_ack``, place renewals are followed by ``WAIT`` as singleton renewals are.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
import redis

from celery_singleton_lock.store import Grant, KeyLayout, new_token
from celery_singleton_lock.store.connect import open_store
from celery_singleton_lock.store.places import Limit, limited
from celery_singleton_lock.store.replicas import ReplicaAckError
from tests.integration.topo import HOLDER, app_on, worker_env
from tests.support.sentinel_trio import SentinelTrio, acknowledged
from tests.support.suite_redis import lock_prefix
from tests.support.waits import wait_for
from tests.support.workers import Worker

QUEUE = "sentinel-failover"


@pytest.fixture(scope="module")
def trio() -> Iterator[SentinelTrio]:
    started = SentinelTrio().start()
    try:
        yield started
    finally:
        started.stop()


def _options(trio: SentinelTrio, ack: bool) -> Dict[str, Any]:
    options: Dict[str, Any] = {"master_name": trio.master_name}
    if ack:
        options.update(replica_ack=1, replica_ack_timeout=0.3)
    return options


def _worker(test_env: Dict[str, str], trio: SentinelTrio, ack: bool) -> Worker:
    return Worker("tests.integration.proj_failover", dict(test_env, **worker_env(trio.url, _options(trio, ack))),
                  name=f"fo-{new_token()[:6]}", concurrency=2, extra_args=["-Q", QUEUE]).start()


def _records(events: redis.Redis, kind: str) -> List[dict]:
    return [json.loads(item) for item in events.lrange(kind, 0, -1)]


def _lock_keys(port: int) -> List[str]:
    client = redis.Redis(port=port, decode_responses=True)
    try:
        return [k for k in client.scan_iter(match=f"{lock_prefix()}*") if client.type(k) == "string"
                and " running " in (client.get(k) or "")]
    finally:
        client.close()


def _settled(trio: SentinelTrio) -> None:
    """Before a failover: an earlier one's old master demoted now, and seen as a replica by every sentinel."""
    trio.demote()
    trio.wait_settled()


def test_place_renewals_are_followed_by_wait_under_replica_ack(trio):
    store = open_store(trio.url, _options(trio, ack=True))
    limit = Limit(2, 0)
    key = limited(KeyLayout("csltrio").keys("renewed", "a1", "queued"), limit).lock
    monitor_client = redis.Redis(port=trio.master.port, decode_responses=True)
    try:
        assert isinstance(store.acquire(key, "t1", 6000, replace(HOLDER, task_id="t1"), limit=limit), Grant)
        with monitor_client.monitor() as monitor:
            assert store.renew([(key, "t1", 6000, 2000, "")]) == [True]
            store.epoch()  # a last command, so the renewal's WAIT is surely in the monitor's stream
            seen = []
            for event in monitor.listen():
                seen.append(event["command"])
                if event["command"].startswith("INFO"):
                    break
        renewal = next(i for i, command in enumerate(seen) if command.startswith("EVALSHA") and key in command)
        assert seen[renewal + 1].startswith("WAIT 1 "), seen
        assert store.release(key, "t1")
    finally:
        monitor_client.close()
        store.close()


@pytest.mark.parametrize("kind", ["singleton", "window"])
def test_with_replica_ack_the_old_master_refuses_once_a_replica_left_it(trio, kind):
    # Given a store with replica_ack on a master with two replicas, one of which is promoted behind the
    # sentinels' back (as SENTINEL FAILOVER does, for up to a second before any sentinel notices)
    store = open_store(trio.url, _options(trio, ack=True))
    old = trio.master
    limit = Limit(1, 2000) if kind == "window" else None  # (no longer than the young servers' age)
    key = limited(KeyLayout("csltrio").keys(f"left-{kind}", "a1", "queued"), limit).lock
    assert isinstance(store.acquire(key + "-warm", "w", 6000, HOLDER, limit=limit), Grant)
    promoted = next(s for s in trio.servers if s is not old)
    client = redis.Redis(port=promoted.port)
    try:
        client.replicaof("NO", "ONE")
        # When a lock is asked of the old master, which the other replica still acknowledges
        with pytest.raises(ReplicaAckError, match="no longer follow"):
            store.acquire(key, "t1", 6000, HOLDER, limit=limit)
        # Then it is refused, and given back on the old master at once
        if kind == "window":
            place = redis.Redis(port=old.port, decode_responses=True).hget(key, "t1")
            assert place is None or place.startswith("released")
        else:
            assert redis.Redis(port=old.port).exists(key) == 0
    finally:
        client.replicaof("127.0.0.1", old.port)
        client.close()
        store.close()
    wait_for(lambda: acknowledged(old.port, 2), 30, interval=0.1, what="the replica to follow the master again")
    wait_for(lambda: trio.ready(linked=2), 30, interval=0.1, what="the sentinels to see it")


def test_a_holder_whose_lock_reached_the_new_master_keeps_it(trio, proj, test_env, events_redis):
    import tests.integration.proj_failover as failover_proj

    _settled(trio)
    events_redis.delete("failover", "failover-started")
    worker = _worker(test_env, trio, ack=True)
    old = trio.master
    try:
        with app_on(proj, trio.url, _options(trio, ack=True)):
            result = failover_proj.held.apply_async(("kept",), {"duration": 11.0}, queue=QUEUE)
        wait_for(lambda: _records(events_redis, "failover-started"), 30, what="the holder to start")
        held_keys = wait_for(lambda: _lock_keys(old.port), 10, what="the lock on the master")
        # When the sentinels fail over while it runs, and other calls come in while the new master is young
        new, promoted = trio.failover()
        with app_on(proj, trio.url, _options(trio, ack=True)):
            others = [failover_proj.held.apply_async((f"other-{i}",), {"duration": 0.2}, queue=QUEUE)
                      for i in range(3)]
        # Then past the ttl (6 s) after the promotion, the new master still holds the lock for it
        time.sleep(max(0.0, promoted + 7.0 - time.monotonic()))
        assert _lock_keys(new.port) == held_keys
        # and the holder ran to its end without being told it lost the lock
        assert result.get(timeout=30) is True
        # and the other calls waited for the new master to grant, and ran (none was lost or failed)
        assert [other.get(timeout=30) for other in others] == [True, True, True]
        records = {r["key"]: r for r in _records(events_redis, "failover")}
        assert records["kept"]["told"] is None
        assert set(records) == {"kept", "other-0", "other-1", "other-2"}
    finally:
        worker.stop()


def test_a_holder_whose_lock_missed_the_new_master_is_told_before_anyone_is_granted_it(trio, proj, test_env,
                                                                                       events_redis):
    import tests.integration.proj_failover as failover_proj

    _settled(trio)
    events_redis.delete("failover", "failover-started")
    worker = _worker(test_env, trio, ack=False)
    old = trio.master
    newcomer = open_store(trio.url, _options(trio, ack=False))
    try:
        # Given another process of the same store, with connections open to the master before the failover
        assert isinstance(newcomer.acquire("warm", "w", 6000, HOLDER), Grant)
        with app_on(proj, trio.url, _options(trio, ack=False)):
            result = failover_proj.held.apply_async(("missed",), {"duration": 12.0}, queue=QUEUE)
        wait_for(lambda: _records(events_redis, "failover-started"), 30, what="the holder to start")
        (key,) = wait_for(lambda: _lock_keys(old.port), 10, what="the lock on the master")
        # When a replica is promoted without the holder's lock (a write that never reached it)
        new, _ = _promoted_without(trio, key)
        # Then the other process is granted the key only after the holder was told, and by the new master
        token = new_token()
        wait_for(lambda: _granted(newcomer, key, token), 15, interval=0.05, what="a grant of the key")
        granted = time.time()
        on_new = redis.Redis(port=new.port, decode_responses=True).get(key) or ""
        on_old = redis.Redis(port=old.port, decode_responses=True).get(key) or ""
        assert (on_new.startswith(token), on_old.startswith(token)) == (True, False), (on_new, on_old)
        assert result.get(timeout=30) is False
        (record,) = _records(events_redis, "failover")
        assert record["told"] is not None and record["told"] < granted, (record, granted)
        newcomer.release(key, token)
    finally:
        newcomer.close()
        worker.stop()


def _promoted_without(trio: SentinelTrio, key: str) -> Tuple[Any, float]:
    """SENTINEL FAILOVER, with ``key`` deleted on the promoted replica the moment it is promoted."""
    import threading

    old = trio.master
    replicas = [s for s in trio.servers if s is not old]
    stop = threading.Event()

    def erase() -> None:
        clients = [redis.Redis(port=s.port, socket_timeout=1) for s in replicas]
        try:
            while not stop.is_set():
                for client in clients:
                    try:
                        if client.execute_command("ROLE")[0] == b"master":
                            client.delete(key)
                            return
                    except redis.RedisError:
                        pass
                time.sleep(0.002)
        finally:
            for client in clients:
                client.close()

    eraser = threading.Thread(target=erase)
    eraser.start()
    try:
        return trio.failover()
    finally:
        stop.set()
        eraser.join()


def _granted(store: Any, key: str, token: str) -> bool:
    try:
        return isinstance(store.acquire(key, token, 30000, HOLDER), Grant)
    except redis.ConnectionError:
        return False
