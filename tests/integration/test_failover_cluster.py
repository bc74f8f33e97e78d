"""A 3+3 Redis Cluster through the death of a master: holds on its slot heal with the promotion.

Given a cluster of three masters with a replica each, started here, when the master serving
a lock's slot is killed (``kill -9``) and its replica takes over (``CLUSTER FAILOVER
TAKEOVER``, as the cluster would after its node timeout), then a hold asked while no master
served the slot is granted once the replica serves it, and every client, each with the slot
map it had before, is granted holds on that slot within about a second of the promotion; a
block waiting on that slot through it is granted as the holder gives its place back; a task
published to a real worker while no master served its slot runs once the replica serves it.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, List

import pytest
from celery import Celery

from celery_singleton_lock import SharedLock
from celery_singleton_lock.runtime import runtime_for
from celery_singleton_lock.store import Grant, KeyLayout, new_token
from celery_singleton_lock.store.connect import open_store
from tests.integration.helpers import records
from tests.integration.topo import HOLDER, app_on, worker_env, workers
from tests.support.suite_redis import lock_prefix
from tests.support.servers import RedisServer
from tests.support.topologies import LocalCluster
from tests.support.waits import wait_for


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    started = LocalCluster(masters=3, replicas=1).start()
    try:
        yield started
    finally:
        started.stop()


def kill(server: RedisServer) -> None:
    assert server.process is not None
    server.process.kill()  # SIGKILL
    server.process.wait(10)
    server.process = None


def promoted(cluster: LocalCluster, replica: RedisServer) -> bool:
    return cluster.node(replica).info("replication")["role"] == "master"


def test_holds_on_a_killed_masters_slot_are_granted_once_its_replica_takes_over(cluster):
    app = Celery("failover-cluster", broker="memory://", set_as_current=False)
    app.conf.singleton_lock_url = cluster.url
    lock = SharedLock("slot-heal", on_locked="raise", app=app)
    clients = [open_store(cluster.url, {}) for _ in range(3)]
    try:
        key = lock.keys(runtime_for(app), ("v",)).lock
        slot = clients[0].client.keyslot(key)
        owner = cluster.owner(slot)
        replica = cluster.replicas[cluster.masters.index(owner)]
        with lock.hold("v"):  # Given a lock store that served the slot, and clients that know its map
            pass
        for client in clients:
            token = new_token()
            assert isinstance(client.acquire(key, token, 6000, HOLDER), Grant) and client.release(key, token)

        # When the slot's master is killed, a hold is asked, and the replica takes over a moment later
        kill(owner)
        hold = lock.hold("v")
        with ThreadPoolExecutor(1) as pool:
            asked = pool.submit(hold.__enter__)
            time.sleep(0.4)
            cluster.node(replica).execute_command("CLUSTER", "FAILOVER", "TAKEOVER")
            wait_for(lambda: promoted(cluster, replica), 5, interval=0.01, what="the replica promoted")
            at = time.monotonic()
            # then the hold asked while no master served the slot is granted, not failed
            assert asked.result(timeout=10).token
        hold.__exit__(None, None, None)

        # and every client, with the slot map from before the kill, is granted within about a second
        waits: List[float] = []
        for client in clients:
            token = new_token()
            assert isinstance(client.acquire(key, token, 6000, HOLDER), Grant)
            waits.append(time.monotonic() - at)
            client.release(key, token)
        assert max(waits) < 1.0, waits
    finally:
        for client in clients:
            client.close()
        runtime_for(app).close()


def _app(cluster: LocalCluster, name: str) -> Celery:
    app = Celery(name, broker="memory://", set_as_current=False)
    app.conf.singleton_lock_url = cluster.url
    return app


def test_a_block_waiting_through_the_kill_is_granted_when_the_holder_gives_back_its_place(cluster):
    # Given a holder and a waiter in two processes' worth of clients (two apps), on a slot whose
    # master still has its replica
    holding, waiting = _app(cluster, "failover-holder"), _app(cluster, "failover-waiter")
    holder_lock = SharedLock("wait-heal", app=holding)
    waiter_lock = SharedLock("wait-heal", wait_timeout=15, app=waiting)
    try:
        runtime = runtime_for(holding)
        for value in range(100):
            key = holder_lock.keys(runtime, (value,)).lock
            owner = cluster.owner(runtime.store.client.keyslot(key))
            replica = cluster.replicas[cluster.masters.index(owner)] if owner in cluster.masters else None
            if replica is not None and replica.process is not None and not promoted(cluster, replica):
                break
        else:
            pytest.fail("no slot with a live replica")
        release, granted = threading.Event(), []

        def hold() -> None:
            with holder_lock.hold(value):
                release.wait(20)

        def wait() -> None:
            with waiter_lock.hold(value):
                granted.append(time.monotonic())

        with ThreadPoolExecutor(2) as pool:
            held = pool.submit(hold)
            wait_for(lambda: cluster.node(owner).exists(key), 5, what="the place held")
            waited = pool.submit(wait)
            time.sleep(0.3)  # the waiter is subscribed to the key's releases, on the master to be killed
            # When that master is killed and its replica takes over, and then the holder gives its place back
            kill(owner)
            time.sleep(0.4)
            cluster.node(replica).execute_command("CLUSTER", "FAILOVER", "TAKEOVER")
            wait_for(lambda: promoted(cluster, replica), 5, interval=0.01, what="the replica promoted")
            released = time.monotonic()
            release.set()
            held.result(timeout=10)
            # then the waiter is granted the place, within about a second, not at its wait_timeout
            waited.result(timeout=20)
        assert granted and granted[0] - released < 1.5, granted[0] - released
    finally:
        runtime_for(holding).close()
        runtime_for(waiting).close()


def _slot_with_replica(cluster: LocalCluster, keyslot, key_of):
    """A value whose key's slot is served by a master that still has its replica: (value, key, master, replica)."""
    for value in range(200):
        key = key_of(value)
        owner = cluster.owner(keyslot(key))
        replica = cluster.replicas[cluster.masters.index(owner)] if owner in cluster.masters else None
        if replica is not None and replica.process is not None and not promoted(cluster, replica):
            return value, key, owner, replica
    pytest.fail("no slot with a live replica")


