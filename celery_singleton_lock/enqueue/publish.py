"""Take the lock in the publishing process, before a ``queued*`` task's message exists.

``apply_async`` (and so ``delay``, signatures, groups, chains and beat, which all
end in it when the task class is at hand) takes an *enqueue lock* with
``lock_queue_ttl``, then publishes the message with the lock's token and digest
in headers; the worker adopts (or frees) the lock the message names, by token.
The digest is derived from the arguments as the worker will receive them (after
the message serializer's round trip), so it also names the worker's run lock.
The lock is taken before Celery builds the message, so a refused duplicate is
never announced to ``before_task_publish``, let alone published.

What a duplicate does at enqueue time:

``skip``  nothing is published; the caller gets the ``AsyncResult`` of the copy
          that holds the lock, so ``.get()`` waits for the run that will happen. A
          caller that chose the id itself (groups, ``task_id=``) finds that id
          SUCCESS with result ``None``, as for a duplicate skipped at run time. A
          call that something follows (a chain's next step, a chord's body, a
          ``link``) is published instead, marked as skipped: the worker skips it
          without a lock, and its SUCCESS moves the chain on and counts toward the chord.
``raise`` :class:`~.exceptions.LockedError` to the caller; nothing is published.
``retry`` the message is published *without* an enqueue lock; the worker then
          re-queues it until the lock is free, so the call runs after the holder.
``wait``  (``queued`` scope only) as ``skip`` at enqueue: a copy is already
          queued behind the running one; at run time that copy waits for it.

A lock store that started a moment ago (see :mod:`.store.start_gate`) is no outage:
``apply_async`` waits for it to grant, a few seconds at most. When Redis is
unreachable, ``on_lock_error="raise"`` raises to the caller and
publishes nothing (an ask that lands late is released by token once the store
answers); otherwise the message is published naming the token it asked with: the
worker adopts that lock if the ask took it after all (a paused store runs it when
it resumes), or guards the run and applies ``on_lock_error`` itself. A lock
store that is set up wrong (a wrong password, a missing ACL permission, a
read-only replica) is no outage: ``apply_async`` raises
:class:`~.exceptions.ConfigurationError` and publishes nothing, whatever
``on_lock_error`` says.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from celery.utils import uuid
from kombu.exceptions import DecodeError, EncodeError
from kombu.serialization import dumps, loads

from ..calls import headers
from .. import signals
from ..calls.arguments import ArgumentKey, is_digest
from ..run.decisions import PublishUnlocked, Refuse, SkipAtEnqueue
from ..run.outcome import store_skipped
from ..exceptions import ConfigurationError, LockBackendError, UnencodableArgumentError
from ..calls.limits import call_keys, call_limit
from ..run.policy import ON_LOCKED
from .refusals import serializer_refused
from ..runtime.lock_runtime import runtime_for
from ..run.taken import places_taken
from ..store import (STORE_ERRORS, Conflict, Holder, LockKeys, error_text, new_token, permanent_problem, redact,
                    wait_for_gate)

__all__ = ["publish_locked", "CallOptions", "message_digest"]

logger = logging.getLogger("celery_singleton_lock")

#: publish(task_id, headers): sends the message with those of the library's headers.
Publish = Callable[[str, Optional[Dict[str, Any]]], Any]


class CallOptions:
    """What ``apply_async``'s options say about one call, as the enqueue lock needs it."""

    __slots__ = ("headers", "countdown", "eta", "serializer", "continues")

    def __init__(self, options: Mapping[str, Any], link: Any = None) -> None:
        self.headers: Optional[Mapping[str, Any]] = options.get("headers")
        self.countdown: Optional[float] = options.get("countdown")
        self.eta: Any = options.get("eta")
        self.serializer: Optional[str] = options.get("serializer")
        #: Something runs after this call: a chain's next steps, a chord's body, a link.
        self.continues = bool(link or options.get("chain") or options.get("chord"))

    def delay(self) -> float:
        """Seconds until the message is due (``countdown``, or ``eta`` from now); 0 when at once."""
        try:
            if self.countdown:
                return max(float(self.countdown), 0.0)
            eta = self.eta
            if not eta:
                return 0.0
            if isinstance(eta, str):
                eta = dt.datetime.fromisoformat(eta)
            if eta.tzinfo is None:  # naive: UTC or local time, as the app may read it; take the later
                now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
                return max((eta - now).total_seconds(), (eta - dt.datetime.now()).total_seconds(), 0.0)
            return max((eta - dt.datetime.now(dt.timezone.utc)).total_seconds(), 0.0)
        except (TypeError, ValueError, AttributeError):
            return 0.0  # not a time: Celery refuses the call with its own error, before it is published


