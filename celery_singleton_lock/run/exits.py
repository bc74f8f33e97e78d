"""Every way an execution (or a message) lets go of its lock, and the one function for each.

========================================  ======================  ==========================================
how it ends                               noticed by              released by
========================================  ======================  ==========================================
success, failure, exception, soft time    the pool child, as the  :func:`release_after_run` (compare-and-
limit, ``self.retry()`` (not handed on),  body returns or raises  delete by token, noting a completion for
``Ignore``/``Reject`` from the body                               ``acks_late`` redeliveries, unless the
                                                                  body raised ``Reject`` or ``Retry``)
``self.retry()`` under                    the pool child, as the  :func:`hand_over` (the lock goes back to
``queued_or_running``                     body ends               the queue for the retry to adopt)
asked for the lock but interrupted        the pool child          :func:`abandon` (by token: a no-op if the
(a soft time limit mid-acquire)                                   ask had not taken it)
a duplicate that will not run             the pool child          :meth:`.Attempt.give_up_queue_slot`
(frees its ``queued`` slot)
revoke with ``terminate=True``, hard      the worker's main       :func:`release_for_child` (run lock,
time limit, pool child killed or lost     process (the request)   older key and enqueue lock, by tokens;
                                                                  the child, whose TERM handler raised in
                                                                  the body, leaves it to the main process)
revoked before it started (queued or      the worker's main       :func:`release_enqueue_lock`
waiting for its ETA in the worker)        process (signal/hook)
worker shutdown, pool process exit        the process itself      :func:`release_all` (everything it holds)
paused past ``lock_ttl``                  the heartbeat           nothing to release: ``lock_lost`` is sent
========================================  ======================  ==========================================

Each function logs and carries on when the store does not answer: the TTL frees the lock later.
Each release sends ``lock_released`` with the ``exit`` that ended the execution (:data:`.signals.EXITS`):
:func:`exit_of` names it for the pool child, :func:`exit_for_child` for the main process.
"""

from __future__ import annotations

import logging
from typing import Any, List, Optional, Tuple

from billiard import common as billiard_common
from billiard.exceptions import Terminated
from celery.exceptions import Ignore, Reject, Retry

from ..calls import headers
from .. import signals
from ..calls.describe import describe_call
from ..runtime.lock_runtime import LockRuntime, peek_runtime, runtime_for
from ..calls.limits import call_keys, call_limit, older_key
from ..store import STORE_ERRORS, Completion, Lease, error_text

__all__ = ["release_after_run", "hand_over", "abandon", "release_for_child", "release_enqueue_lock", "release_all",
           "exit_of", "exit_for_child"]

logger = logging.getLogger("celery_singleton_lock")

#: :func:`exit_of` for a pool process its main process terminates mid-task: the main process
#: releases by the request's token, and names the exit (it knows why it terminated it).
TERMINATED = "terminated"


def exit_of(error: Optional[BaseException]) -> str:
    """How a body that raised ``error`` (``None``: it returned) ended, as ``lock_released`` names it."""
    if error is None:
        return "success"
    if isinstance(error, Retry):
        return "retry"
    if isinstance(error, (Ignore, Reject)):
        return "ignore"
    if isinstance(error, (SystemExit, KeyboardInterrupt)):
        # The pool's own TERM handler raised it: the main process is ending this pool process
        # mid-task (revoke with terminate=True, the hard time limit, a cold shutdown).
        return TERMINATED if _terminated_by_pool() else "shutdown"
    return "failure"


def _terminated_by_pool() -> bool:
    fired = getattr(billiard_common, "terminate_handler_fired", None)
    return bool(fired and fired())


def exit_for_child(task_id: Optional[str], error: Any = None, shutdown: bool = False) -> str:
    """How a pool child's execution ended, as the worker's main process sees it: revoked (with
    ``terminate=True``), the worker shutting down, or else the child's death (killed, lost, or
    killed by the pool at the hard time limit), whichever report of it comes first."""
    from celery.worker import state

    if shutdown:
        return "shutdown"
    if isinstance(error, Terminated) or (task_id is not None and task_id in state.revoked):
        return "revoke"
    return "child_death"


