"""Which master a store on Sentinel follows, and when a new one may grant (sentinels' answers given here)."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

import redis

from celery_singleton_lock.store.sentinel_watch import QUIET_S, WINDOW_S, MasterWatch


class _Answers:
    """A sentinel's pipeline: GET-MASTER-ADDR-BY-NAME, SENTINEL MASTER, SENTINEL REPLICAS, in that order."""

    def __init__(self, sentinel: "_Sentinel") -> None:
        self._sentinel = sentinel

    def sentinel_get_master_addr_by_name(self, name: str) -> None:
        pass

    def sentinel_master(self, name: str) -> None:
        pass

    def sentinel_slaves(self, name: str) -> None:
        pass

    def execute(self) -> List[Any]:
        return list(self._sentinel.answer)


class _Sentinel:
    def __init__(self, named: int, record: int, epoch: int, age_ms: int = 60000) -> None:
        state: Dict[str, Any] = {"ip": "127.0.0.1", "port": record, "config-epoch": epoch,
                                 "role-reported-time": age_ms, "num-other-sentinels": 2}
        replicas = [{"ip": "127.0.0.1", "port": 7001, "master-port": named, "master-link-status": "ok"}]
        self.answer = [("127.0.0.1", named), state, replicas]

    def pipeline(self, transaction: bool = False) -> _Answers:
        return _Answers(self)


class _Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_newest_configuration_is_followed_and_a_switch_is_told():
    switched: List[str] = []
    clock = _Clock()
    sentinels = [_Sentinel(6380, 6380, 1), _Sentinel(6380, 6380, 1), _Sentinel(6380, 6380, 1)]
    watch = MasterWatch(sentinels, "m", clock=clock)
    watch.on_switch(lambda: switched.append("x"))
    assert watch.ask() == ("127.0.0.1", 6380) and watch.wait_ms() == 0
    # Given one sentinel that led a failover (epoch 2, naming 6381) and two that still name 6380
    sentinels[1].answer = _Sentinel(6381, 6381, 2, age_ms=0).answer
    # When every sentinel is asked
    clock.now += 1
    # Then the leader's answer wins, the switch is told, and the new master may not grant yet
    assert watch.ask() == ("127.0.0.1", 6381)
    assert switched == ["x"]
    assert watch.wait_ms() == pytest.approx(WINDOW_S * 1000, abs=2)
    assert watch.replicas == frozenset({("127.0.0.1", 7001)})
    clock.now += WINDOW_S
    assert watch.wait_ms() == 0


def test_a_leader_whose_own_record_has_not_moved_yet_counts_the_new_master_as_taken_just_now():
    clock = _Clock()
    watch = MasterWatch([_Sentinel(6381, 6380, 2, age_ms=50000)], "m", clock=clock)
    assert watch.ask() == ("127.0.0.1", 6381)
    assert watch.wait_ms() > (WINDOW_S - 0.01) * 1000  # not 50 s old: the record is the old master's
    assert watch.replicas == frozenset()  # nor are its replicas the new master's


def test_a_master_no_failover_made_grants_at_once_and_a_fresh_answer_is_reused():
    clock = _Clock()
    sentinel = _Sentinel(6380, 6380, 0, age_ms=10)  # epoch 0: the sentinels just started
    watch = MasterWatch([sentinel], "m", clock=clock)
    assert watch.master() == ("127.0.0.1", 6380) and watch.wait_ms() == 0
    sentinel.answer[0] = ("127.0.0.1", 6399)
    assert watch.master() == ("127.0.0.1", 6380)  # asked less than FRESH_S ago
    clock.now += 1
    assert watch.master() == ("127.0.0.1", 6399)


class _Silent(_Sentinel):
    asked = 0

    def pipeline(self, transaction: bool = False) -> _Answers:
        self.asked += 1
        raise redis.ConnectionError("timed out")


def test_a_sentinel_that_does_not_answer_is_left_out_for_a_while():
    clock = _Clock()
    silent = _Silent(6380, 6380, 1)
    watch = MasterWatch([silent, _Sentinel(6380, 6380, 1)], "m", clock=clock)
    assert watch.ask() == ("127.0.0.1", 6380) and silent.asked == 1
    clock.now += 1
    assert watch.ask() == ("127.0.0.1", 6380) and silent.asked == 1
    clock.now += QUIET_S
    watch.ask()
    assert silent.asked == 2
