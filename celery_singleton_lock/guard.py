"""Run one task execution under its lock: acquire, apply the duplicate policy, release.

This is the run-time half of the library, called from ``LockedTask.__call__``
inside Celery's tracer, so whatever it raises is handled as the task's own
outcome: ``Ignore`` stores nothing, ``Retry`` marks the task for retry,
``LockedError`` ends it in FAILURE, and a plain return is SUCCESS.
"""

from __future__ import annotations

import logging
import os
import random
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

import redis
from celery.exceptions import Ignore, Retry

from . import signals
from .arguments import is_digest
from .exceptions import ConfigurationError, LockBackendError, LockedError
from .handle import ExecutionLock
from .runtime import LockRuntime, runtime_for
from .store import Conflict, Grant, Holder, Lease
from .store.client import Completion, new_token
from .store.connect import redact
from .store.errors import error_text, permanent_problem

if TYPE_CHECKING:  # pragma: no cover
    from .task import LockedTask

__all__ = ["run_guarded", "TOKEN_HEADER", "ENQUEUE_TOKEN_HEADER", "ENQUEUE_DIGEST_HEADER", "RETRIES_HEADER",
           "AFTER_HEADER", "SKIPPED_HEADER", "LIBRARY_HEADERS", "HANDLE_ATTR", "jittered", "release",
           "library_headers", "enqueue_digest"]

logger = logging.getLogger("celery_singleton_lock")

#: Message header with the per-delivery token chosen by the worker's main process.
TOKEN_HEADER = "singleton_lock_token"
#: Message header with the token of the enqueue lock taken by ``apply_async`` (``queued*`` scopes).
ENQUEUE_TOKEN_HEADER = "singleton_lock_enqueue_token"
#: Message header with the argument digest of that enqueue lock: the worker adopts and releases
#: the lock the message names, whatever digest it would derive from the arguments it received.
ENQUEUE_DIGEST_HEADER = "singleton_lock_enqueue_digest"
#: Message header counting re-queues caused by the lock (kept apart from ``retries``).
RETRIES_HEADER = "singleton_lock_retries"
#: Message header of a ``self.retry()`` message: the token of the execution that re-queued the
#: task. That execution may still be finishing when the retry starts; the retry waits for it.
AFTER_HEADER = "singleton_lock_after"
#: Message header of a call skipped at enqueue but published for what follows it (a chain, a
#: chord): the holder's task id. The worker skips it without taking a lock.
SKIPPED_HEADER = "singleton_lock_skipped"
#: Every header the library writes. Celery copies a request's custom headers into
#: ``self.retry()`` messages, so publishing code strips these and sets its own.
LIBRARY_HEADERS = (TOKEN_HEADER, ENQUEUE_TOKEN_HEADER, ENQUEUE_DIGEST_HEADER, RETRIES_HEADER, AFTER_HEADER,
                   SKIPPED_HEADER)
#: Request-context attribute holding the execution's :class:`ExecutionLock`.
HANDLE_ATTR = "_singleton_lock_handle"

#: Errors meaning "Redis could not answer", as opposed to a bug.
BACKEND_ERRORS = (redis.RedisError, OSError)


def library_headers(inherited: Optional[Mapping[str, Any]], ours: Mapping[str, Any]) -> Dict[str, Any]:
    """A message's headers: the caller's (less any of ours Celery copied from a request), then ours."""
    merged = {k: v for k, v in (inherited or {}).items() if k not in LIBRARY_HEADERS}
    merged.update(ours)
    return merged


def enqueue_digest(fields: Any, derive: Callable[[], str]) -> str:
    """The digest of the enqueue lock a message carries (``fields``: its headers, or a request
    made of them). ``derive()`` computes one from the arguments, for a message that does not
    name it (published by an earlier version of the library)."""
    named = fields.get(ENQUEUE_DIGEST_HEADER)
    return named if is_digest(named) else derive()


