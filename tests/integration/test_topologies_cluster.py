"""A local 3-master Redis Cluster (slots assigned by the test), through real workers and the store.

Given a cluster started here, when a duplicate storm runs on it, no two runs of
one key overlap; the keys of one lock share a slot; a held lock keeps being
renewed while its slot migrates to another master; fences strictly increase.
"""

from __future__ import annotations

import threading
import time

import pytest
from redis.cluster import RedisCluster

from celery_singleton_lock.store import KeyLayout, Lease, Renewer
from celery_singleton_lock.store import Completion, Grant, new_token, record
from celery_singleton_lock.store.cluster import ClusterBackend
from celery_singleton_lock.store.connect import open_store
from tests.integration.topo import (HOLDER, TopologyBench, app_on, storm, strictly_increasing, successive_fences,
                                   worker_env, workers)
from tests.support.suite_redis import lock_prefix
from tests.support.contract import CHECKS
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
                                               layout.fence("proj.sync", "d1"), layout.done("proj.sync", "d1"))}
    assert len(slots) == 1


@pytest.mark.parametrize("task", ["}billing.charge", "\\billing.charge", "a}b"])
def test_a_task_name_with_a_brace_where_the_hash_tag_starts_works_on_the_cluster(store, task):
    # Given a task name that would leave Redis Cluster an empty hash tag (or looks like the escape)
    layout = KeyLayout("cslcl")
    keys = layout.keys(task, "c" * 32, "queued")
    slots = {store.client.keyslot(k) for k in (keys.lock, keys.queued, keys.fence, keys.done)}
    assert len(slots) == 1
    # When its call is queued, adopted, fenced and released with a completion note (every one of
    # its keys in one script call), then each step works: no CROSSSLOT taken for an outage
    queued, token = new_token(), new_token()
    assert isinstance(store.acquire(keys.queued, queued, 5000, HOLDER, state="queued"), Grant)
    assert isinstance(store.adopt(keys.queued, keys.lock, queued, token, 5000, HOLDER), Grant)
    first = store.fence(keys.lock, keys.fence, token)
    assert first is not None and first > 0
    assert store.release(keys.lock, token, Completion(keys.done, "task-1", 5000, True))
    assert store.completed(keys.done, "task-1")
    # and the next holder's fence comes from the same counter, larger
    assert isinstance(store.acquire(keys.lock, "next", 5000, HOLDER), Grant)
    assert store.fence(keys.lock, keys.fence, "next") > first
    assert store.release(keys.lock, "next")
    store.client.delete(keys.fence, keys.done)


def test_one_hot_tasks_locks_spread_over_many_slots_and_masters(cluster, store, test_env):  # proj reads test_env
    # Given one task called with many different arguments, through workers' own key derivation
    import tests.integration.proj as proj

    layout = KeyLayout("cslcl")
    keys = [layout.lock(proj.sync.name, proj.sync.lock_digest((f"arg-{i}",), {})) for i in range(200)]
    # When each call takes its lock, then the locks land on many slots, and on every master
    for i, key in enumerate(keys):
        assert isinstance(store.acquire(key, f"tok-{i}", 5000, HOLDER), Grant)
    slots = {store.client.keyslot(key) for key in keys}
    assert len(slots) > 1
    assert len(slots) <= 16  # the bookkeeping stays bounded: one counter per bucket
    assert {cluster.owner(slot).port for slot in slots} == {master.port for master in cluster.masters}
    assert store.release_many([(key, f"tok-{i}") for i, key in enumerate(keys)]) == [True] * len(keys)


def test_fences_strictly_increase_across_1000_holders_on_the_cluster(store):
    layout = KeyLayout("cslcl")
    key = layout.lock("fenced", "e" * 32)
    fences = successive_fences(store, key, layout.fence("fenced", "e" * 32), 1000)
    assert strictly_increasing(fences)


def test_storm_through_workers_on_the_cluster(cluster, test_env, events_redis):
    import tests.integration.proj as proj

    with workers(test_env, worker_env(cluster.url), "cluster"):
        with app_on(proj, cluster.url):
            storm(proj, events_redis, "cluster")
    client = RedisCluster.from_url(cluster.url.replace("redis+cluster", "redis").split(",")[0], decode_responses=True)
    try:
        assert not [k for k in client.scan_iter(f"{lock_prefix()}:*") if not k.endswith(":fence")]
    finally:
        client.close()


