"""Sentinel with one master and one replica: the lock through Sentinel, failover, and the failover race.

Given a master, its replica and a sentinel started here, when locks are taken
through a ``sentinel://`` URL they work, and after a forced failover the new
master grants them. The failover race (replica cut off and paused, a lock taken,
the master killed, the replica promoted) yields two holders without replica
acknowledgement, which the docs warn about, and one holder with it.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import redis

from celery_singleton_lock.store import Grant, new_token
from celery_singleton_lock.store.connect import open_store
from celery_singleton_lock.store.replicas import ReplicaAckError, ReplicaAckBackend
from celery_singleton_lock.store import record
from tests.integration.topo import (HOLDER, TopologyBench, app_on, storm, strictly_increasing, successive_fences,
                                   worker_env, workers)
from tests.support.topologies import SentinelGroup
from tests.support.waits import wait_for


@pytest.fixture
def group():
    started = SentinelGroup().start()
    try:
        yield started
    finally:
        started.stop()


def _options(group: SentinelGroup, ack: bool):
    options = {"master_name": group.master_name}
    if ack:
        options.update(replica_ack=1, replica_ack_timeout=0.3)
    return options


def _granted(store, key: str, token: str):
    """Acquire, riding out the connection errors of a failover in progress (bounded by the caller)."""
    try:
        return isinstance(store.acquire(key, token, 10000, HOLDER), Grant)
    except redis.ConnectionError:
        return False


def test_lock_through_sentinel_and_on_the_new_master_after_failover(group, test_env, events_redis):
    import tests.integration.proj as proj

    with workers(test_env, worker_env(group.url, _options(group, ack=True)), "sentinel", count=1, concurrency=3):
        with app_on(proj, group.url, _options(group, ack=True)):
            storm(proj, events_redis, "sentinel", tasks=24, keys=4)

    store = open_store(group.url, _options(group, ack=False))
    try:
        assert _granted(store, "before", "t1")
        assert record.decode(redis.Redis(port=group.master.port).get("before"))["token"] == "t1"
        new_master = group.failover()
        # A store follows the master the sentinels name (store/sentinel.py); a new one starts there too.
        store.close()
        store = open_store(group.url, _options(group, ack=False))
        wait_for(lambda: _granted(store, "after", "t2"), 10, interval=0.1, what="a lock from the new master")
        assert record.decode(redis.Redis(port=new_master.port).get("after"))["token"] == "t2"
    finally:
        store.close()


@pytest.mark.parametrize("ack", [True, False], ids=["replica_ack", "no_ack"])
def test_failover_race(group, ack):
    first = open_store(group.url, _options(group, ack))
    assert isinstance(first, ReplicaAckBackend) is ack
    assert _granted(first, "warm-up", "w")  # connections made, replica in sync
    replica_pid = group.replica.process.pid
    os.kill(replica_pid, signal.SIGSTOP)  # the replica stalls...
    redis.Redis(port=group.master.port).client_kill_filter(_type="slave")  # ...and its link drops (every redis-py spells it so)
    holders = []
    try:
        started = time.monotonic()
        try:
            if isinstance(first.acquire("race", new_token(), 10000, HOLDER), Grant):
                holders.append("first")
        except ReplicaAckError:
            assert time.monotonic() - started < 2.0  # refused within replica_ack_timeout, not hung
        group.master.process.kill()  # the master dies before the lock reached the replica
    finally:
        os.kill(replica_pid, signal.SIGCONT)
    group.wait_promoted(20)

    second = open_store(group.url, _options(group, ack=False))  # another worker, on the new master
    try:
        wait_for(lambda: _granted_once(second, holders), 10, interval=0.1, what="the new master to answer")
    finally:
        second.close()
        first.close()
    if ack:
        assert holders == ["second"]  # the unacknowledged lock was never handed out: one holder
    else:
        assert holders == ["first", "second"]  # the docs' caveat: two holders of one lock


def _granted_once(store, holders) -> bool:
    try:
        outcome = store.acquire("race", new_token(), 10000, HOLDER)
    except redis.ConnectionError:
        return False
    if isinstance(outcome, Grant):
        holders.append("second")
    return True


def test_fences_strictly_increase_across_1000_holders_and_a_failover(group):
    store = open_store(group.url, _options(group, ack=True))

    def between(i: int) -> None:
        if i == 500:
            new_master = group.failover()
            # what the sentinel does at its next look at the old master (up to 10 s later), done now
            redis.Redis(port=group.replica.port).replicaof("127.0.0.1", new_master.port)
            # the old master rejoins as the new master's replica; until it acknowledges, locks are refused
            wait_for(lambda: _probe(store), 20, interval=0.1, what="a replica to acknowledge on the new master")

    try:
        fences = successive_fences(store, "k", "fence", 1000, between)
    finally:
        store.close()
    assert strictly_increasing(fences)


def _probe(store) -> bool:
    token = new_token()
    if _granted(store, "probe", token):
        try:
            store.release("probe", token)
        except redis.ConnectionError:  # a connection still open to the demoted master: the next one is new
            store.release("probe", token)
        return True
    return False


def test_a_failover_to_a_replica_that_missed_the_counter_keeps_fences_increasing(group):
    store = open_store(group.url, _options(group, ack=False))
    try:
        before = successive_fences(store, "k", "fence", 20)
        new_master = group.failover()
        redis.Redis(port=new_master.port).delete("fence")  # the last counter writes never reached it
        after = wait_for(lambda: _fences_or_none(store), 20, interval=0.1, what="locks on the new master")
    finally:
        store.close()
    assert strictly_increasing(before + after)


def _fences_or_none(store):
    try:
        return successive_fences(store, "k", "fence", 20)
    except redis.ConnectionError:
        return None


def test_places_through_sentinel_are_acknowledged_by_the_replica(group):
    from celery_singleton_lock.store import KeyLayout
    from dataclasses import replace

    from celery_singleton_lock.store.places import Limit, limited

    store = open_store(group.url, _options(group, ack=True))
    try:
        assert isinstance(store, ReplicaAckBackend)
        limit = Limit(2, 0)
        keys = limited(KeyLayout("cslsn").keys("placed", "a1", "queued"), limit)
        # Given a key with two places, taken through Sentinel's master with replica acknowledgement
        wait_for(lambda: _granted_place(store, keys.lock, "t1", limit), 10, what="the first place")
        assert isinstance(store.acquire(keys.lock, "t2", 10000, replace(HOLDER, task_id="t2"), limit=limit), Grant)
        # then the replica has both, and a third is refused, two of two
        replica = redis.Redis(port=group.replica.port)
        try:
            wait_for(lambda: replica.hlen(keys.lock) == 3, 5, what="the replica's copy")  # two places and ~n
        finally:
            replica.close()
        third = store.acquire(keys.lock, "t3", 10000, replace(HOLDER, task_id="t3"), limit=limit)
        assert not isinstance(third, Grant) and (third.held, third.limit) == (2, 2)
        # and an enqueue place on its own key is adopted once a place frees
        assert isinstance(store.acquire(keys.queued, "q", 10000, replace(HOLDER, task_id="q"), state="queued",
                                        limit=limit), Grant)
        assert store.release(keys.lock, "t1")
        assert isinstance(store.adopt(keys.queued, keys.lock, "q", "n", 10000, HOLDER, limit=limit), Grant)
        assert store.release_many([(keys.lock, "t2"), (keys.lock, "n")]) == [True, True]
    finally:
        store.close()


def _granted_place(store, key: str, token: str, limit) -> bool:
    try:
        return isinstance(store.acquire(key, token, 10000, HOLDER, limit=limit), Grant)
    except redis.ConnectionError:
        return False


@pytest.mark.parametrize("ack", [False, True], ids=["plain", "replica_ack"])
def test_waiters_through_sentinel_are_served_first_come_first_served(group, ack):
    from tests.support.contract import CHECKS
    from tests.support import contract_line

    store = open_store(group.url, _options(group, ack=ack))
    try:
        # Given a store through Sentinel that grants (a master the sentinels just met waits a moment)
        wait_for(lambda: _granted(store, "cslline-probe", new_token()), 15, what="a first grant")
        # then its waiters keep the line's contract: served in order, a waiter that gives up or dies leaves
        line_checks = [name for name in CHECKS if CHECKS[name].__module__ == contract_line.__name__]
        assert len(line_checks) == 3
        for name in line_checks:
            CHECKS[name](TopologyBench(store, "cslline"))
    finally:
        store.close()
