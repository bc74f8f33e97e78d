"""``self.lock``: the fence asked of the store on first read, kept, refused to a lost holder; ``lost``
as soon as the lock's TTL passed since its last confirmed renewal."""

from __future__ import annotations

import time

import pytest

from celery_singleton_lock import LockLostError
from celery_singleton_lock.run.handle import ExecutionLock
from celery_singleton_lock.store import Lease


def _handle(answers, confirmed_at=None):
    asked = []

    def ask():
        asked.append(1)
        return answers.pop(0)

    confirmed = time.monotonic() if confirmed_at is None else confirmed_at
    lease = Lease("k", "tok", ttl=3.0, heartbeat=1.0, confirmed_at=confirmed)
    return ExecutionLock("k", "tok", ask, "proj.job", "id-1", lease), asked


def test_the_fence_is_asked_for_once_on_first_read_and_kept():
    handle, asked = _handle([17, 99])
    assert asked == [] and "not asked" in repr(handle)  # a task that never reads it costs nothing
    assert handle.fencing_token == 17
    assert handle.fencing_token == 17
    assert asked == [1]


def test_a_holder_that_no_longer_holds_its_lock_is_refused_a_fence():
    handle, _ = _handle([None])
    with pytest.raises(LockLostError, match="lost its lock k"):
        handle.fencing_token


def test_a_holder_whose_ttl_passed_since_its_last_renewal_is_lost_before_the_heartbeat_says_so():
    fresh, _ = _handle([])
    assert not fresh.lost
    fresh.check()
    paused, _ = _handle([], confirmed_at=time.monotonic() - 3.01)  # a pause longer than lock_ttl
    assert paused.lost and not paused.lease.lost.is_set()
    with pytest.raises(LockLostError):
        paused.check()


def test_a_released_lease_is_not_lost_however_old():
    handle, _ = _handle([], confirmed_at=time.monotonic() - 10)
    handle.lease.released = True
    assert not handle.lost


def test_a_fence_the_store_cannot_answer_is_a_library_error_naming_the_lock():
    import redis

    from celery_singleton_lock import ConfigurationError, LockBackendError

    def fails(error):
        def ask():
            raise error
        return ExecutionLock("k", "tok", ask, "proj.job", "id-1", Lease("k", "tok", 3.0, 1.0, time.monotonic()))

    with pytest.raises(LockBackendError, match="fencing token of k"):
        fails(redis.exceptions.TimeoutError("Timeout reading from socket")).fencing_token
    with pytest.raises(ConfigurationError, match="refused the fencing token of k"):
        fails(redis.exceptions.NoPermissionError("NOPERM this user has no permissions to run the 'evalsha' "
                                                 "command")).fencing_token
