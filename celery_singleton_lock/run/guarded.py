"""Run one task execution under its lock: acquire, apply the duplicate policy, hold, let go.

This is the run-time half of the library, called from ``LockedTask.__call__``
inside Celery's tracer, so whatever it raises is the task's own outcome: Celery's
``Ignore`` stores nothing, ``Retry`` marks the task for retry, an error ends it in
FAILURE, and a plain return is SUCCESS. The policy (:mod:`.policy`) decides; this
module only enacts the decision.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, NoReturn, Optional, Sequence

from celery.exceptions import Ignore

from ..calls import headers
from . import guard, newest
from .. import signals
from .attempt import Attempt
from .decisions import Decision, Fail, Ignored, Requeue, Run, Skip, Superseded
from ..exceptions import ConfigurationError, LockBackendError
from .exits import abandon, exit_of, hand_over, release_after_run
from .handle import ExecutionLock
from .policy import decide
from .outcome import record_superseded
from .requeue import requeue
from ..config.settings import named_as_written
from ..store import STORE_ERRORS, Conflict, Lease, error_text, redact
from .taken import kept_by

__all__ = ["run_guarded", "in_own_execution", "lock_hidden", "current_lock", "HANDLE_ATTR"]

logger = logging.getLogger("celery_singleton_lock")

#: Request-context attribute holding the execution's :class:`ExecutionLock`.
HANDLE_ATTR = "_singleton_lock_handle"
#: Request-context attribute set while the request's execution runs under :func:`run_guarded`.
RUNNING_ATTR = "_singleton_lock_running"


def run_guarded(task: Any, args: Sequence[Any], kwargs: Mapping[str, Any], body: Callable[[], Any]) -> Any:
    """Run ``body`` while holding the call's lock, or do what the duplicate policy decides."""
    request = task.request
    setattr(request, RUNNING_ATTR, True)
    try:
        return _run_guarded(task, request, args, kwargs, body)
    finally:
        setattr(request, RUNNING_ATTR, False)


def in_own_execution(request: Any) -> bool:
    """Whether ``request`` is (or, from Celery 5.5, was copied from) one whose execution runs now:
    a call of the task then is its body calling it as a plain function."""
    return bool(getattr(request, RUNNING_ATTR, False))


@contextmanager
def lock_hidden(request: Any) -> Iterator[None]:
    """For a plain call inside an execution: the request Celery pushes for it (a copy of this one
    from Celery 5.5) holds no lock, and the execution keeps its own."""
    handle = getattr(request, HANDLE_ATTR, None)
    setattr(request, HANDLE_ATTR, None)
    try:
        yield
    finally:
        setattr(request, HANDLE_ATTR, handle)


def _run_guarded(task: Any, request: Any, args: Sequence[Any], kwargs: Mapping[str, Any],
                 body: Callable[[], Any]) -> Any:
    skipped_for = headers.skipped_for(request)
    if skipped_for:
        # A duplicate at enqueue, published only so that what follows it (a chain, a chord) goes on.
        logger.info("singleton lock: %s[%s] was a duplicate at enqueue (skip): the lock was held by %s",
                    task.name, request.id, skipped_for)
        return None
    attempt = Attempt(task, args, kwargs, request)
    if headers.redelivered(attempt.request) and attempt.already_ran():
        attempt.conflict(None, "ignore")
        raise Ignore()  # a redelivery of a message whose first delivery ran to the end: store nothing
    ended = newest.before_run(attempt)  # a newer call of the key took this one's place
    if ended is not None:
        return _enact(attempt, ended, args, kwargs)
    try:
        outcome, started = attempt.acquire()
    except STORE_ERRORS as exc:
        step = "adopt" if attempt.enqueue_token else "acquire"  # adopt clears the token once answered
        return _store_unavailable(attempt, args, kwargs, body, exc, step)
    except BaseException:
        abandon(attempt.runtime, attempt.key, attempt.token)  # interrupted (a soft time limit): maybe ours
        raise
    if isinstance(outcome, Conflict):
        try:
            decision = decide(attempt, outcome)
        except STORE_ERRORS as exc:  # the store failed under a wait: as at acquire, on_lock_error decides
            return _store_unavailable(attempt, args, kwargs, body, exc, "wait", outcome)
        except BaseException:
            abandon(attempt.runtime, attempt.key, attempt.token)  # interrupted while waiting or re-asking
            raise
        if not isinstance(decision, Run):
            return _enact(attempt, decision, args, kwargs)
        outcome, started = decision.grant, decision.started
    try:
        older_holder = guard.take(attempt)  # an older worker may run this call under its older key
    except STORE_ERRORS as exc:
        _give_back(attempt)
        return _store_unavailable(attempt, args, kwargs, body, exc, "acquire", key=attempt.guard)
    except BaseException:
        _give_back(attempt)
        raise
    if older_holder is not None:
        abandon(attempt.runtime, attempt.key, attempt.token)
        return _enact(attempt, guard.refusal(attempt, older_holder), args, kwargs)
    try:
        ended = newest.claim_run(attempt)
    except STORE_ERRORS as exc:
        _give_back(attempt)
        return _store_unavailable(attempt, args, kwargs, body, exc, "claim")
    if ended is not None:
        _give_back(attempt)  # superseded while it asked: not its run
        return _enact(attempt, ended, args, kwargs)
    return _hold(attempt, started, body)


def _give_back(attempt: Attempt) -> None:
    """Give back what an ask that will not run took: the older key, then the run lock."""
    guard.let_go(attempt)
    abandon(attempt.runtime, attempt.key, attempt.token)