def release_after_run(runtime: LockRuntime, lease: Lease, task: Any, task_id: Optional[str],
                      completion: Optional[Completion] = None, exit: str = "success",
                      answer_later: bool = False, hold_back: bool = False) -> Optional[bool]:
    """Stop renewing, compare-and-delete by token, and report what Redis answered.

    With ``answer_later``, where the store can (:class:`~.store.PostsReleases`), the release is
    sent and its answer reported when this process next reads from the store (``None`` then):
    Redis lets go at once all the same, and the worker does not sleep waiting for a reply. In
    a solo worker, with ``hold_back`` (nobody learns of the run's end through Celery), it is sent
    with the next task's acquire, or within a few ms when none comes (:mod:`~.runtime.held_releases`).
    """
    runtime.renewer.drop(lease)
    if exit == TERMINATED:
        return False  # the main process releases it (release_for_child), and says why
    post = getattr(runtime.store, "post_release", None) if answer_later else None
    if post is not None:
        try:
            if post(lease.key, lease.token, completion,
                    lambda answer: _answered(runtime, lease, task, task_id, completion, exit, answer),
                    hold_back=hold_back):
                if hold_back:
                    runtime.held_releases.held()
                return None
        except STORE_ERRORS:
            pass  # nothing or part of it written: asked again below, on another connection
    try:
        released = runtime.store.release(lease.key, lease.token, completion)
    except STORE_ERRORS as exc:
        return _answered(runtime, lease, task, task_id, completion, exit, exc)
    return _answered(runtime, lease, task, task_id, completion, exit, released)


def _answered(runtime: LockRuntime, lease: Lease, task: Any, task_id: Optional[str],
              completion: Optional[Completion], exit: str, answer: Any) -> bool:
    """Report a release's answer (``True``, ``False`` or the store error that stood for it)."""
    try:
        return _report(runtime, lease, task, task_id, completion, exit, answer)
    finally:
        # The lease's last report is made: it and the execution's lock object (``self.lock``) need
        # not keep each other alive, so both go with the execution, not at the next garbage collection.
        lease.context = None


def _report(runtime: LockRuntime, lease: Lease, task: Any, task_id: Optional[str],
            completion: Optional[Completion], exit: str, answer: Any) -> bool:
    if isinstance(answer, BaseException):
        logger.warning("singleton lock: releasing %s failed (%s); it expires within its TTL", lease.key,
                       error_text(answer))
        return False
    released = bool(answer)
    if not released and not lease.lost.is_set():
        released = _lost_to_a_restart(runtime, lease, completion)
    if not released and not lease.lost.is_set():
        # The token was gone before we let go (paused past the TTL): the body ran unguarded
        # for a while and another execution may have run beside it. Say so.
        lease.lost.set()
        runtime.report_lost(lease, "found gone at release: it expired (process paused past lock_ttl?) "
                                   "or was taken over; the other holder's lock was left untouched")
    if signals.lock_released.heard:
        signals.lock_released.send(sender=task, key=lease.key, task_id=task_id, released=released, exit=exit,
                                   description=_description(lease))
    return released


def _description(lease: Lease) -> Optional[str]:
    return getattr(lease.context, "description", None)


def _lost_to_a_restart(runtime: LockRuntime, lease: Lease, completion: Optional[Completion]) -> bool:
    """Whether a lock found gone at release went in a restart of the store that no grant can have
    followed, and is released now. A renewal takes such a lock back under its token while the
    server is young (grants wait longer than that); a body that ended before its heartbeat did so
    ran alone all the same, and is no loss to report."""
    try:
        taken_back = runtime.store.renew([lease.renewal])
        return bool(taken_back and taken_back[0]) and runtime.store.release(lease.key, lease.token, completion)
    except STORE_ERRORS:
        return False


def hand_over(runtime: LockRuntime, lease: Lease, queued_ms: int, task: Any = None,
              task_id: Optional[str] = None) -> None:
    """Turn the lock back into an enqueue lock (same token) for the retry's delivery to adopt."""
    runtime.renewer.drop(lease)
    try:
        handed = runtime.store.requeue(lease.key, lease.token, queued_ms)
    except STORE_ERRORS as exc:
        logger.warning("singleton lock: handing %s over to the retry failed (%s); it expires within its TTL, "
                       "then the retry runs", lease.key, error_text(exc))
        return
    if not handed and not lease.lost.is_set():
        lease.lost.set()
        runtime.report_lost(lease, "found gone when handing it over to the retry: it expired (process paused "
                                   "past lock_ttl?) or was taken over")
    signals.lock_released.send(sender=task, key=lease.key, task_id=task_id, released=handed, exit="retry",
                               description=_description(lease))
    lease.context = None  # its last report (see _answered)


def abandon(runtime: LockRuntime, key: str, token: str) -> None:
    """Give back the run lock an interrupted acquire may have taken."""
    try:
        runtime.store.release(key, token)
    except STORE_ERRORS as exc:
        logger.warning("singleton lock: giving back %s after an interrupted acquire failed (%s); it "
                       "expires within lock_ttl", key, error_text(exc))


