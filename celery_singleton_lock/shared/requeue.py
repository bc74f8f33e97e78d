"""``on_locked="retry"`` for a block: the running task goes back to its queue, its retries unspent.

A block inside a task that meets a full key gives the worker back to other work: the
task's message is published again with a countdown (just after the soonest window's end
when the places are kept by a window, else about ``singleton_lock_retry_delay``), and the
body ends with Celery's ``Retry``, so the execution is marked RETRY. As a task's lock
re-queue does, it keeps the task's retry count as it was: a full resource is no failure,
and ``max_retries`` is left for the task's own ``self.retry()``.
"""

from __future__ import annotations

from typing import Any

from celery.exceptions import Retry

from ..calls.limits import window_countdown
from ..exceptions import ConfigurationError
from ..run.requeue import jittered
from ..store import Conflict

__all__ = ["requeue_running_task", "running_task", "refuse_outside_a_task"]


def running_task() -> Any:
    """The Celery task whose body runs in this thread, or ``None`` (a script, a web request)."""
    from celery import current_task

    task = current_task._get_current_object() if current_task else None
    request = getattr(task, "request", None)
    if task is None or request is None or request.called_directly or not request.id:
        return None
    return task


def refuse_outside_a_task(lock: Any) -> None:
    """``"retry"`` needs a task to re-queue: anywhere else it is refused before anything is asked."""
    raise ConfigurationError(f'{lock.where}: on_locked="retry" re-queues the running Celery task, and no task runs '
                             'here (a script, a web request, a plain call): use "wait" or "raise"', task=lock.name)


def requeue_running_task(task: Any, lock: Any, conflict: Conflict, retry_delay: float) -> Retry:
    """Publish the running task again for when a place should free; the ``Retry`` its body ends with."""
    request = task.request
    countdown = window_countdown(conflict) or jittered(retry_delay)
    signature = task.signature_from_request(request, request.args, request.kwargs, countdown=countdown,
                                            retries=request.retries)
    signature.apply_async()
    return Retry(f"{lock.where} full ({conflict.held} of {conflict.limit} places taken), re-queued in "
                 f"{countdown:.1f}s", when=countdown, sig=signature)
