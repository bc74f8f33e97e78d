"""The message headers the library writes, and how a message's headers are read.

Celery copies a request's custom headers into the messages of ``self.retry()``,
so code that publishes strips ours (:func:`library_headers`) and sets its own.
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Dict, Mapping, Optional

from .encoding import is_digest

__all__ = ["TOKEN", "EVENTS", "ENQUEUE_TOKEN", "ENQUEUE_DIGEST", "RETRIES", "AFTER", "SKIPPED", "GENERATION", "ALL", "library_headers",
           "enqueue_digest", "redelivered", "token", "generation", "retries", "skipped_for", "MAX_GENERATION"]

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


# Reading what a message says. Anyone who can publish to the broker can put any value in these
# headers, so each is taken only in the shape and range the library writes it: anything else
# reads as absent (the call is then judged as one published without it) and can neither name
# another call's lock or turn nor push the store's integers past what it counts exactly.

#: A token as the library writes it (128 random bits in hex), with room for a caller's own test ids.
_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
#: A generation is the store's clock in microseconds: Lua's doubles count by one only below 2**53, and
#: a generation is lifted by one above the newest, so none may start near it (2**52 is in 2112).
MAX_GENERATION = 2 ** 52
#: How far a generation may lie ahead of this process's clock (clocks of hosts differ).
_GENERATION_AHEAD_US = 86_400 * 10 ** 6
#: The most lock re-queues a message may say it has had.
_MAX_RETRIES = 2 ** 31 - 1
#: The longest task id a skipped call may name as its holder (Celery's ids are 36 characters).
_MAX_TASK_ID = 255


def token(fields: Any, name: str) -> Optional[str]:
    """The token a message names under ``name`` (``ENQUEUE_TOKEN``, ``AFTER``); ``None`` when absent
    or not a token."""
    value = fields.get(name)
    return value if isinstance(value, str) and _TOKEN.match(value) else None


def generation(fields: Any) -> Optional[int]:
    """The generation a message carries; ``None`` when absent or not one the store can have handed
    out (not a whole number, not positive, past ``MAX_GENERATION`` or a day ahead of this clock)."""
    value = fields.get(GENERATION)
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 16:
        number = int(value)
    else:
        return None
    ceiling = min(MAX_GENERATION, int(time.time() * 10 ** 6) + _GENERATION_AHEAD_US)
    return number if 0 < number < ceiling else None


def retries(fields: Any) -> int:
    """How many times the lock re-queued this call (0 when the header is absent or out of range)."""
    value = fields.get(RETRIES)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 10:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_RETRIES:
        return value
    return 0


def skipped_for(fields: Any) -> Optional[str]:
    """The holder a call skipped at enqueue names (``None``: the call was not skipped, or the
    header is not a task id)."""
    value = fields.get(SKIPPED)
    return value if isinstance(value, str) and 0 < len(value) <= _MAX_TASK_ID else None