def message_digest(task: Any, argument_key: ArgumentKey, args: Sequence[Any], kwargs: Mapping[str, Any],
                   serializer: str) -> str:
    """The digest the worker will derive from the message of this call (see :meth:`ArgumentKey.for_message`).

    Refuses, before anything is locked or published, a call whose message a worker could not
    decode (a dict shaped like a tagged value of a type the serializer does not know).
    """
    def deliver(call_args: Sequence[Any], call_kwargs: Mapping[str, Any]) -> Tuple[Any, Any]:
        try:
            content_type, encoding, body = dumps((list(call_args), dict(call_kwargs)), serializer=serializer)
        except EncodeError:
            try:
                argument_key(call_args, call_kwargs)  # an argument with no canonical form: its error names it
            except UnencodableArgumentError as error:
                raise serializer_refused(error) from None
            raise  # what Celery itself raises for this call
        try:
            delivered_args, delivered_kwargs = loads(body, content_type, encoding)
        except DecodeError as exc:
            raise UnencodableArgumentError(
                f"task {task.name!r}: a worker could not decode the arguments of this call ({exc}) with the "
                f"{serializer!r} serializer; nothing was published", task=task.name) from exc
        return delivered_args, delivered_kwargs

    return argument_key.for_message(args, kwargs, deliver)


def _is_library_republish(message_headers: Optional[Mapping[str, Any]]) -> bool:
    # A lock retry re-publishes the running call with our own headers: it already owns (or needs no)
    # enqueue lock. Only the running call's own id makes it one: a caller passing our headers to
    # apply_async takes the enqueue lock as any call does (the headers are replaced by ours).
    return bool(message_headers) and (headers.ENQUEUE_TOKEN in message_headers  # type: ignore[operator]
                                      or headers.RETRIES in message_headers)  # type: ignore[operator]


def publish_locked(task: Any, args: Sequence[Any], kwargs: Mapping[str, Any], task_id: Optional[str],
                   call: CallOptions, publish: Publish, digest: Optional[str] = None) -> Any:
    """Publish one call of a ``queued*`` task under its enqueue lock, or resolve the duplicate.

    ``digest``: the call's, when the caller has derived it already (a call made its key's newest)."""
    options, argument_key = task.singleton_lock()
    if digest is None:  # raises before anything is locked or published
        digest = message_digest(task, argument_key, args, kwargs, call.serializer or task.serializer)
    # self.retry() / re-publishing the running call itself: the lock goes with the message.
    current = task.lock if task_id is not None and task.request.id == task_id else None
    if current is not None:
        return _republish_own(current, options, call.delay(), publish)
    if task_id is not None and task.request.id == task_id and _is_library_republish(call.headers):
        return publish(task_id or uuid(), {k: call.headers[k] for k in headers.ALL if k in call.headers})  # type: ignore

    runtime = runtime_for(task.app)
    limit = call_limit(task.name, options, args, kwargs)
    keys = call_keys(runtime.layout.keys(options.key_name(task.name), digest, options.scope), limit)
    requested_id, task_id = task_id, task_id or uuid()
    token = new_token()
    holder = Holder(task_id=task_id, host=runtime.hostname, pid=os.getpid(), since_ms=int(time.time() * 1000),
                    heartbeat_ms=int(options.heartbeat * 1000),
                    task="" if options.key_name(task.name) == task.name else task.name)
    # The lock waits in the queue as long as the message may: lock_queue_ttl past its eta.
    queue_ttl_ms = int((options.queue_ttl + call.delay()) * 1000)
    named = {headers.ENQUEUE_TOKEN: token, headers.ENQUEUE_DIGEST: digest}
    try:  # a lock store that started a moment ago grants within seconds: the call waits for it
        outcome = wait_for_gate(lambda: runtime.store.acquire(keys.queued, token, queue_ttl_ms, holder,
                                                              state="queued", limit=limit),
                                lambda young: logger.info("singleton lock: %s: enqueue lock %s waits: %s",
                                                          task.name, keys.queued, young))
    except STORE_ERRORS as exc:
        # The ask may still land (a paused or slow store runs it when it answers again): the
        # message names its token, so the worker adopts that lock if it exists, or guards the run.
        return _unreachable(task, runtime, keys, options.on_lock_error, exc, lambda: publish(task_id, named),
                            lambda: runtime.renewer.release_later(keys.queued, token, queue_ttl_ms / 1000.0,
                                                                  state="queued"))
    if isinstance(outcome, Conflict):
        return _duplicate_at_enqueue(task, keys.queued, task_id, outcome, options.on_locked, publish, requested_id,
                                     call.continues)
    try:
        return publish(task_id, named)
    except BaseException:
        _release_unpublished(runtime, task, keys, token)
        raise