def _enact(attempt: Attempt, decision: Decision, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """The task's outcome for a duplicate: SUCCESS ``None``, FAILURE, re-queued, or nothing stored."""
    if isinstance(decision, Superseded):  # SUCCESS None too, marked so in its meta (see .outcome)
        record_superseded(attempt.task, attempt.keys.lock, decision.by)
        return None
    if isinstance(decision, Skip):
        return None  # SUCCESS with result None: the caller's .get() returns
    if isinstance(decision, Fail):
        raise decision.error
    if isinstance(decision, Ignored):
        raise Ignore()
    assert isinstance(decision, Requeue)
    raise requeue(attempt, args, kwargs, decision.conflict, counted=decision.counted, countdown=decision.countdown)


def _hold(attempt: Attempt, started: float, body: Callable[[], Any]) -> Any:
    runtime, options = attempt.runtime, attempt.options
    lease = Lease(attempt.key, attempt.token, options.ttl, options.heartbeat, confirmed_at=started,
                  holder=attempt.holder)
    handle = ExecutionLock(attempt.key, attempt.token, attempt.ask_fence, attempt.task.name, attempt.request.id,
                           lease, attempt.description)
    lease.context = handle
    raised: Optional[BaseException] = None
    older = None
    try:  # from here on, whatever happens, the lock is let go of
        runtime.renewer.hold(lease)
        older = guard.lease(attempt, started, handle)
        setattr(attempt.request, HANDLE_ATTR, handle)
        if signals.lock_acquired.heard:
            signals.lock_acquired.send(sender=attempt.task, key=attempt.key, task_id=attempt.request.id, lock=handle,
                                       acquire_seconds=time.monotonic() - started, description=attempt.description)
        return body()
    except BaseException as exc:
        raised = exc
        raise
    finally:
        setattr(attempt.request, HANDLE_ATTR, None)
        guard.let_go(attempt, older)
        if handle.hand_over_ms is not None:
            # self.retry() under queued_or_running: the lock goes to the retry's message.
            hand_over(runtime, lease, handle.hand_over_ms, attempt.task, attempt.request.id)
        else:
            release_after_run(runtime, lease, attempt.task, attempt.request.id,
                              attempt.completion(time.monotonic() - started, raised), exit_of(raised),
                              answer_later=_answer_later(attempt.request),
                              hold_back=raised is None and runtime.held_releases.holds_back()
                              and _unobserved(attempt.task, attempt.request))


def _answer_later(request: Any) -> bool:
    """Whether the release's answer may come after the task: not in an eager run, nor where a
    receiver of ``lock_released`` or ``lock_lost`` is connected (it hears at once)."""
    return not (request.is_eager or signals.lock_released.receivers or signals.lock_lost.receivers)


def _unobserved(task: Any, request: Any) -> bool:
    """Whether nobody learns of this run's end through Celery: no result stored, nothing linked to
    it. Only then may its release wait a few ms for the next task's acquire: a stored result or a
    chain's next link must never find the lock still held."""
    return (bool(task.ignore_result) and getattr(request, "ignore_result", None) is not False
            and not (request.callbacks or request.errbacks or request.chain or request.chord or request.group))


def _store_unavailable(attempt: Attempt, args: Sequence[Any], kwargs: Mapping[str, Any], body: Callable[[], Any],
                       exc: BaseException, step: str, waited_for: Optional[Conflict] = None, key: str = "") -> Any:
    """The store did not grant or refuse the lock (at the ask, or under a wait for ``waited_for``):
    an outage follows ``on_lock_error``; a misconfigured lock store fails the task with
    :class:`ConfigurationError`, whatever ``on_lock_error`` says. ``key``: the key asked for, when
    not the run lock (the older key, :mod:`.guard`)."""
    task, task_id, policy = attempt.task.name, attempt.request.id, attempt.options.on_lock_error
    key = key or attempt.key
    problem = attempt.store_failed(exc, step)
    if problem is not None:
        _misconfigured(attempt, exc, problem, key)
    doing = (f"waiting for lock {key} held by {kept_by(waited_for)}" if waited_for is not None
             else f"taking lock {key}")
    logger.error("singleton lock: %s[%s]: Redis unavailable while %s (%s); on_lock_error=%s",
                 task, task_id, doing, error_text(exc), policy)
    if policy == "run":
        return body()
    error = LockBackendError(f"task {task}[{task_id}]: cannot reach Redis while {doing}: {error_text(exc)}",
                             task=task, key=key)
    if policy == "raise":
        attempt.give_up_queue_slot()
        raise error from exc
    raise requeue(attempt, args, kwargs, None, error)


def _misconfigured(attempt: Attempt, exc: BaseException, problem: str, key: str) -> NoReturn:
    task, task_id = attempt.task.name, attempt.request.id
    problem = named_as_written(attempt.task.app.conf, problem)
    url = redact(attempt.runtime.settings.url)
    logger.error("singleton lock: %s[%s]: the lock store %s refused lock %s, so the task fails without "
                 "running (on_lock_error does not apply to a misconfiguration): %s", task, task_id, url,
                 key, problem)
    attempt.give_up_queue_slot()
    raise ConfigurationError(f"task {task}[{task_id}]: the lock store {url} refused lock {key}: "
                             f"{problem}", task=task, key=key) from exc


def current_lock(request: Any) -> Optional[ExecutionLock]:
    """The lock held by the execution ``request`` belongs to (``None`` when it holds none)."""
    return getattr(request, HANDLE_ATTR, None)
