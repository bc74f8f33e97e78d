"""Garbage in the library's message headers neither crashes a worker nor lets two runs of a key overlap.

Given messages sent by name (no ``LockedTask`` at hand, as any publisher can) whose
``singleton_lock_*`` headers hold wrong types, huge values and tokens of locks that
do not exist, when a real worker receives several of them for one key at once,
then each ends in a ready state, no two runs of the key overlap, and the worker
logs no traceback.
"""

from __future__ import annotations

from typing import Any, Dict, List

from celery_singleton_lock.calls import headers
from tests.integration.helpers import overlaps, records, wait_unlocked

GARBAGE: List[Dict[str, Any]] = [
    {headers.ENQUEUE_TOKEN: 12345, headers.ENQUEUE_DIGEST: {"not": "a digest"}, headers.RETRIES: "NaN"},
    {headers.ENQUEUE_TOKEN: ["a", "list"], headers.ENQUEUE_DIGEST: "../" * 1000, headers.RETRIES: -1},
    {headers.ENQUEUE_TOKEN: "x" * 200_000, headers.ENQUEUE_DIGEST: "f" * 32, headers.RETRIES: 10 ** 30},
    {headers.AFTER: "a-token-nobody-holds", headers.TOKEN: "chosen-by-the-publisher"},
    {headers.AFTER: {"a": ["b"]}, headers.ENQUEUE_TOKEN: None, headers.RETRIES: 2.5},
]


def test_garbage_headers_are_harmless(proj, start_worker, events_redis, lock_redis):
    worker = start_worker(concurrency=4)
    sent = [proj.app.send_task(task.name, (task.name,), {"duration": 0.5}, headers=garbage)
            for task in (proj.storm, proj.qor_job) for garbage in GARBAGE]  # one key per task

    outcomes = [result.get(timeout=60) for result in sent]

    intervals = records(events_redis)
    assert intervals and overlaps(intervals) == []
    assert {o["key"] for o in outcomes if o} == {proj.storm.name, proj.qor_job.name}
    wait_unlocked(lock_redis, 10)
    assert "Traceback" not in worker.log(), worker.log()
