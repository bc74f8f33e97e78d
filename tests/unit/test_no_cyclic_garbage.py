"""A task's execution leaves nothing for the garbage collector: what it made goes with it.

A worker runs thousands of tasks a second; objects kept alive by a reference cycle wait for the
next collection, which grows with the worker's heap, and every execution then writes to fresh
memory instead of the memory the one before it gave back. Run here through Celery's own tracer
(the worker's path, not an eager call) on the in-memory backend.
"""

from __future__ import annotations

import gc
import uuid

import pytest
from celery import Celery
from celery.app.trace import build_tracer

from celery_singleton_lock import LockedTask
from celery_singleton_lock.runtime import peek_runtime
from celery_singleton_lock.store import MemoryBackend, new_token
from celery_singleton_lock.calls import headers


@pytest.fixture
def traced():
    app = Celery("garbage", set_as_current=False)
    app.conf.update(singleton_lock_backend=MemoryBackend(), task_ignore_result=True)
    seen = {}

    @app.task(name="garbage.job", base=LockedTask, bind=True, shared=False)
    def job(self, account, fail=False):
        seen["lock"] = self.lock
        if fail:
            raise ValueError("the body failed")
        return account

    tracer = build_tracer(job.name, job, eager=False, propagate=False, app=app)

    def run(*args, **kwargs):
        task_id = str(uuid.uuid4())
        request = {"id": task_id, "args": args, "kwargs": kwargs, "hostname": "w@test",
                   "delivery_info": {"exchange": "", "routing_key": "celery", "redelivered": False},
                   headers.TOKEN: new_token()}
        return tracer(task_id, args, kwargs, request)

    yield run, seen
    runtime = peek_runtime(app)
    if runtime is not None:
        runtime.close()


def _garbage_of(run_some) -> list:
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run_some()
        gc.collect()
        return [type(o).__name__ for o in gc.garbage]
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()


def test_an_execution_that_returns_or_raises_leaves_no_cycle(traced):
    run, _ = traced
    run(0)  # first use: the runtime, its store and its caches are made here, not below

    def some():
        for n in range(20):
            run(n)
            run(n, fail=True)

    assert _garbage_of(some) == []


def test_the_lock_object_kept_by_the_body_still_answers_after_the_run(traced):
    run, seen = traced
    run(7)
    lock = seen["lock"]
    assert lock.lease.released and not lock.lost  # let go of, not lost
    assert lock.lease.context is None  # the lease no longer keeps the lock object alive
