"""Put a message back in the queue for later: the lock was busy, or the store did not answer.

A lock re-queue is not a Celery retry of the task: it counts against
``lock_retry_max`` (in its own header), never against ``max_retries``, and the
message keeps the enqueue lock it carries and the retry it belongs to. An eager
run (``task_always_eager``, ``.apply()``) has no queue: its lock retry ends it at
once with ``LockedError`` (or the store's error), spending no ``max_retries``.
"""

from __future__ import annotations

import random
from typing import Any, Dict, Mapping, Optional, Sequence

from celery.exceptions import Retry

from ..calls import headers
from .attempt import Attempt
from ..exceptions import LockedError
from ..calls.limits import window_countdown
from ..store import Conflict
from .taken import holder_id, kept_by

__all__ = ["requeue", "jittered"]


def jittered(delay: float) -> float:
    """A countdown spread over [delay/2, 3*delay/2] so retried duplicates do not stampede."""
    return delay * (0.5 + random.random())


def requeue(attempt: Attempt, args: Sequence[Any], kwargs: Mapping[str, Any], conflict: Optional[Conflict],
            exc: Optional[BaseException] = None, *, counted: bool = True,
            countdown: Optional[float] = None) -> BaseException:
    """Re-publish this message for later (after ``countdown`` seconds, or ``lock_retry_delay`` with
    jitter) and return the ``Retry`` to raise; past ``lock_retry_max`` (counted tries only) the error
    to end with instead."""
    task, request, options = attempt.task, attempt.request, attempt.options
    done = headers.retries(request)
    if counted and options.retry_max is not None and done >= options.retry_max:
        return _give_up(attempt, conflict, exc, f"gave up after {done} lock retries (lock_retry_max="
                                                f"{options.retry_max})")
    if request.is_eager and (conflict is not None or exc is not None):
        # An eager run has no queue to go back to: Celery's eager retry re-runs the call at once,
        # in the caller, which frees no lock (the holder may be that very caller) and spends
        # max_retries. So it ends now, as a worker's duplicate ends past lock_retry_max.
        return _give_up(attempt, conflict, exc, "in eager mode a lock retry cannot wait for the holder")
    if countdown is None:
        countdown = window_countdown(conflict) or jittered(options.retry_delay)
    if request.is_eager:
        return task.retry(args=args, kwargs=kwargs, countdown=countdown, throw=False, exc=exc)
    ours: Dict[str, Any] = {headers.RETRIES: done + 1 if counted else done}
    if attempt.enqueue_token:  # keep the queue slot for the next try
        ours.update({headers.ENQUEUE_TOKEN: attempt.enqueue_token, headers.ENQUEUE_DIGEST: attempt.queued_digest})
    if attempt.after:
        ours[headers.AFTER] = attempt.after  # still the retry of that execution
    generation = headers.generation(request)
    if generation is not None:
        ours[headers.GENERATION] = str(generation)  # still that call: newest or not
    message_headers = headers.library_headers(request.headers, ours)
    signature = task.signature_from_request(
        request, args, kwargs, countdown=countdown, retries=request.retries, headers=message_headers)
    signature.apply_async()
    why = (f"lock {attempt.key} busy" if conflict is not None else f"lock store unavailable ({exc})" if exc
           else f"waiting a quiet period as the newest call of {attempt.key}")
    return Retry(f"{why}, retry {ours[headers.RETRIES]} in {countdown:.1f}s", exc=exc, when=countdown,
                 sig=signature)


def _give_up(attempt: Attempt, conflict: Optional[Conflict], exc: Optional[BaseException],
             why: str) -> BaseException:
    """The error a duplicate that retries no more ends with (its queue slot given back)."""
    attempt.give_up_queue_slot()
    if conflict is None and exc is not None:
        return exc  # Redis stayed unreachable: end with the backend error itself
    task, request = attempt.task, attempt.request
    who = kept_by(conflict) if conflict is not None else "task None"
    return LockedError(f"task {task.name}[{request.id}]: {why}; lock {attempt.key} held by {who}",
                       task=task.name, key=attempt.key, holder=holder_id(conflict))
