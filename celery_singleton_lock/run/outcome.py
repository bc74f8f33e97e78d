"""A duplicate's outcome where Celery's own tools look: the result backend and task events.

A skipped duplicate ends in SUCCESS with result ``None``, as a run that returned ``None``
does. So that the two can be told apart, the execution that met a held lock also records
which lock, which holder and which policy decided:

- in the result backend's meta, with ``result_extended = True``: Celery stores a request's
  stamps (``stamped_headers`` and their values) beside ``name``, ``args`` and ``worker``;
  the fields are added as stamps of the running request, so they land there with the
  task's own result (also a ``LockedError``'s FAILURE, or a retry's RETRY);
- in django-celery-results (``django-db``), which stores no stamps but persists the request's
  ``meta`` dict into its ``TaskResult`` row's meta and merges it into ``get_task_meta``: the
  fields are added to ``request.meta`` too. Celery's SQLAlchemy backend (``db+``) stores fixed
  columns and keeps neither (docs/django.md says what to use there);
- in the task's events, when the worker sends them (``-E``): a ``task-singleton-lock``
  event with the same fields. Monitors built on ``celery.events.state`` (Flower) merge a
  task event's fields into their record of the task; the event names the fields among the
  ones the record shows (``_fields``), so Flower's task page and its ``/api/task/info``
  list them after the result.

The result itself stays what the duplicate policy says (``None`` for a skip).

A call a newer one superseded (``on_locked="replace"``, ``lock_debounce``) records one more
field, ``singleton_lock_superseded_by`` (the newer call's task id), so that :func:`superseded`
tells it from a run that returned ``None``. Its publisher's answer (:func:`store_superseded`)
carries the fields itself: the backend keeps the first SUCCESS it stores for a task, so the
worker's later store could not add them.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, Optional

from celery import states
from celery.app.task import Context

from ..calls import headers

__all__ = ["record_duplicate", "record_superseded", "store_skipped", "store_superseded", "superseded", "FIELDS",
           "SUPERSEDED_BY", "EVENT"]

logger = logging.getLogger("celery_singleton_lock")

#: The fields a duplicate records, in the backend's meta and in its event.
FIELDS = ("singleton_lock_key", "singleton_lock_holder", "singleton_lock_policy", "singleton_lock_describe",
          "singleton_lock_superseded_by")
#: The field of a superseded call: the task id of the newer call that took its place.
SUPERSEDED_BY = "singleton_lock_superseded_by"
EVENT = "task-singleton-lock"


def record_duplicate(task: Any, key: str, holder: Optional[str], policy: str,
                     description: Optional[str] = None, **more: Any) -> None:
    """Record on the running request, and in a task event, that this execution met a held lock.

    A redelivery of the holder's own message (``holder`` is its own task id) records nothing:
    its task is the holder's, whose record must stay the holder's.
    """
    request = task.request
    if holder is not None and holder == request.id:
        return
    fields = _fields(key, holder, policy, description, **more)
    _stamp(request, fields)
    if not request.get(headers.EVENTS):  # the worker sends no task events (or an eager run)
        return
    try:
        # Celery's Event() takes a dict of extra fields as ``_fields``: through it the event also
        # carries a field named ``_fields``, the list a monitor's task record shows.
        task.send_event(EVENT, _fields={"_fields": _shown_fields(fields)}, **fields)
    except Exception as exc:  # monitoring must not change what the task does
        logger.warning("singleton lock: %s[%s]: sending the %s event failed: %s", task.name, request.id,
                       EVENT, exc)


def record_superseded(task: Any, key: str, by: Optional[str]) -> None:
    """Record on the running request that a newer call (``by``) superseded this one."""
    record_duplicate(task, key, by, "replace", **{SUPERSEDED_BY: by or "?"})


def _fields(key: str, holder: Optional[str], policy: str, description: Optional[str] = None,
            **more: Any) -> Dict[str, Any]:
    fields: Dict[str, Any] = {"singleton_lock_key": key, "singleton_lock_holder": holder,
                              "singleton_lock_policy": policy}
    if description is not None:
        fields["singleton_lock_describe"] = description
    fields.update(more)
    return fields


def _stamp(request: Any, fields: Dict[str, Any]) -> None:
    stamped = [name for name in (getattr(request, "stamped_headers", None) or ()) if name not in fields]
    request.stamped_headers = stamped + list(fields)
    request.stamps = dict(getattr(request, "stamps", None) or {}, **fields)
    request.meta = dict(getattr(request, "meta", None) or {}, **fields)


def _shown_fields(fields: Dict[str, Any]) -> list:
    from celery.events.state import Task as TaskState

    return [*TaskState._fields, *fields]


def store_skipped(task: Any, task_id: str) -> None:
    """Answer another call of ``task`` as a skipped or superseded one (SUCCESS ``None``) now, so its
    caller's ``.get()`` returns before its message reaches a worker (which ends it so too)."""
    try:
        task.backend.store_result(task_id, None, states.SUCCESS)
    except NotImplementedError:  # no result backend configured: nobody waits on it
        pass


def store_superseded(task: Any, task_id: str, by: str, key: str) -> None:
    """Answer a call that the newer call ``by`` superseded (SUCCESS ``None``) now, marked as
    superseded in its meta as its worker would mark it (see the module docstring)."""
    request = Context(id=task_id, task=task.name, args=None, kwargs=None, delivery_info=None)
    _stamp(request, _fields(key, by, "replace", **{SUPERSEDED_BY: by or "?"}))
    try:
        task.backend.store_result(task_id, None, states.SUCCESS, request=request)
    except NotImplementedError:  # no result backend configured: nobody waits on it
        pass


def superseded(result: Any) -> bool:
    """Whether the call behind ``result`` (an ``AsyncResult``) was superseded by a newer call of its
    key (``on_locked="replace"``, ``lock_debounce``) rather than run: its ``get()`` returns ``None``
    as a run that returned ``None`` does, and this tells the two apart.

    Read from the result backend's meta: the Redis result backend with ``result_extended = True``,
    or django-celery-results (``django-db``). ``False`` while the call is not answered yet, and
    where the backend keeps no such field (the answer is then unknown, not "ran"), and for an
    eager result (``apply``, ``task_always_eager``): an eager call runs at once, never superseded.
    """
    backend = getattr(result, "backend", None)
    if backend is None:  # an EagerResult
        return False
    meta = backend.get_task_meta(result.id)
    return bool(meta.get(SUPERSEDED_BY)) if isinstance(meta, dict) else False
