"""The latest-wins workload: tasks under ``on_locked="replace"`` and ``lock_debounce``.

The campaign's workers load this module (``celery -A bench.faults.latest``) in the rows that name
``latest`` tasks (:mod:`.plan`); the publishers (:mod:`.publisher`) load it too. Each body records
its interval with the campaign's own :func:`~.app.body` (fenced writes included) and returns its
own arguments, so a call that ran can be told from one answered as superseded (``None``).

- ``faults.replace``: ``on_locked="replace"``, ``lock_scope="queued_or_running"`` (runs of a key
  never overlap; the newest call takes the place of the one waiting);
- ``faults.replace_queued``: the same with ``lock_scope="queued"``;
- ``faults.debounce``: ``lock_debounce`` of :data:`QUIET` seconds;
- ``faults.debounce_max``: the same, capped by ``lock_debounce_max`` (:data:`LONGEST`).
"""

from __future__ import annotations

from typing import Any, Dict, List

from celery_singleton_lock import LockedTask

from .app import TTL, app, body, recorder

__all__ = ["app", "recorder", "TASKS", "QUIET", "LONGEST"]

#: The quiet period of the debounced tasks, and the longest a debounced burst may wait.
QUIET = 1.0
LONGEST = 2.5


def _ran(task: Any, item: int, seq: int, tag: str) -> List[Any]:
    body(task, item)
    return [item, seq, tag]


@app.task(bind=True, base=LockedTask, name="faults.replace", lock_ttl=TTL, lock_key=("item",),
          on_locked="replace", lock_scope="queued_or_running")
def replace(self: Any, item: int, seq: int, tag: str) -> List[Any]:
    return _ran(self, item, seq, tag)


@app.task(bind=True, base=LockedTask, name="faults.replace_queued", lock_ttl=TTL, lock_key=("item",),
          on_locked="replace", lock_scope="queued")
def replace_queued(self: Any, item: int, seq: int, tag: str) -> List[Any]:
    return _ran(self, item, seq, tag)


@app.task(bind=True, base=LockedTask, name="faults.debounce", lock_ttl=TTL, lock_key=("item",),
          lock_debounce=QUIET)
def debounce(self: Any, item: int, seq: int, tag: str) -> List[Any]:
    return _ran(self, item, seq, tag)


@app.task(bind=True, base=LockedTask, name="faults.debounce_max", lock_ttl=TTL, lock_key=("item",),
          lock_debounce=QUIET, lock_debounce_max=LONGEST)
def debounce_max(self: Any, item: int, seq: int, tag: str) -> List[Any]:
    return _ran(self, item, seq, tag)


TASKS: Dict[str, Any] = {t.name: t for t in (replace, replace_queued, debounce, debounce_max)}
