"""A local 3-master Redis Cluster (slots assigned by the test), through real workers and the store.

Given a cluster started here, when a duplicate storm runs on it, no two runs of
one key overlap; the keys of one lock share a slot; a held lock keeps being
renewed while its slot migrates to another master; fences strictly increase.
"""

from __future__ import annotations

import threading

import pytest
from redis.cluster import RedisCluster

from celery_singleton_lock.store import KeyLayout, Lease, Renewer
from celery_singleton_lock.store import Grant, new_token
from celery_singleton_lock.store.cluster import ClusterBackend
from celery_singleton_lock.store.connect import open_store
from tests.integration.topo import HOLDER, app_on, storm, strictly_increasing, successive_fences, worker_env, workers
from tests.support.topologies import LocalCluster
from tests.support.waits import wait_for


@pytest.fixture(scope="module")
def cluster():
    started = LocalCluster(masters=3).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def store(cluster):
    opened = open_store(cluster.url, {})
    yield opened
    opened.close()


def test_cluster_url_opens_a_cluster_store(store):
    assert isinstance(store, ClusterBackend) and isinstance(store.client, RedisCluster)


def test_keys_of_one_lock_share_a_slot(store):
    layout = KeyLayout("cslcl")
    slots = {store.client.keyslot(k) for k in (layout.lock("proj.sync", "d1"), layout.queued("proj.sync", "d1"),
                                               layout.fence("proj.sync"), layout.lock("proj.sync", "d2"))}
    assert len(slots) == 1


def test_storm_through_workers_on_the_cluster(cluster, test_env, events_redis):
    import tests.integration.proj as proj

    with workers(test_env, worker_env(cluster.url), "cluster"):
        with app_on(proj, cluster.url):
            storm(proj, events_redis, "cluster")
    client = RedisCluster.from_url(cluster.url.replace("redis+cluster", "redis").split(",")[0], decode_responses=True)
    try:
        assert not [k for k in client.scan_iter("csltest:*") if not k.endswith(":fence")]
    finally:
        client.close()


def test_renewal_and_release_survive_a_slot_migration(cluster, store):
    layout = KeyLayout("cslmig")
    key, fence = layout.lock("mig", "d"), layout.fence("mig")
    other_key = layout.lock("elsewhere", "d")  # renewed in the same call, another slot
    token = new_token()
    assert isinstance(store.acquire(key, fence, token, 1500, HOLDER), Grant)
    assert isinstance(store.acquire(other_key, layout.fence("elsewhere"), token, 1500, HOLDER), Grant)
    lost = threading.Event()
    renewer = Renewer(store, on_lost=lambda lease, reason: lost.set())
    leases = [Lease(k, token, ttl=1.5, heartbeat=0.3, confirmed_at=0) for k in (key, other_key)]
    for lease in leases:
        renewer.hold(lease)
    try:
        slot = store.client.keyslot(key)
        source = cluster.owner(slot)
        target = next(m for m in cluster.masters if m is not source)
        wait_for(lambda: renewer.round_trips >= 2, 5, what="renewals before the migration")

        cluster.migrate_slot(slot, target)
        assert cluster.owner(slot) is target
        before = renewer.round_trips
        wait_for(lambda: renewer.round_trips >= before + 8, 10, what="renewals after the migration")  # > TTL

        assert not lost.is_set() and not any(lease.lost.is_set() for lease in leases)
        assert LocalCluster.node(target).hget(key, "token") == token  # renewed where it lives now
        with store.release_events(key) as events:
            assert store.release(key, token)
            assert events.wait(2.0)  # the release announcement reaches the subscriber
    finally:
        for lease in leases:
            renewer.drop(lease)
        renewer.close()
        store.release(other_key, token)


def test_fences_strictly_increase_across_1000_holders(store):
    fences = successive_fences(store, "cslf:{t}:k", "cslf:{t}:fence", 1000)
    assert strictly_increasing(fences)
