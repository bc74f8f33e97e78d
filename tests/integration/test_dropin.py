"""A ``LockedTask`` in a real worker ends as the same task as a plain Celery task would, where the
lock has no say."""

from __future__ import annotations

import re

import pytest

from tests.integration.helpers import records
from tests.support.waits import wait_for


@pytest.mark.parametrize("name", ["rejecting", "rejecting_plain"])
def test_a_message_rejected_with_requeue_runs_again_until_it_succeeds(proj, start_worker, events_redis, name):
    # Given an acks_late task that gives its message back three times, then succeeds
    worker = start_worker(concurrency=1)
    task = getattr(proj, name)

    # When it is called once
    result = task.delay("k", times=3)

    # Then every redelivery runs: REJECTED, REJECTED, REJECTED, SUCCESS, as for plain Celery
    assert result.get(timeout=30) == 4
    assert [d["id"] for d in records(events_redis, f"deliveries:{task.name}")] == [result.id] * 4
    wait_for(lambda: f"[{result.id}] succeeded" in worker.log(), 10, what="the success in the worker's log")
    outcomes = re.findall(rf"\[{result.id}\] (reject|succeeded|ignored|raised)", worker.log())
    assert outcomes == ["reject", "reject", "reject", "succeeded"], worker.log()
    assert "is a duplicate" not in worker.log()
