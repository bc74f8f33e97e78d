"""Giving up an enqueue lock never deletes a running lock, with real workers and a real broker.

Under ``queued_or_running`` the enqueue key is the run lock's key, and a ``self.retry()``
message carries the running token of the execution that sent it as its enqueue token.
Given that execution still running, when its retry message is revoked, or a publisher
forges a message carrying a live holder's token as its enqueue token, then the holder
keeps its lock and no second run of the key starts beside it.
"""

from __future__ import annotations

from celery_singleton_lock.calls import headers
from tests.integration.helpers import lock_field, lock_keys, records, wait_started
from tests.support.waits import wait_for


def _scheduled_ids(app) -> set:
    """Ids of the ETA messages the workers hold in memory."""
    replies = app.control.inspect(timeout=0.5).scheduled() or {}
    return {entry["request"]["id"] for entries in replies.values() for entry in entries}


def _runs_beside(intervals, started):
    """Starts of other executions of the same key inside one of the recorded intervals."""
    return [(run["id"], other["id"]) for run in intervals for other in started
            if other["key"] == run["key"] and other["start"] != run["start"]
            and run["start"] < other["start"] < run["end"]]


def test_revoking_a_retry_while_its_sender_still_runs_keeps_the_running_lock(proj, start_worker, events_redis):
    worker = start_worker(concurrency=2)
    # Given a queued_or_running execution that re-queued itself (countdown 30 s) and still runs its
    # 8 s cleanup, while its retry waits in the worker for its countdown
    first = proj.qor_retry_later.delay("k", cleanup=8.0)
    wait_started(events_redis, 1)
    wait_for(lambda: first.id in _scheduled_ids(proj.app), 10, interval=0.2,
             what="the retry to wait in the worker")

    # When the retry is revoked and the task is called again
    assert proj.app.control.revoke(first.id, reply=True, timeout=5)  # answered once the worker acted on it
    again = proj.qor_retry_later.delay("k", cleanup=0.5)

    # Then no run of the key starts while the first execution still runs (judged from what ran),
    # because the new call met the running lock and joined it
    wait_for(lambda: any(e["id"] == first.id for e in records(events_redis)), 20, what="the first execution to end")
    assert _runs_beside(records(events_redis), records(events_redis, "started")) == []
    assert again.id == first.id
    assert "singleton lock LOST" not in worker.log()
    assert "released enqueue lock" not in worker.log()


def test_a_forged_message_with_a_holders_token_leaves_the_holder_its_lock(proj, start_worker, events_redis,
                                                                          lock_redis):
    worker = start_worker(concurrency=2)
    # Given a live holder of a queued_or_running lock, and its token (as lock_acquired or
    # `locks show --json` tell it)
    holder = proj.qor_job.delay("k", duration=4)
    wait_started(events_redis, 1)
    [key] = lock_keys(lock_redis)
    token = lock_field(lock_redis, key, "token")

    # When a publisher sends a message of that call naming the holder's token as its enqueue lock
    forged = proj.app.send_task(proj.qor_job.name, ("k",), {"duration": 0.1}, headers={
        headers.ENQUEUE_TOKEN: token, headers.ENQUEUE_DIGEST: key.rsplit(":", 1)[1]})

    # Then it is dropped as a duplicate, and the holder keeps its lock to the end of its run
    assert forged.get(timeout=20) is None
    assert lock_field(lock_redis, key, "token") == token
    assert proj.qor_job.delay("k").id == holder.id
    assert holder.get(timeout=20)["key"] == "k"
    assert "singleton lock LOST" not in worker.log()
    assert [e["id"] for e in records(events_redis)] == [holder.id]
    wait_for(lambda: not lock_keys(lock_redis), 5, what="the holder's release")
