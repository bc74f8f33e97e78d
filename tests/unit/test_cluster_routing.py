"""A Cluster call through a failover: asked again on a reloaded slot map, within its budget."""

from __future__ import annotations

import pytest
import redis

from celery_singleton_lock.store import permanent_problem
from celery_singleton_lock.store.cluster_routing import ClusterSlotUnavailable, healed


class FakeCluster:
    """The parts of a RedisCluster that healing uses: a slot map to reload and a node per slot."""

    def __init__(self) -> None:
        self.reloads = 0
        self.nodes_manager = self

    def initialize(self) -> None:
        self.reloads += 1

    def keyslot(self, key: str) -> int:
        return 866

    def get_node_from_slot(self, slot: int):
        return type("Node", (), {"name": "127.0.0.1:7001"})()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def failing(times: int, error: BaseException):
    calls = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "ok"
    return call, calls


def test_a_call_that_meets_a_dead_master_is_asked_again_on_a_reloaded_map_until_it_answers():
    client, clock = FakeCluster(), Clock()
    call, calls = failing(5, redis.exceptions.ConnectionError("Connection refused"))
    assert healed(client, call, "k", clock=clock, sleep=clock.sleep) == "ok"
    assert len(calls) == 6 and client.reloads == 5 and clock.now < 1.0


def test_a_master_away_past_the_budget_is_an_outage_that_names_the_slot_and_its_master():
    client, clock = FakeCluster(), Clock()
    call, calls = failing(10 ** 6, redis.exceptions.ClusterDownError("CLUSTERDOWN The cluster is down"))
    with pytest.raises(ClusterSlotUnavailable) as raised:
        healed(client, call, "k", budget=2.0, clock=clock, sleep=clock.sleep)
    message = str(raised.value)
    assert "slot 866" in message and "127.0.0.1:7001" in message and "2s" in message and "CLUSTERDOWN" in message
    assert clock.now <= 2.0 and permanent_problem(raised.value) is None  # on_lock_error applies


def test_a_wrong_password_is_not_asked_again():
    client, clock = FakeCluster(), Clock()
    call, calls = failing(10, redis.exceptions.AuthenticationError("WRONGPASS invalid username-password pair"))
    with pytest.raises(redis.exceptions.AuthenticationError):
        healed(client, call, "k", clock=clock, sleep=clock.sleep)
    assert len(calls) == 1 and client.reloads == 0


class Node:
    def __init__(self, port: int) -> None:
        self.host, self.port, self.name = "127.0.0.1", port, f"127.0.0.1:{port}"


class StaleCluster(FakeCluster):
    """Every node it asks still names the dead master; the slot's replica serves the slot itself."""

    def __init__(self) -> None:
        super().__init__()
        self.dead, self.replica = Node(7001), Node(7004)
        self.slots_cache = {866: [self.dead, self.replica]}
        self.moved = []

    def move_slot(self, e) -> None:
        self.moved.append((e.host, e.port, e.slot_id))
        self.slots_cache[e.slot_id] = [self.replica, self.dead]

    def get_redis_connection(self, node):
        answer = [[0, 5460, [b"127.0.0.1", node.port, b"id"]]] if node is self.replica else None

        class Connection:
            def execute_command(self, *args):
                if answer is None:
                    raise redis.exceptions.ConnectionError("Connection refused")
                return answer
        return Connection()


def test_a_map_that_still_names_the_dead_master_follows_the_replica_that_serves_the_slot_now():
    client, clock = StaleCluster(), Clock()

    def call() -> str:
        if client.slots_cache[866][0] is client.dead:
            raise redis.exceptions.ConnectionError("Connection refused")
        return "ok"

    assert healed(client, call, "k", clock=clock, sleep=clock.sleep) == "ok"
    assert client.moved == [("127.0.0.1", 7004, 866)]
