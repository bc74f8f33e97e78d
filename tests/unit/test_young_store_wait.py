"""A young lock store is a short wait, not an outage.

Given a grant that a server which started a moment ago refuses (:class:`RestartWait`, naming
how long until grants open), when it is asked through :func:`wait_for_gate`, then it is asked
again in place until the server grants, the caller is told once what it waits for, and the wait
ends within the window the refusal named (a clock that only the test moves). A refusal that
outlasts the window, or any other error, reaches the caller as it is.
"""

from __future__ import annotations

from typing import Callable, List, Sequence

import pytest
import redis

from celery_singleton_lock.store import RestartWait, wait_for_gate
from celery_singleton_lock.store.quorum import QuorumUnavailable


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: List[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def young_until(clock: Clock, opens_at: float, refusal: Callable[[int], BaseException] = RestartWait) -> Callable[[], str]:
    """A grant refused as a young server refuses it, until ``opens_at`` on ``clock``."""
    def grant() -> str:
        if clock.now < opens_at:
            raise refusal(int((opens_at - clock.now) * 1000 + 999) // 1000 * 1000)
        return "granted"
    return grant


def test_a_grant_refused_by_a_young_server_is_asked_again_until_it_opens():
    clock, told = Clock(), []
    assert wait_for_gate(young_until(clock, 102.5), told.append, clock, clock.sleep) == "granted"
    assert len(told) == 1 and told[0].wait_ms == 3000
    assert "young lock store" in str(told[0]) and "3 s" in str(told[0])
    assert 2.5 <= clock.now - 100.0 <= 2.5 + 0.2  # granted within a poll of the window's end
    assert max(clock.slept) <= 0.2


def test_a_server_that_grants_at_once_is_asked_once():
    clock, told = Clock(), []
    assert wait_for_gate(lambda: "granted", told.append, clock, clock.sleep) == "granted"
    assert told == [] and clock.slept == []


def test_a_refusal_that_outlasts_the_window_it_named_is_an_outage():
    clock, told = Clock(), []
    with pytest.raises(RestartWait):
        wait_for_gate(young_until(clock, 1_000.0, lambda ms: RestartWait(1000)), told.append, clock, clock.sleep)
    assert len(told) == 1
    assert clock.now - 100.0 <= 1000 / 1000 + 1.0 + 0.2  # the window named, and INFO's whole second


@pytest.mark.parametrize("error", [redis.exceptions.ConnectionError("Connection refused"),
                                   redis.exceptions.TimeoutError("Timeout reading from socket")])
def test_any_other_error_is_raised_at_once(error):
    clock, told = Clock(), []

    def grant() -> str:
        raise error

    with pytest.raises(type(error)):
        wait_for_gate(grant, told.append, clock, clock.sleep)
    assert told == [] and clock.slept == []


def _quorum(errors: Sequence[BaseException]) -> QuorumUnavailable:
    return QuorumUnavailable("acquire: fewer than 2 of 3 Redis masters answered", dict(enumerate(errors)), 3, 2)


def test_a_quorum_refused_by_young_masters_only_waits_as_one_server_does():
    clock, told = Clock(), []
    grant = young_until(clock, 101.0, lambda ms: _quorum([RestartWait(ms), RestartWait(ms - 1000 or ms)]))
    assert wait_for_gate(grant, told.append, clock, clock.sleep) == "granted"
    assert len(told) == 1


def test_a_quorum_with_a_master_down_is_an_outage():
    clock, told = Clock(), []

    def grant() -> str:
        raise _quorum([RestartWait(2000), redis.exceptions.ConnectionError("Connection refused")])

    with pytest.raises(QuorumUnavailable):
        wait_for_gate(grant, told.append, clock, clock.sleep)
    assert told == []
