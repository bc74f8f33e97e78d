"""The publisher's view of an argument and the worker's differ, and no call is lost.

kombu's JSON turns a dict shaped like one of its tagged values,
``{"__type__": "datetime", "__value__": ...}``, into the value it stands for: the
caller passes a dict, the worker's body receives a datetime. Given real workers,
when such calls are published, then what ran (the types the bodies received),
what the broker holds and what Redis keeps show that each call is keyed as the
worker receives it, and that every enqueue lock is freed by the worker (after the
run, or at a revoke), so the next identical call is published and runs.
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
import time

import pytest

from tests.integration.helpers import lock_keys, overlaps, records, wait_started, wait_unlocked
from tests.integration.test_enqueue_lock import queued_messages
from tests.support.waits import wait_for

APP = "tests.integration.proj_views"

#: What the caller passes, and what a worker's body receives for it (kombu's JSON decodes it).
TAGGED = {"__type__": "datetime", "__value__": "2023-01-01T00:00:00"}
RECEIVED = dt.datetime(2023, 1, 1)

#: Message headers by which a publisher hands its enqueue lock to the worker (the wire format).
TOKEN_HEADER = "singleton_lock_enqueue_token"
DIGEST_HEADER = "singleton_lock_enqueue_digest"


@pytest.fixture
def views(proj):
    """The app with the tasks of this module (imported once the test environment is set)."""
    return importlib.import_module(APP)


def test_the_publisher_keys_a_call_as_the_worker_will_receive_it(views, proj, broker_redis, lock_redis):
    first = views.views_qor.delay(TAGGED)

    assert views.views_qor.delay(RECEIVED).id == first.id  # the worker receives the same call
    assert views.views_qor.delay(dict(TAGGED)).id == first.id
    other = views.views_qor.delay({"$datetime": "2023-01-01T00:00:00"})  # a dict the worker receives as one
    assert other.id != first.id
    assert queued_messages(broker_redis) == 2
    assert len(lock_keys(lock_redis)) == 2


@pytest.mark.parametrize("name", ["views_qor", "views_queued"])
def test_a_call_the_serializer_changes_runs_again_once_it_has_run(name, views, proj, start_worker, lock_redis,
                                                                   events_redis):
    task = getattr(views, name)
    first = task.delay(TAGGED)
    start_worker(app=APP)

    assert first.get(timeout=20) == "datetime"  # the views differ: a dict was passed
    wait_unlocked(lock_redis, 5)  # the enqueue lock went with the run
    again = task.delay(TAGGED)
    assert again.id != first.id  # published, not answered with the finished run
    assert again.get(timeout=20) == "datetime"
    assert [entry["seen"] for entry in records(events_redis)] == ["datetime", "datetime"]


def test_the_copy_queued_behind_a_running_one_runs_after_it(views, proj, start_worker, events_redis, lock_redis):
    start_worker(concurrency=2, app=APP)  # a free slot: the queued copy starts while the first still runs
    running = views.views_queued.delay(TAGGED, duration=1.0)
    wait_started(events_redis, 1)
    queued = views.views_queued.delay(TAGGED, duration=1.0)

    assert queued.id != running.id
    assert running.get(timeout=20) == "datetime"
    assert queued.get(timeout=20) == "datetime"  # it kept its place in the queue and ran after the first
    intervals = records(events_redis)
    assert len(intervals) == 2 and overlaps(intervals) == []
    wait_unlocked(lock_redis, 5)


def _wait_received(worker, task_id: str) -> None:
    wait_for(lambda: task_id in worker.log(), 10, what=f"the worker to receive {task_id}")


def test_revoking_a_scheduled_call_frees_its_enqueue_lock(views, proj, start_worker, lock_redis):
    worker = start_worker(app=APP)
    waiting = views.views_qor.apply_async((TAGGED,), countdown=60)
    _wait_received(worker, waiting.id)

    waiting.revoke()
    wait_unlocked(lock_redis, 5)
    again = views.views_qor.delay(TAGGED)
    assert again.id != waiting.id
    assert again.get(timeout=20) == "datetime"


def _take_enqueue_lock(app, task, digest: str) -> str:
    """Take the enqueue lock that ``digest`` names, as a publisher does before publishing; its token."""
    from celery_singleton_lock.runtime import runtime_for
    from celery_singleton_lock.store import Grant, Holder
    from celery_singleton_lock.store import new_token

    runtime = runtime_for(app)
    token = new_token()
    holder = Holder(task_id="publisher", host="test", pid=os.getpid(), since_ms=int(time.time() * 1000),
                    heartbeat_ms=10_000)
    key = runtime.layout.enqueue(task.name, digest, task.singleton_lock()[0].scope)
    assert isinstance(runtime.store.acquire(key, token, 120_000, holder,
                                            state="queued"), Grant)
    return token


def test_the_worker_frees_the_enqueue_lock_its_message_names(views, proj, start_worker, lock_redis):
    # A publisher that keys the call by the dict it was given (an earlier version of the library
    # did) names a lock the worker would never derive from the datetime it receives.
    task = views.views_qor
    caller_view = task.lock_digest((TAGGED,), {})
    assert caller_view != task.lock_digest((RECEIVED,), {})
    token = _take_enqueue_lock(proj.app, task, caller_view)
    # Sent as that publisher's message arrives (by name: apply_async replaces a caller's library headers)
    ran = proj.app.send_task(task.name, (TAGGED,), headers={TOKEN_HEADER: token, DIGEST_HEADER: caller_view})
    scheduled_value = {"__type__": "date", "__value__": "2023-01-02"}
    scheduled_view = task.lock_digest((scheduled_value,), {})
    scheduled_token = _take_enqueue_lock(proj.app, task, scheduled_view)
    scheduled = proj.app.send_task(task.name, (scheduled_value,), countdown=60,
                                   headers={TOKEN_HEADER: scheduled_token, DIGEST_HEADER: scheduled_view})
    worker = start_worker(app=APP)

    assert ran.get(timeout=20) == "datetime"
    _wait_received(worker, scheduled.id)
    scheduled.revoke()
    wait_unlocked(lock_redis, 5)  # the run adopted the lock its message named; the revoke freed the other