def test_a_task_published_while_its_slots_master_is_dead_runs_once_the_replica_serves_it(cluster, test_env,
                                                                                          events_redis):
    import tests.integration.proj as proj

    events_redis.delete("intervals", "started")
    layout = KeyLayout(lock_prefix())
    probe = open_store(cluster.url, {})
    try:
        value, _, owner, replica = _slot_with_replica(
            cluster, probe.client.keyslot, lambda v: layout.lock(proj.storm.name, proj.storm.lock_digest((f"t{v}",), {})))
    finally:
        probe.close()
    with workers(test_env, worker_env(cluster.url), "failover-cluster", count=1, concurrency=2), \
            app_on(proj, cluster.url):
        # Given a worker whose pool processes took that slot's locks before
        for result in [proj.storm.apply_async((f"t{value}",), {"duration": 0.05}, queue="failover-cluster")
                       for _ in range(4)]:
            result.get(timeout=30)
        # When the slot's master is killed, a task of that key is published, and the replica takes over
        kill(owner)
        late = proj.storm.apply_async((f"t{value}",), {"duration": 0.05}, queue="failover-cluster")
        time.sleep(0.5)
        cluster.node(replica).execute_command("CLUSTER", "FAILOVER", "TAKEOVER")
        wait_for(lambda: promoted(cluster, replica), 5, interval=0.01, what="the replica promoted")
        at = time.time()
        # then it runs as soon as the slot is served again (its acquire kept asking), not at a retry
        assert late.get(timeout=30)["key"] == f"t{value}"
    started = [e["start"] for e in records(events_redis, "started") if e["id"] == late.id]
    assert started and started[0] - at < 1.5, (started, at)