def release_for_child(task: Any, task_id: str, fields: Any, args: Any, kwargs: Any, why: str,
                      exit: str = "child_death") -> bool:
    """Release what a pool child held under the request's tokens (harmless if it held nothing).

    ``fields`` is the request's dict: its token, and the enqueue lock's token and digest the
    child may not have adopted yet.
    """
    try:
        runtime = runtime_for(task.app)
        options, argument_key = task.singleton_lock()
        name, digest = options.key_name(task.name), task.lock_digest(args, kwargs)
        limit = call_limit(task.name, options, args, kwargs)
        keys = call_keys(runtime.layout.keys(name, digest, options.scope,
                                             headers.enqueue_digest(fields, lambda: digest)), limit)
        items: List[Tuple[str, ...]] = [(keys.lock, fields[headers.TOKEN], "running")]
        older = ""
        if runtime.guard_old_keys:  # the key older commits name, held beside it (see .guard)
            older = older_key(runtime.layout, name, argument_key.old_digest(args, kwargs), options.scope, limit,
                              keys.lock)
            if older:
                items.append((older, fields[headers.TOKEN], "running"))
        enqueue_token = headers.token(fields, headers.ENQUEUE_TOKEN)
        if enqueue_token:  # the child may have died before adopting it (while still queued: see release_enqueue_lock)
            items.append((keys.queued, enqueue_token, "queued"))
        released = any(runtime.store.release_many(items))
    except STORE_ERRORS as exc:
        logger.warning("singleton lock: %s[%s]: release after %s failed (%s); the lock expires within "
                       "its TTL", task.name, task_id, why, error_text(exc))
        return False
    except Exception:
        logger.exception("singleton lock: %s[%s]: release after %s failed", task.name, task_id, why)
        return False
    if released:
        logger.info("singleton lock: %s[%s]: released %s from the worker's main process after %s",
                    task.name, task_id, f"{keys.lock} and {older}" if older else keys.lock, why)
        description = describe_call(argument_key, args, kwargs) if runtime.describe else None
        signals.lock_released.send(sender=task, key=keys.lock, task_id=task_id, released=True, exit=exit,
                                   description=description)
    return released


def release_enqueue_lock(task: Any, task_id: Any, fields: Any, why: str) -> bool:
    """Release the enqueue lock a message names, by the token it carries (no-op without one).

    ``fields`` is the message's request (its headers, ``args`` and ``kwargs``; anything with
    ``get``). The lock is the one the message's headers name, not one derived again here.
    """
    token = headers.token(fields, headers.ENQUEUE_TOKEN)
    if not token:
        return False
    try:
        runtime = runtime_for(task.app)
        digest = headers.enqueue_digest(fields, lambda: task.lock_digest(fields.get("args") or (),
                                                                           fields.get("kwargs") or {}))
        options = task.singleton_lock()[0]
        key = call_keys(runtime.layout.keys(options.key_name(task.name), digest, options.scope),
                        call_limit(task.name, options, fields.get("args") or (), fields.get("kwargs") or {})).queued
        # Only while it is still queued: under queued_or_running a self.retry() message carries the
        # running token of the execution that sent it, whose lock this must never delete.
        released = runtime.store.release(key, token, state="queued")
    except Exception as exc:
        logger.warning("singleton lock: %s[%s]: releasing enqueue lock (%s) failed (%s); it expires within "
                       "lock_queue_ttl", task.name, task_id, why, error_text(exc))
        return False
    if released:
        logger.info("singleton lock: %s[%s]: released enqueue lock %s (%s)", task.name, task_id, key, why)
    return released


def release_all(app: Any, why: str) -> None:
    """Release everything this process holds for ``app`` and stop its heartbeat."""
    runtime = peek_runtime(app)
    if runtime is None:
        return
    try:
        leases = runtime.renewer.release_all()
    except Exception as exc:
        logger.warning("singleton lock: releasing held locks at %s failed (%s); they expire within "
                       "their TTL", why, error_text(exc))
        return
    if leases:
        logger.info("singleton lock: released %d held lock(s) at %s", len(leases), why)
    for lease in leases:
        handle = lease.context
        task_name = getattr(handle, "task_name", None)
        sender = getattr(handle, "sender", None) or (app.tasks.get(task_name) if task_name else None)
        signals.lock_released.send(sender=sender, key=lease.key,
                                   task_id=getattr(handle, "task_id", None), released=True, exit="shutdown",
                                   description=_description(lease))
    runtime.renewer.close(timeout=1.0)
