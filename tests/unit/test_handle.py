"""``self.lock.fencing_token``: asked of the store on first read, kept, refused to a lost holder."""

from __future__ import annotations

import pytest

from celery_singleton_lock import LockLostError
from celery_singleton_lock.handle import ExecutionLock
from celery_singleton_lock.store import Lease


def _handle(answers):
    asked = []

    def ask():
        asked.append(1)
        return answers.pop(0)

    lease = Lease("k", "tok", ttl=3.0, heartbeat=1.0, confirmed_at=0.0)
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
