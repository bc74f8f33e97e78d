"""A lock store that fails while an execution waits: every wait follows ``on_lock_error``, as an acquire does.

Four waits block on a lock's release announcements: an ``on_locked="wait"`` duplicate, the copy
``queued`` lets wait behind a running one, a retry waiting for the execution that re-queued it,
and a redelivery watching its first delivery. Given ``MemoryBackend`` whose announcements fail
(a connection dropped by a restart, or a refusal that says the store is set up wrong), when the
execution waits, then:

``retry``  the message goes back to the queue (Celery's ``Retry``, a message published);
``raise``  FAILURE with :class:`LockBackendError`;
``run``    the body runs;
and a misconfigured store fails it with :class:`ConfigurationError` whatever ``on_lock_error``
says. Never the store's own error, and the log names the key and the holder.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List

import pytest
import redis
from celery import Celery
from celery.exceptions import Retry

from celery_singleton_lock import ConfigurationError, LockBackendError, LockedTask
from celery_singleton_lock.calls import headers
from celery_singleton_lock.run.guarded import run_guarded
from celery_singleton_lock.runtime import runtime_for
from celery_singleton_lock.store import Grant, Holder, MemoryBackend
from tests.support.published import published

TASK = "waits.job"
M, OTHER, TOKEN = "message-m", "call-x", "token-of-this-delivery"
DROPPED = redis.exceptions.ConnectionError("Connection closed by server.")
REFUSED = redis.exceptions.ResponseError("NOPERM this user has no permissions to access the 'csl:x' channel")


class FailingWaits(MemoryBackend):
    """Locks as ``MemoryBackend`` keeps them; every wait on an announcement meets ``error``."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    @contextmanager
    def release_events(self, key: str) -> Iterator[Any]:
        with super().release_events(key):
            yield self

    def ask(self) -> bool:
        raise self.error

    def wait(self, timeout: float) -> bool:
        raise self.error

    def listen(self, timeout: float) -> bool:
        raise self.error

    def follow(self, first: bool) -> bool:
        return False  # the waiter's next listen meets the error


#: wait -> (scope, on_locked, how the lock stands and what the message carries)
WAITS = {
    "duplicate": ("running", "wait"),
    "queued copy": ("queued", "wait"),
    "retry after its predecessor": ("running", "skip"),
    "redelivery": ("running", "skip"),
}


def _setting(wait: str, store: MemoryBackend, app: Celery) -> Dict[str, Any]:
    """Set the lock up for ``wait`` on the backend; the message that then starts."""
    task = app.tasks[TASK]
    keys = runtime_for(app).layout.keys(TASK, task.lock_digest((7,), {}), WAITS[wait][0])
    message: Dict[str, Any] = {"id": M, "delivery_info": {"redelivered": wait == "redelivery"}, headers.TOKEN: TOKEN}

    def hold(key: str, token: str, task_id: str, state: str = "running") -> None:
        holder = Holder(task_id=task_id, host="elsewhere", pid=99, since_ms=1, heartbeat_ms=10_000)
        assert isinstance(store.acquire(key, token, 30_000, holder, state=state), Grant)

    if wait in ("duplicate", "queued copy"):
        hold(keys.lock, "token-x", OTHER)
    if wait == "queued copy":  # this message's own place in the queue, behind the running copy
        hold(keys.queued, "token-e", M, state="queued")
        message.update({headers.ENQUEUE_TOKEN: "token-e", headers.ENQUEUE_DIGEST: task.lock_digest((7,), {})})
    if wait == "retry after its predecessor":
        hold(keys.lock, "token-p", M)
        message[headers.AFTER] = "token-p"
    if wait == "redelivery":
        hold(keys.lock, "token-m0", M)
    return message


def _app(wait: str, on_lock_error: str, store: MemoryBackend, ran: List[int]) -> Celery:
    scope, on_locked = WAITS[wait]
    app = Celery("waits", broker="memory://", set_as_current=False)
    app.conf.singleton_lock_backend = store

    @app.task(base=LockedTask, bind=True, name=TASK, shared=False, lock_key=("n",), lock_scope=scope,
              on_locked=on_locked, on_lock_error=on_lock_error, lock_wait_timeout=5, lock_retry_delay=30)
    def job(self: Any, n: int) -> int:
        ran.append(n)
        return n

    return app



@contextmanager
def _execution(wait: str, on_lock_error: str, error: BaseException) -> Iterator[Any]:
    """The task whose message starts into ``wait`` as the store fails, and what its body did."""
    store, ran = FailingWaits(error), []
    app = _app(wait, on_lock_error, store, ran)
    task = app.tasks[TASK]
    task.push_request(**_setting(wait, store, app))
    try:
        yield lambda: run_guarded(task, (7,), {}, lambda: task.run(7)), ran
    finally:
        task.pop_request()
        runtime_for(app).close()


def _holder(wait: str) -> str:
    return OTHER if wait in ("duplicate", "queued copy") else M


@pytest.mark.parametrize("wait", list(WAITS))
def test_with_retry_the_waiting_message_goes_back_to_the_queue(wait, caplog):
    with _execution(wait, "retry", DROPPED) as (execute, ran), published() as sent, \
            caplog.at_level(logging.ERROR, logger="celery_singleton_lock"):
        with pytest.raises(Retry) as raised:
            execute()
    assert ran == [] and len(sent) == 1 and sent[0][headers.RETRIES] == 1
    assert isinstance(raised.value.exc, LockBackendError)
    if wait == "queued copy":  # it keeps its place in the queue
        assert sent[0][headers.ENQUEUE_TOKEN] == "token-e"
    logged = caplog.text
    assert "Redis unavailable while waiting for lock" in logged
    assert f"held by task {_holder(wait)}" in logged and "ConnectionError" in logged


@pytest.mark.parametrize("wait", list(WAITS))
def test_with_raise_the_wait_fails_with_lock_backend_error(wait):
    with _execution(wait, "raise", DROPPED) as (execute, ran):
        with pytest.raises(LockBackendError, match=f"while waiting for lock .* held by task {_holder(wait)}") as raised:
            execute()
    assert ran == [] and raised.value.key
    assert not isinstance(raised.value, redis.exceptions.RedisError)


@pytest.mark.parametrize("wait", list(WAITS))
def test_with_run_the_body_runs(wait):
    with _execution(wait, "run", DROPPED) as (execute, ran):
        assert execute() == 7
    assert ran == [7]


@pytest.mark.parametrize("on_lock_error", ["retry", "raise", "run"])
@pytest.mark.parametrize("wait", list(WAITS))
def test_a_store_set_up_wrong_under_a_wait_is_a_configuration_error(wait, on_lock_error):
    with _execution(wait, on_lock_error, REFUSED) as (execute, ran), published() as sent:
        with pytest.raises(ConfigurationError, match="lacks a permission"):
            execute()
    assert ran == [] and sent == []
