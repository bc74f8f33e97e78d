"""The publish side of "latest call wins": every call becomes its key's newest, and waits its quiet period.

Under ``on_locked="replace"`` (and ``lock_debounce``, which implies it) no call is
dropped at ``apply_async``: Celery cannot take back a message, so each call is
published with its *generation* (a header), and the worker runs only the newest
one of its key (:mod:`.newest`). Publishing a call here:

- reserves its generation (one script call, :mod:`.store.generations`), and makes
  it the key's newest only once its message is published (a second one,
  :meth:`NewestCall.published`); the call it displaced before that one ran (if any)
  is answered then, SUCCESS with result ``None``, so its caller's ``.get()`` returns
  now rather than when its message reaches a worker (which ends it the same way). A
  publish that raises (the broker refuses, the serializer refuses, ``SystemExit`` in
  beat) displaces nothing: the key's newest call is still the one before, which
  runs. A publisher killed between the publish and the second call leaves that to
  the message: the worker that takes it makes it the newest;
- under ``lock_debounce``, delays the message by the quiet period (after the
  caller's own ``countdown``/``eta``), capped so that it is due no later than
  ``lock_debounce_max`` after the burst's first call.

A debounced message may wait in the broker longer than the Redis transport's
``visibility_timeout``; the broker then hands it out twice. The second copy finds
its generation's run claimed and stores nothing (:func:`.newest.before_run`), so
the call still runs once.

When the store cannot be reached, ``on_lock_error="raise"`` raises to the caller;
otherwise the call is published without a generation: the worker guards its run
with the lock alone (it runs, after any running copy, even if a newer call
superseded it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, MutableMapping, Optional, Sequence

from celery.utils import uuid

from ..calls import headers
from ..exceptions import ConfigurationError, LockBackendError
from ..config.options import LockOptions
from .publish import CallOptions, message_digest
from ..run.outcome import store_superseded
from ..runtime.lock_runtime import runtime_for
from ..config.settings import AppSettings
from ..store import STORE_ERRORS, Reservation, error_text, permanent_problem, redact

__all__ = ["stamps", "supersede", "NewestCall", "refuse_without_generations", "debounce_wait"]

logger = logging.getLogger("celery_singleton_lock")


def refuse_without_generations(task_name: str, options: LockOptions, settings: AppSettings) -> None:
    """At definition: a quorum URL list cannot say which call of a key is the newest."""
    if options.latest_wins and isinstance(settings.url, tuple) and settings.backend is None:
        raise ConfigurationError(
            f"task {task_name!r}: on_locked=\"replace\" and lock_debounce need one history of a key's calls, "
            "and a quorum of independent masters (singleton_lock_url as a list) keeps one per master: use one "
            "Redis, Sentinel or a Cluster for this app's locks", task=task_name)


def stamps(task: Any, task_id: Optional[str], message_headers: Optional[Mapping[str, Any]]) -> bool:
    """Whether this ``apply_async`` is a new call to supersede with: not the task re-queuing itself
    (``self.retry()``, or the library re-publishing the running call it stamped already: both carry the
    running request's id). A library header a caller passes (``singleton_lock_generation``, say) is no
    sign of either: the call is stamped as any other, and the header is replaced by the library's own."""
    if not task.singleton_lock()[0].latest_wins or task.app.conf.task_always_eager:
        return False
    return task_id is None or task_id != task.request.id


def debounce_wait(options: LockOptions, burst_ms: int) -> float:
    """Seconds the message waits: the quiet period, capped by what is left of ``lock_debounce_max``."""
    wait = options.debounce or 0.0
    if options.debounce_max is not None:
        wait = min(wait, max(options.debounce_max - burst_ms / 1000.0, 0.0))
    return wait


@dataclass
class NewestCall:
    """A call to publish as its key's newest: its task id, the headers to publish it with, and its
    lock digest (for the enqueue lock, so the arguments are digested once). Once the publish
    returned, :meth:`published`."""

    task: Any
    task_id: str
    digest: str
    headers: Dict[str, Any] = field(default_factory=dict)
    key: str = ""
    #: Its reserved generation (``None``: the store was unreachable; the call has no generation).
    reserved: Optional[Reservation] = None
    ttl_ms: int = 0
    #: The key's lock, which a superseded call's meta names.
    lock_key: str = ""

    def published(self) -> None:
        """Make the call its key's newest, and answer the call it displaced: its ``.get()`` returns now."""
        if self.reserved is None:
            return
        generations = runtime_for(self.task.app).store.generations
        try:
            previous = generations.supersede(self.key, self.reserved.gen, self.task_id, self.ttl_ms) \
                if generations is not None else None
        except STORE_ERRORS as exc:
            logger.warning("singleton lock: %s[%s]: published, but the lock store did not record it as the newest "
                           "call of %s (%s); its message does when a worker takes it", self.task.name,
                           self.task_id, self.key, error_text(exc))
            return
        if not previous or previous == self.task_id:
            return
        try:
            # marked superseded; its message ends so too when it reaches a worker
            store_superseded(self.task, previous, self.task_id, self.lock_key)
        except Exception as exc:  # a result backend that cannot answer for another call: its worker will
            logger.warning("singleton lock: %s: could not store the superseded call %s's result now (%s); "
                           "it is stored when its message reaches a worker", self.task.name, previous,
                           error_text(exc))


def supersede(task: Any, args: Sequence[Any], kwargs: Mapping[str, Any], task_id: Optional[str],
              options: MutableMapping[str, Any]) -> NewestCall:
    """Reserve this call's generation, to make it its key's newest once published. Under
    ``lock_debounce`` the message's ``countdown`` is set in ``options`` (its ``eta`` folded in)."""
    lock_options, argument_key = task.singleton_lock()
    call = CallOptions(options)
    digest = message_digest(task, argument_key, args, kwargs, call.serializer or task.serializer)
    runtime = runtime_for(task.app)
    keys = runtime.layout.keys(lock_options.key_name(task.name), digest, lock_options.scope)
    key = keys.generation
    task_id = task_id or uuid()
    delay = call.delay()
    generations = runtime.store.generations
    if generations is None:
        refuse_without_generations(task.name, lock_options, runtime.settings)
        raise ConfigurationError(f"task {task.name!r}: the lock store keeps no generations", task=task.name)
    reserved: Optional[Reservation] = None
    ttl_ms = int((lock_options.queue_ttl + delay + (lock_options.debounce or 0.0)) * 1000)
    try:
        reserved = generations.reserve(key, ttl_ms)
    except STORE_ERRORS as exc:
        _unreachable(task, runtime, key, lock_options, exc)
    if lock_options.debounce is not None:
        options.pop("eta", None)
        options["countdown"] = delay + debounce_wait(lock_options, reserved.burst_ms if reserved else 0)
    if reserved is None:
        return NewestCall(task, task_id, digest)
    return NewestCall(task, task_id, digest, {headers.GENERATION: str(reserved.gen)}, key, reserved, ttl_ms,
                      keys.lock)


def _unreachable(task: Any, runtime: Any, key: str, options: LockOptions, exc: BaseException) -> None:
    problem = permanent_problem(exc, "supersede")
    if problem is not None:
        raise ConfigurationError(f"task {task.name}: the lock store {redact(runtime.settings.url)} refused "
                                 f"{key}: {problem}; nothing was published", task=task.name, key=key) from exc
    if options.on_lock_error == "raise":
        raise LockBackendError(f"task {task.name}: cannot reach Redis to mark the newest call of {key}: "
                               f"{error_text(exc)}; nothing was published", task=task.name, key=key) from exc
    logger.warning("singleton lock: %s: Redis unavailable at publish (%s); publishing without a generation: "
                   "the lock alone guards its run", task.name, error_text(exc))