def _unreachable(task: Any, runtime: Any, keys: LockKeys, on_lock_error: str, error: BaseException,
                 publish_anyway: Callable[[], Any], withdraw_ask: Callable[[], None]) -> Any:
    problem = permanent_problem(error, "acquire")
    if problem is not None:  # a misconfiguration: whatever on_lock_error says, nothing goes out
        raise ConfigurationError(f"task {task.name}: the lock store {redact(runtime.settings.url)} refused "
                                 f"enqueue lock {keys.queued}: {problem}; nothing was published",
                                 task=task.name, key=keys.queued) from error
    if on_lock_error == "raise":
        # Nothing is published, so a lock the ask may still take would name a call that never
        # runs: it is released by token as soon as the store answers again.
        withdraw_ask()
        raise LockBackendError(f"task {task.name}: cannot reach Redis to take enqueue lock {keys.queued}: "
                               f"{error_text(error)}; nothing was published", task=task.name,
                               key=keys.queued) from error
    logger.warning("singleton lock: %s: Redis unavailable at enqueue (%s); publishing anyway, the worker "
                   "adopts the enqueue lock if the ask took it late, or guards the run", task.name,
                   error_text(error))
    return publish_anyway()


def _release_unpublished(runtime: Any, task: Any, keys: LockKeys, token: str) -> None:
    """Nothing was queued: nothing may stay locked."""
    try:
        runtime.store.release(keys.queued, token, state="queued")
    except STORE_ERRORS as exc:
        logger.warning("singleton lock: %s: releasing %s after a failed publish failed (%s)", task.name,
                       keys.queued, error_text(exc))


def _duplicate_at_enqueue(task: Any, key: str, task_id: str, conflict: Conflict, policy: str, publish: Publish,
                          requested_id: Optional[str], continues: bool) -> Any:
    decision = ON_LOCKED[policy].at_enqueue(task.name, key, conflict)
    if isinstance(decision, PublishUnlocked) and not decision.duplicate:
        logger.info("singleton lock: %s[%s]: the newest call waits its turn (%s): key %s held by %s (%s)",
                    task.name, task_id, policy, key, conflict.task_id or "?", conflict.state or "?")
        return publish(task_id, None)
    logger.info("singleton lock: %s: call at enqueue is a duplicate (%s): key %s held by %s (%s)",
                task.name, policy, key, conflict.task_id or "?", conflict.state or "?")
    signals.lock_conflict.send(sender=task, key=key, task_id=task_id, holder=conflict.task_id, action=policy,
                               at="enqueue", places=places_taken(conflict))
    if isinstance(decision, Refuse):
        raise decision.error
    if isinstance(decision, PublishUnlocked):
        return publish(task_id, None)  # the worker re-queues it until the lock is free
    assert isinstance(decision, SkipAtEnqueue)
    if continues:
        # A call that something follows (a chain's next step, a chord's body, a link) must end in
        # the worker, which skips it: its SUCCESS moves the chain on and counts toward the chord.
        return publish(task_id, {headers.SKIPPED: conflict.task_id or "?"})
    if (requested_id and requested_id != conflict.task_id) or not conflict.task_id:
        # The caller (a group, a chain, an explicit task_id) already holds a result for this id, or
        # the holder has none to wait on (a foreign key): it ends as a skipped duplicate does at run
        # time, instead of PENDING forever.
        store_skipped(task, task_id)
    return task.AsyncResult(conflict.task_id or task_id)


def _republish_own(current: Any, options: Any, delay: float, publish: Publish) -> Any:
    """The holder re-queues itself (``self.retry()``): the lock goes with the message."""
    if options.scope != "queued_or_running":
        # ``queued``: the run lock ends with this execution, which the retry waits for.
        return publish(current.task_id, {headers.AFTER: current.token})
    # The lock is handed over when this execution ends (not now: it may go on running, a cleanup
    # in ``finally`` say); the retry adopts it by token, waiting for that moment if it starts first.
    ours = {headers.ENQUEUE_TOKEN: current.token, headers.AFTER: current.token}
    held = current.key.rsplit(":", 1)[-1]  # the digest that names the lock handed over
    if is_digest(held):
        ours[headers.ENQUEUE_DIGEST] = held
    result = publish(current.task_id, ours)
    current.hand_over_ms = int((options.queue_ttl + delay) * 1000)
    return result
