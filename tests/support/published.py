"""The headers of the messages a block of test code publishes, read from Celery's own signal."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional

from celery.signals import before_task_publish

__all__ = ["published"]


@contextmanager
def published() -> Iterator[List[Dict[str, Any]]]:
    """The headers of every message published in the block."""
    sent: List[Dict[str, Any]] = []

    def record(headers: Optional[Dict[str, Any]] = None, **_: Any) -> None:
        sent.append(dict(headers or {}))

    before_task_publish.connect(record, weak=False)
    try:
        yield sent
    finally:
        before_task_publish.disconnect(record)