def jittered(delay: float) -> float:
    """A countdown spread over [delay/2, 3*delay/2] so retried duplicates do not stampede."""
    return delay * (0.5 + random.random())


class _Attempt:
    """What one execution needs to take its lock; built once per execution."""

    __slots__ = ("task", "request", "options", "runtime", "key", "queued_key", "queued_digest", "fence_key",
                 "token", "enqueue_token", "after", "holder")

    def __init__(self, task: "LockedTask", args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        options, argument_key = task.singleton_lock()
        runtime = runtime_for(task.app)
        request = task.request
        digest = argument_key(args, kwargs)
        self.task = task
        self.request = request
        self.options = options
        self.runtime = runtime
        self.key = runtime.layout.lock(task.name, digest)
        self.fence_key = runtime.layout.fence(task.name)
        self.token = request.get(TOKEN_HEADER) or new_token()
        # An enqueue lock handed over by the publisher; None when the message came without one
        # (send_task by name, a retry, eager mode) or once it turned out not to be ours any more.
        self.enqueue_token = request.get(ENQUEUE_TOKEN_HEADER) if options.at_enqueue else None
        # The enqueue lock is the one the message names (the publisher derived it from what this
        # worker receives, so the two agree; if they did not, the named one is still adopted).
        self.queued_digest = enqueue_digest(request, lambda: digest) if self.enqueue_token else digest
        self.queued_key = (runtime.layout.enqueue(task.name, self.queued_digest, options.scope)
                           if options.at_enqueue else self.key)
        # The token of the execution whose self.retry() published this message, if one did.
        self.after = request.get(AFTER_HEADER)
        self.holder = Holder(
            task_id=request.id or "", host=runtime.hostname, pid=os.getpid(),
            since_ms=int(time.time() * 1000), heartbeat_ms=int(options.heartbeat * 1000))

    def acquire(self) -> Tuple[Union[Grant, Conflict], float]:
        """Adopt the enqueue lock this message carries, else take the run lock directly."""
        started = time.monotonic()
        store, ttl_ms = self.runtime.store, int(self.options.ttl * 1000)
        if self.enqueue_token:
            outcome = store.adopt(self.queued_key, self.key, self.fence_key, self.enqueue_token, self.token,
                                  ttl_ms, self.holder)
            if outcome is not None:
                if isinstance(outcome, Grant) or (self.queued_key == self.key and not outcome.same_token):
                    # Adopted, or (one key) taken over by someone else; a holder still running
                    # under our enqueue token is the self.retry() that will hand it to us.
                    self.enqueue_token = None
                return outcome, started
            self.enqueue_token = None  # expired or released while queued: guard at run time
        return store.acquire(self.key, self.fence_key, self.token, ttl_ms, self.holder), started

    def abandon(self) -> None:
        """Give back the run lock an interrupted acquire may have taken (by token: a no-op if it did not)."""
        try:
            self.runtime.store.release(self.key, self.token)
        except BACKEND_ERRORS as exc:
            logger.warning("singleton lock: giving back %s after an interrupted acquire failed (%s); it "
                           "expires within lock_ttl", self.key, error_text(exc))

    @property
    def notes_completions(self) -> bool:
        """Whether releases note that this task ran to the end: only ``acks_late`` messages are
        handed out again while their first delivery runs (and a quorum store notes nothing)."""
        return bool(self.task.acks_late) and getattr(self.runtime.store, "records_completions", False)

    def already_ran(self) -> bool:
        """Whether an earlier delivery of this message ran to the end (noted at its release)."""
        if not self.notes_completions:
            return False
        try:
            return self.runtime.store.completed(self.runtime.layout.done(self.task.name), self.request.id)
        except BACKEND_ERRORS:
            return False  # the lock still keeps two copies from running at once

    def completion(self, held_for: float) -> Optional[Completion]:
        """What the release notes for later redeliveries of this message, if one may come.

        The release notes the task id when a redelivered copy met the lock, when this delivery
        is itself a redelivery, or when it ran long enough for the broker's visibility timeout to
        hand the message out again (``lock_queue_ttl`` is how long it is remembered).
        """
        if not self.notes_completions:
            return None
        visibility = self.runtime.visibility_timeout
        always = _redelivered(self.request) or (visibility is not None and held_for >= visibility / 2)
        return (self.runtime.layout.done(self.task.name), self.request.id or "", int(self.options.queue_ttl * 1000),
                bool(always))

    @property
    def holds_queue_slot(self) -> bool:
        """Whether this is the copy that ``queued`` lets wait behind a running one."""
        return bool(self.enqueue_token) and self.queued_key != self.key

    def follows(self, conflict: Conflict) -> bool:
        """Whether the lock is held (or was, a moment ago) by the execution that re-queued this message."""
        if not self.after or conflict.task_id != self.request.id:
            return False
        try:
            info = self.runtime.store.holder(self.key)
        except BACKEND_ERRORS:
            return False
        return info is None or info.get("token") == self.after

    def waits_turn(self, conflict: Conflict, behind: str) -> None:
        """Say that this copy runs after the holder: it is no duplicate (no ``lock_conflict``)."""
        logger.info("singleton lock: %s[%s] waits its turn behind %s: key %s held by %s on %s pid %s",
                    self.task.name, self.request.id, behind, self.key, conflict.task_id or "?",
                    conflict.host or "?", conflict.pid if conflict.pid is not None else "?")

    def give_up_queue_slot(self) -> None:
        """A ``queued`` copy that will not run frees its place in the queue."""
        if self.enqueue_token:
            try:
                self.runtime.store.release(self.queued_key, self.enqueue_token)
            except BACKEND_ERRORS as exc:
                logger.warning("singleton lock: freeing queue slot %s failed (%s); it expires within "
                               "lock_queue_ttl", self.queued_key, error_text(exc))
            self.enqueue_token = None

    def conflict(self, conflict: Conflict, action: str) -> None:
        logger.info("singleton lock: %s[%s] is a duplicate (%s): key %s held by %s on %s pid %s",
                    self.task.name, self.request.id, action, self.key, conflict.task_id or "?",
                    conflict.host or "?", conflict.pid if conflict.pid is not None else "?")
        signals.lock_conflict.send(sender=self.task, key=self.key, task_id=self.request.id,
                                   holder=conflict.task_id, action=action, at="run")


def run_guarded(task: "LockedTask", args: Sequence[Any], kwargs: Mapping[str, Any],
                body: Callable[[], Any]) -> Any:
    """Run ``body`` while holding the call's lock, or deal with the duplicate."""
    skipped_for = task.request.get(SKIPPED_HEADER)
    if skipped_for:
        # A duplicate at enqueue, published only so that what follows it (a chain, a chord) goes on.
        logger.info("singleton lock: %s[%s] was a duplicate at enqueue (skip): the lock was held by %s",
                    task.name, task.request.id, skipped_for)
        return None
    attempt = _Attempt(task, args, kwargs)
    if _redelivered(attempt.request) and attempt.already_ran():
        attempt.conflict(Conflict(task_id=attempt.request.id or "", host="", pid=None, since_ms=None, pttl_ms=0,
                                  heartbeat_ms=None, state="done"), "ignore")
        raise Ignore()  # a redelivery of a message whose first delivery ran to the end: store nothing
    try:
        outcome, started = attempt.acquire()
    except BACKEND_ERRORS as exc:
        step = "adopt" if attempt.enqueue_token else "acquire"  # adopt clears the token once answered
        return _backend_unavailable(attempt, args, kwargs, body, exc, step)
    except BaseException:
        attempt.abandon()  # interrupted while asking (a soft time limit): the lock may be ours
        raise
    if isinstance(outcome, Conflict):
        try:
            outcome, started = _duplicate(attempt, outcome, args, kwargs)
        except _Skip:
            return None  # SUCCESS with result None: the caller's .get() returns
        except _DECIDED:
            raise
        except BaseException:
            attempt.abandon()  # interrupted while waiting or re-asking
            raise
    return _hold(attempt, outcome, started, body)


def _hold(attempt: _Attempt, grant: Grant, started: float, body: Callable[[], Any]) -> Any:
    runtime, options = attempt.runtime, attempt.options
    lease = Lease(attempt.key, attempt.token, options.ttl, options.heartbeat, confirmed_at=started)
    handle = ExecutionLock(attempt.key, attempt.token, grant.fence, attempt.task.name,
                           attempt.request.id, lease)
    lease.context = handle
    try:  # from here on, whatever happens, the lock is let go of
        runtime.renewer.hold(lease)
        setattr(attempt.request, HANDLE_ATTR, handle)
        signals.lock_acquired.send(sender=attempt.task, key=attempt.key, task_id=attempt.request.id, lock=handle)
        return body()
    finally:
        setattr(attempt.request, HANDLE_ATTR, None)
        if handle.hand_over_ms is not None:
            # self.retry() under queued_or_running: the lock goes to the retry's message.
            _hand_over(runtime, lease, handle.hand_over_ms)
        else:
            # In a worker, the reply to the release is read off the task's path (Redis applies
            # the release at once). Eager runs wait, so the caller sees the lock gone on return,
            # and so does a process where someone listens for the report, so it comes at once.
            wait = bool(attempt.request.is_eager) or _report_awaited()
            release(runtime, lease, attempt.task, attempt.request.id, wait=wait,
                    completion=attempt.completion(time.monotonic() - started))


def _hand_over(runtime: LockRuntime, lease: Lease, queued_ms: int) -> None:
    """Turn the lock back into an enqueue lock (same token) for the retry's delivery to adopt."""
    runtime.renewer.drop(lease)
    try:
        handed = runtime.store.requeue(lease.key, lease.token, queued_ms)
    except BACKEND_ERRORS as exc:
        logger.warning("singleton lock: handing %s over to the retry failed (%s); it expires within its TTL, "
                       "then the retry runs", lease.key, error_text(exc))
        return
    if not handed and not lease.lost.is_set():
        lease.lost.set()
        runtime.report_lost(lease, "found gone when handing it over to the retry: it expired (process paused "
                                   "past lock_ttl?) or was taken over")


def _redelivered(request: Any) -> bool:
    """Whether the broker says it handed this message out before (kombu's Redis transport and AMQP do)."""
    return bool((request.delivery_info or {}).get("redelivered"))


def _report_awaited() -> bool:
    """Whether a receiver is connected to the signals that a release's reply sends."""
    return bool(signals.lock_released.receivers or signals.lock_lost.receivers)


def release(runtime: LockRuntime, lease: Lease, task: Any, task_id: Optional[str], *,
            wait: bool = True, completion: Optional[Completion] = None) -> Optional[bool]:
    """Stop renewing and compare-and-delete by token.

    With ``wait=False`` the release is sent and applied by Redis at once, but its reply
    (was the token still ours?) is read later, off the task's path (by the next acquire, or
    within a heartbeat period by the renewal thread); the report follows then.
    A failure is logged: the TTL frees the lock later.
    """
    store = runtime.store
    if not wait and hasattr(store, "release_nowait"):
        runtime.renewer.drop(lease, wake=False)
        try:
            store.release_nowait(lease.key, lease.token,
                                 lambda reply: _released(runtime, lease, task, task_id, reply), completion)
        except BACKEND_ERRORS as exc:
            _released(runtime, lease, task, task_id, exc)
        # No wake-up per task: the reply is read by the next acquire (it has arrived by then),
        # or by the heartbeat thread at its next tick when the process goes idle.
        return None
    runtime.renewer.drop(lease)
    try:
        reply: Any = (store.release(lease.key, lease.token, completion) if completion is not None
                      else store.release(lease.key, lease.token))
    except BACKEND_ERRORS as exc:
        reply = exc
    return _released(runtime, lease, task, task_id, reply)


def _released(runtime: LockRuntime, lease: Lease, task: Any, task_id: Optional[str], reply: Any) -> bool:
    """Report what Redis answered to a release."""
    if isinstance(reply, BaseException):
        logger.warning("singleton lock: releasing %s failed (%s); it expires within its TTL", lease.key,
                       error_text(reply))
        return False
    released = bool(reply)
    if not released and not lease.lost.is_set():
        # The token was gone before we let go (paused past the TTL): the body ran unguarded
        # for a while and another execution may have run beside it. Say so.
        lease.lost.set()
        runtime.report_lost(lease, "found gone at release: it expired (process paused past lock_ttl?) "
                                   "or was taken over; the other holder's lock was left untouched")
    signals.lock_released.send(sender=task, key=lease.key, task_id=task_id, released=released)
    return released


# -- duplicates --------------------------------------------------------------------------------
def _duplicate(attempt: _Attempt, conflict: Conflict, args: Sequence[Any],
               kwargs: Mapping[str, Any]) -> Tuple[Grant, float]:
    """Resolve a conflict into a grant, or raise what the task's outcome must be."""
    if attempt.follows(conflict):
        outcome = _after_predecessor(attempt, conflict, args, kwargs)
        if not isinstance(outcome, Conflict):
            return outcome
        conflict = outcome  # someone else holds it now: deal with them as with anyone
    if conflict.task_id and conflict.task_id == attempt.request.id:
        try:
            return _redelivery(attempt, conflict)
        except _OtherHolder as other:
            conflict = other.conflict  # now an ordinary duplicate of that call
    policy = attempt.options.on_locked
    if attempt.holds_queue_slot:
        return _queued_turn(attempt, conflict, args, kwargs)
    if policy == "wait":
        return _wait(attempt, conflict)
    attempt.conflict(conflict, policy)
    if policy == "retry":
        raise _requeue(attempt, args, kwargs, conflict)  # a queued copy keeps its queue slot
    attempt.give_up_queue_slot()
    if policy == "raise":
        raise LockedError(
            f"task {attempt.task.name}[{attempt.request.id}]: lock {attempt.key} is held by task "
            f"{conflict.task_id or '?'}", task=attempt.task.name, key=attempt.key, holder=conflict.task_id)
    raise _Skip()


class _Skip(Exception):
    """Internal: the duplicate ends SUCCESS with result None without running the body."""


#: What resolving a duplicate raises on purpose (the lock is not ours in any of these cases).
_DECIDED = (Ignore, Retry, LockedError, *BACKEND_ERRORS)


def _wait_for_release(attempt: _Attempt, until: Optional[Callable[[Conflict], bool]] = None
                      ) -> Union[Tuple[Grant, float], Conflict]:
    """Block until the lock is ours, woken by the release announcement; the holder on timeout,
    or as soon as ``until(holder)`` says to stop waiting."""
    deadline = time.monotonic() + attempt.options.wait_timeout
    with attempt.runtime.store.release_events(attempt.key) as events:
        while True:
            outcome, started = attempt.acquire()
            if isinstance(outcome, Grant):
                return outcome, started
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (until is not None and until(outcome)):
                return outcome
            # Also wake when the holder's TTL would run out (a dead holder announces nothing).
            events.wait(min(remaining, max(outcome.pttl_ms, 1) / 1000.0 + 0.01))


def _wait(attempt: _Attempt, conflict: Conflict) -> Tuple[Grant, float]:
    """``on_locked="wait"``: wait up to ``lock_wait_timeout``, then end in FAILURE with LockedError."""
    attempt.conflict(conflict, "wait")
    outcome = _wait_for_release(attempt)
    if isinstance(outcome, Conflict):
        attempt.give_up_queue_slot()
        raise LockedError(
            f"task {attempt.task.name}[{attempt.request.id}]: waited {attempt.options.wait_timeout:g}s for "
            f"lock {attempt.key} held by task {outcome.task_id or '?'}", task=attempt.task.name, key=attempt.key,
            holder=outcome.task_id)
    return outcome


def _after_predecessor(attempt: _Attempt, conflict: Conflict, args: Sequence[Any],
                       kwargs: Mapping[str, Any]) -> Union[Tuple[Grant, float], Conflict]:
    """A ``self.retry()`` message that started while the execution that sent it still finishes
    (a cleanup in ``finally``): no redelivery, no duplicate; it runs once that execution let go.

    Waits up to ``lock_wait_timeout`` (then back to the queue, uncounted); returns the grant, or
    the conflict with whoever took the lock instead (another delivery of this message, another call).
    """
    attempt.waits_turn(conflict, "the attempt that re-queued it")
    outcome = _wait_for_release(attempt, until=lambda holder: not attempt.follows(holder))
    if isinstance(outcome, Conflict) and attempt.follows(outcome):
        raise _requeue(attempt, args, kwargs, outcome, counted=False)
    return outcome


def _queued_turn(attempt: _Attempt, conflict: Conflict, args: Sequence[Any],
                 kwargs: Mapping[str, Any]) -> Tuple[Grant, float]:
    """The one copy that ``queued`` lets wait behind a running one found it still running.

    It is no duplicate, so ``on_locked`` does not drop it: it goes back to the queue (keeping its
    slot, uncounted by ``lock_retry_max``) until the running copy is done; with ``"wait"`` it
    first waits for the release, as long as ``lock_wait_timeout``.
    """
    attempt.waits_turn(conflict, "the running copy")
    if attempt.options.on_locked == "wait":
        outcome = _wait_for_release(attempt)
        if not isinstance(outcome, Conflict):
            return outcome
        conflict = outcome
    raise _requeue(attempt, args, kwargs, conflict, counted=False)


def _redelivery(attempt: _Attempt, conflict: Conflict) -> Tuple[Grant, float]:
    """The holder is another delivery of this very message (visibility timeout, acks_late).

    If that delivery is alive it renews the lock within one heartbeat, and this copy
    stores nothing. If it died without releasing (its whole worker was killed and the
    broker redelivered at once), no renewal comes: this copy waits for the lock to run
    out and then runs, so the task is not lost.
    """
    if conflict.state == "queued":
        # The task re-queued itself (self.retry() under queued_or_running): this is a stale
        # copy of the message that retry replaced.
        attempt.conflict(conflict, "ignore")
        raise Ignore()
    if attempt.notes_completions:
        # Have the holder note, as it releases, that it ran to the end: copies of this message
        # that the broker hands out after that (visibility timeout) then know not to run.
        try:
            attempt.runtime.store.mark_redelivered(attempt.key, attempt.request.id)
        except BACKEND_ERRORS:
            pass
    holder_heartbeat = (conflict.heartbeat_ms or attempt.options.heartbeat * 1000) / 1000.0
    first_seen, first_pttl = time.monotonic(), conflict.pttl_ms
    alive_deadline = first_seen + 1.5 * holder_heartbeat + 0.25  # a live holder renews before this
    outcome: Union[Grant, Conflict] = conflict
    with attempt.runtime.store.release_events(attempt.key) as events:
        while True:
            assert isinstance(outcome, Conflict)
            timeout = max(outcome.pttl_ms, 1) / 1000.0 + 0.01
            now = time.monotonic()
            if now < alive_deadline:
                timeout = min(timeout, alive_deadline - now)
            if events.wait(timeout):
                break  # the other delivery finished and released: it ran, this copy must not
            outcome, started = attempt.acquire()
            if isinstance(outcome, Grant):
                logger.warning("singleton lock: %s[%s]: the earlier delivery's lock %s ran out without "
                               "release; running this redelivery", attempt.task.name, attempt.request.id,
                               attempt.key)
                return outcome, started
            if outcome.task_id != attempt.request.id:
                raise _OtherHolder(outcome)  # the dead delivery's lock ran out and another call took it
            elapsed_ms = (time.monotonic() - first_seen) * 1000
            if outcome.pttl_ms > first_pttl - elapsed_ms + 250:
                break  # renewed: the first delivery is alive
    attempt.conflict(conflict, "ignore")
    raise Ignore()


class _OtherHolder(Exception):
    """Internal: while a redelivery waited, a different call took the lock."""

    def __init__(self, conflict: Conflict) -> None:
        super().__init__(conflict.task_id)
        self.conflict = conflict


def _requeue(attempt: _Attempt, args: Sequence[Any], kwargs: Mapping[str, Any],
             conflict: Optional[Conflict], exc: Optional[BaseException] = None, *,
             counted: bool = True) -> BaseException:
    """Re-publish this message for later; counts against ``lock_retry_max`` (unless a copy that
    only waits its turn: ``counted=False``), never against ``max_retries``."""
    task, request, options = attempt.task, attempt.request, attempt.options
    done = int(request.get(RETRIES_HEADER) or 0)
    if counted and options.retry_max is not None and done >= options.retry_max:
        attempt.give_up_queue_slot()
        if conflict is None and exc is not None:
            return exc  # Redis stayed unreachable: end with the backend error itself
        holder = conflict.task_id if conflict else None
        return LockedError(
            f"task {task.name}[{request.id}]: gave up after {done} lock retries (lock_retry_max="
            f"{options.retry_max}); lock {attempt.key} held by task {holder}",
            task=task.name, key=attempt.key, holder=holder)
    countdown = jittered(options.retry_delay)
    if request.is_eager:
        return task.retry(args=args, kwargs=kwargs, countdown=countdown, throw=False, exc=exc)
    headers = library_headers(request.headers, {RETRIES_HEADER: done + 1 if counted else done})
    if attempt.enqueue_token:  # keep the queue slot for the next try
        headers[ENQUEUE_TOKEN_HEADER] = attempt.enqueue_token
        headers[ENQUEUE_DIGEST_HEADER] = attempt.queued_digest
    if attempt.after:
        headers[AFTER_HEADER] = attempt.after  # still the retry of that execution
    signature = task.signature_from_request(
        request, args, kwargs, countdown=countdown, retries=request.retries, headers=headers)
    signature.apply_async()
    why = f"lock {attempt.key} busy" if conflict is not None else f"lock store unavailable ({exc})"
    return Retry(f"{why}, retry {headers[RETRIES_HEADER]} in {countdown:.1f}s", exc=exc, when=countdown,
                 sig=signature)


def _backend_unavailable(attempt: _Attempt, args: Sequence[Any], kwargs: Mapping[str, Any],
                         body: Callable[[], Any], exc: BaseException, step: str = "acquire") -> Any:
    """Redis did not grant or refuse the lock: an outage follows ``on_lock_error``; a misconfigured
    lock store fails the task with :class:`ConfigurationError`, whatever ``on_lock_error`` says."""
    task, task_id, policy = attempt.task.name, attempt.request.id, attempt.options.on_lock_error
    problem = permanent_problem(exc, step)
    if problem is not None:
        url = redact(attempt.runtime.settings.url)
        logger.error("singleton lock: %s[%s]: the lock store %s refused lock %s, so the task fails without "
                     "running (on_lock_error does not apply to a misconfiguration): %s", task, task_id, url,
                     attempt.key, problem)
        attempt.give_up_queue_slot()
        raise ConfigurationError(f"task {task}[{task_id}]: the lock store {url} refused lock {attempt.key}: "
                                 f"{problem}", task=task, key=attempt.key) from exc
    logger.error("singleton lock: %s[%s]: Redis unavailable while taking lock %s (%s); on_lock_error=%s",
                 task, task_id, attempt.key, error_text(exc), policy)
    if policy == "run":
        return body()
    error = LockBackendError(f"task {task}[{task_id}]: cannot reach Redis to take lock {attempt.key}: "
                             f"{error_text(exc)}", task=task, key=attempt.key)
    if policy == "raise":
        raise error from exc
    raise _requeue(attempt, args, kwargs, None, error)
