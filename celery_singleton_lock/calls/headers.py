"""The message headers the library writes, and how a message's headers are read.

Celery copies a request's custom headers into the messages of ``self.retry()``,
so code that publishes strips ours (:func:`library_headers`) and sets its own.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional

from .encoding import is_digest

__all__ = ["TOKEN", "EVENTS", "ENQUEUE_TOKEN", "ENQUEUE_DIGEST", "RETRIES", "AFTER", "SKIPPED", "GENERATION", "ALL", "library_headers",
           "enqueue_digest", "redelivered"]

#: The per-delivery token chosen by the worker's main process (set on the request, not published).
TOKEN = "singleton_lock_token"
#: Whether the worker sends task events (``-E``, ``enable_events``): the main process knows, and
#: tells the pool process on the request (not published).
EVENTS = "singleton_lock_events"
#: The token of the enqueue lock taken by ``apply_async`` (``queued*`` scopes).
ENQUEUE_TOKEN = "singleton_lock_enqueue_token"
#: The argument digest of that enqueue lock: the worker adopts and releases the lock the message
#: names, whatever digest it would derive from the arguments it received.
ENQUEUE_DIGEST = "singleton_lock_enqueue_digest"
#: How many times the lock re-queued this call (kept apart from Celery's ``retries``).
RETRIES = "singleton_lock_retries"
#: A ``self.retry()`` message: the token of the execution that re-queued the task. That
#: execution may still be finishing when the retry starts; the retry waits for it.
AFTER = "singleton_lock_after"
#: A call skipped at enqueue but published for what follows it (a chain, a chord): the
#: holder's task id. The worker skips it without taking a lock.
SKIPPED = "singleton_lock_skipped"
#: The call's generation (``on_locked="replace"``, ``lock_debounce``): the worker runs it only if no
#: newer call of its key was made (see store/generations.py).
GENERATION = "singleton_lock_generation"
#: Every header the library writes.
ALL = (TOKEN, EVENTS, ENQUEUE_TOKEN, ENQUEUE_DIGEST, RETRIES, AFTER, SKIPPED, GENERATION)


def library_headers(inherited: Optional[Mapping[str, Any]], ours: Mapping[str, Any]) -> Dict[str, Any]:
    """A message's headers: the caller's (less any of ours Celery copied from a request), then ours."""
    merged = {k: v for k, v in (inherited or {}).items() if k not in ALL}
    merged.update(ours)
    return merged


def enqueue_digest(fields: Any, derive: Callable[[], str]) -> str:
    """The digest of the enqueue lock a message carries (``fields``: its headers, or a request
    made of them). ``derive()`` computes one from the arguments, for a message that does not
    name it (published by an earlier version of the library)."""
    named = fields.get(ENQUEUE_DIGEST)
    return named if is_digest(named) else derive()


def redelivered(request: Any) -> bool:
    """Whether the broker says it handed this message out before (kombu's Redis transport and AMQP do)."""
    return bool((request.delivery_info or {}).get("redelivered"))