def test_renewal_and_release_survive_a_slot_migration(cluster, store):
    layout = KeyLayout("cslmig")
    key = layout.lock("mig", "d")
    other_key = layout.lock("elsewhere", "d")  # renewed in the same call, another slot
    token = new_token()
    assert isinstance(store.acquire(key, token, 1500, HOLDER), Grant)
    assert isinstance(store.acquire(other_key, token, 1500, HOLDER), Grant)
    lost = threading.Event()
    renewer = Renewer(store, on_lost=lambda lease, reason: lost.set())
    leases = [Lease(k, token, ttl=1.5, heartbeat=0.3, confirmed_at=time.monotonic()) for k in (key, other_key)]
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
        assert record.decode(LocalCluster.node(target).get(key))["token"] == token  # renewed where it lives now
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


@pytest.mark.parametrize("check", [name for name in CHECKS if "generation" in CHECKS[name].__code__.co_names
                                   or "_generations" in CHECKS[name].__code__.co_names])
def test_generations_keep_the_contract_on_the_cluster_in_their_lock_slot(store, check):
    bench = TopologyBench(store, "cslgen")
    keys = bench.keys()
    assert store.client.keyslot(keys.generation) == store.client.keyslot(keys.lock)
    CHECKS[check](bench)


def test_a_keys_places_share_its_slot_and_keep_their_limit_on_the_cluster(store):
    from dataclasses import replace

    from celery_singleton_lock.store.places import Limit, limited

    limit = Limit(3, 0)
    keys = [limited(KeyLayout("cslcl").keys("placed", f"{n:x}0", "queued"), limit) for n in range(16)]
    # Given keys of one task over every bucket, each key's places, enqueue places and fence share a slot
    for one in keys:
        assert len({store.client.keyslot(k) for k in (one.lock, one.queued, one.fence)}) == 1
    # When four holders ask for each key, then three get in, and the fourth is told three of three
    for one in keys:
        outcomes = [store.acquire(one.lock, f"tok-{n}", 5000, replace(HOLDER, task_id=f"t{n}"), limit=limit)
                    for n in range(4)]
        assert [isinstance(o, Grant) for o in outcomes] == [True, True, True, False]
        assert (outcomes[3].held, outcomes[3].limit) == (3, 3)
        assert store.holder(one.lock)["held"] == "3"
    # and renewing and releasing them all at once, across masters, answers each
    items = [(one.lock, f"tok-{n}") for one in keys for n in range(4)]
    expected = [n < 3 for _ in keys for n in range(4)]
    assert store.renew([(key, token, 5000) for key, token in items]) == expected
    assert store.release_many(items) == expected
    assert all(store.holder(one.lock) is None for one in keys)


def test_a_shared_lock_holds_its_places_on_the_cluster_each_key_in_one_slot(cluster):
    from celery import Celery

    from celery_singleton_lock import LockedError, SharedLock
    from celery_singleton_lock.runtime import runtime_for

    app = Celery("shared_on_cluster", set_as_current=False)
    app.conf.update(singleton_lock_url=cluster.url, singleton_lock_prefix="cslsh")
    lock = SharedLock("tenant", limit=2, on_locked="raise", app=app)
    try:
        # Given holds of several tenants (their keys spread over the masters), two places each
        for tenant in range(8):
            with lock.hold(tenant) as first, lock.hold(tenant) as second:
                store = runtime_for(app).store
                assert store.client.keyslot(first.key) == store.client.keyslot(first.key[:-len(":places")] + ":x")
                fences = first.fencing_token, second.fencing_token  # asked in this order
                assert fences[1] > fences[0]
                # then a third place of the tenant is refused, two of two taken
                with pytest.raises(LockedError, match="2 of 2 places taken"):
                    with lock.hold(tenant):
                        pass
            # and every place is given back
            assert runtime_for(app).store.holder(first.key) is None
    finally:
        runtime_for(app).close()
