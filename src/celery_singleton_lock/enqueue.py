"""Take the lock in the publishing process, before a ``queued*`` task's message exists.

``apply_async`` (and so ``delay``, signatures, groups, chains and beat, which all
end in it when the task class is at hand) takes an *enqueue lock* with
``lock_queue_ttl``, then publishes the message with the lock's token in a
header; the worker adopts the lock by that token when it starts the task.

What a duplicate does at enqueue time:

``skip``  nothing is published; the caller gets the ``AsyncResult`` of the copy
          that holds the lock, so ``.get()`` waits for the run that will happen. A
          caller that chose the id itself (groups, chains, ``task_id=``) finds that
          id SUCCESS with result ``None``, as for a duplicate skipped at run time;
          the rest of a chain whose head was skipped is not published either.
``raise`` :class:`~.exceptions.LockedError` to the caller; nothing is published.
``retry`` the message is published *without* an enqueue lock; the worker then
          re-queues it until the lock is free, so the call runs after the holder.
``wait``  (``queued`` scope only) as ``skip`` at enqueue: a copy is already
          queued behind the running one; at run time that copy waits for it.

When Redis is unreachable, ``on_lock_error="raise"`` raises to the caller and
publishes nothing; otherwise the message is published without an enqueue lock
and the worker guards the run (and applies ``on_lock_error`` itself).
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Sequence

from celery import states
from celery.utils import uuid

from . import signals
from .exceptions import LockBackendError, LockedError
from .guard import BACKEND_ERRORS, ENQUEUE_TOKEN_HEADER, LIBRARY_HEADERS, RETRIES_HEADER
from .runtime import runtime_for
from .store import Conflict, Holder
from .store.client import new_token

if TYPE_CHECKING:  # pragma: no cover
    from .task import LockedTask

__all__ = ["publish_locked"]

logger = logging.getLogger("celery_singleton_lock")

Publish = Callable[[str, Optional[Dict[str, Any]]], Any]


def _is_library_republish(headers: Optional[Mapping[str, Any]]) -> bool:
    # A lock retry re-publishes with our own headers: it already owns (or needs no) enqueue lock.
    return bool(headers) and (ENQUEUE_TOKEN_HEADER in headers or RETRIES_HEADER in headers)  # type: ignore


def publish_locked(task: "LockedTask", args: Sequence[Any], kwargs: Mapping[str, Any], task_id: Optional[str],
                   headers: Optional[Mapping[str, Any]], countdown: Optional[float], publish: Publish) -> Any:
    """Publish one call of a ``queued*`` task under its enqueue lock, or resolve the duplicate."""
    options, argument_key = task.singleton_lock()
    digest = argument_key(args, kwargs)  # raises before anything is locked or published
    current = task.lock if task.request.id and task.request.id == task_id else None
    if current is not None:
        return _republish_own(task, current, options, countdown, publish)
    if _is_library_republish(headers):
        return publish(task_id or uuid(), {k: headers[k] for k in LIBRARY_HEADERS if k in headers})  # type: ignore

    runtime = runtime_for(task.app)
    key = runtime.layout.enqueue(task.name, digest, options.scope)
    requested_id, task_id = task_id, task_id or uuid()
    token = new_token()
    holder = Holder(task_id=task_id, host=runtime.hostname, pid=os.getpid(), since_ms=int(time.time() * 1000),
                    heartbeat_ms=int(options.heartbeat * 1000))
    try:
        outcome = runtime.store.acquire(key, runtime.layout.fence(task.name), token, int(options.queue_ttl * 1000),
                                        holder, state="queued")
    except BACKEND_ERRORS as exc:
        if options.on_lock_error == "raise":
            raise LockBackendError(f"task {task.name}: cannot reach Redis to take enqueue lock {key}: {exc}; "
                                   "nothing was published", task=task.name, key=key) from exc
        logger.warning("singleton lock: %s: Redis unavailable at enqueue (%r); publishing without an enqueue "
                       "lock, the worker guards the run", task.name, exc)
        return publish(task_id, None)
    if isinstance(outcome, Conflict):
        return _duplicate_at_enqueue(task, key, task_id, outcome, options.on_locked, publish, requested_id)
    try:
        return publish(task_id, {ENQUEUE_TOKEN_HEADER: token})
    except BaseException:
        try:
            runtime.store.release(key, token)  # nothing was queued: nothing may stay locked
        except BACKEND_ERRORS as exc:
            logger.warning("singleton lock: %s: releasing %s after a failed publish failed (%r)", task.name, key, exc)
        raise


def _duplicate_at_enqueue(task: "LockedTask", key: str, task_id: str, conflict: Conflict, policy: str,
                          publish: Publish, requested_id: Optional[str]) -> Any:
    logger.info("singleton lock: %s: call at enqueue is a duplicate (%s): key %s held by %s (%s)",
                task.name, policy, key, conflict.task_id or "?", conflict.state or "?")
    signals.lock_conflict.send(sender=task, key=key, task_id=task_id, holder=conflict.task_id, action=policy,
                               at="enqueue")
    if policy == "raise":
        raise LockedError(f"task {task.name}: lock {key} is held by task {conflict.task_id or '?'} "
                          f"({conflict.state or 'unknown state'}); nothing was published",
                          task=task.name, key=key, holder=conflict.task_id)
    if policy == "retry":
        return publish(task_id, None)
    if requested_id and requested_id != conflict.task_id:
        # The caller (a group, a chain, an explicit task_id) already holds a result for this id:
        # it ends as a skipped duplicate does at run time, instead of PENDING forever.
        _store_skipped(task, requested_id)
    return task.AsyncResult(conflict.task_id)


def _store_skipped(task: "LockedTask", task_id: str) -> None:
    try:
        task.backend.store_result(task_id, None, states.SUCCESS)
    except NotImplementedError:  # no result backend configured: nobody waits on it
        pass


def _republish_own(task: "LockedTask", current: Any, options: Any, countdown: Optional[float],
                   publish: Publish) -> Any:
    """The holder re-queues itself (``self.retry()``): the lock goes with the message."""
    if options.scope != "queued_or_running":
        return publish(current.task_id, None)  # ``queued``: the run lock ends with this execution
    runtime = runtime_for(task.app)
    ttl_ms = int((options.queue_ttl + (countdown or 0)) * 1000)
    runtime.renewer.drop(current.lease)  # a renewal must not shorten the queued TTL
    if runtime.store.requeue(current.key, current.token, ttl_ms):
        current.requeued = True
        try:
            return publish(current.task_id, {ENQUEUE_TOKEN_HEADER: current.token})
        except BaseException:
            current.requeued = False  # the finishing execution releases it
            raise
    return publish(current.task_id, None)
