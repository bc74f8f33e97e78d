"""One execution's attempt at its lock: what it asks the store, built once per execution.

An :class:`Attempt` knows the call's keys (derived once), its token, the enqueue
lock its message carries (if any), and who it is; it asks the store and reports
what it met. What to *do* about a holder is the duplicate policy's business
(:mod:`.policy`); what happens when the execution ends is :mod:`.exits`'.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Tuple, Union

from celery.exceptions import Reject, Retry

from ..calls import headers
from .. import signals
from ..calls.describe import describe_call
from .outcome import record_duplicate
from ..calls.limits import call_keys, call_limit, older_key
from ..runtime.lock_runtime import LockRuntime, runtime_for
from .taken import kept_by, places_taken
from ..store import (STORE_ERRORS, Completion, Conflict, Grant, Holder, NotOurs, RestartWait, error_text, new_token,
                    permanent_problem, wait_for_gate)

if TYPE_CHECKING:  # pragma: no cover
    from ..config.options import LockOptions

__all__ = ["Attempt"]

logger = logging.getLogger("celery_singleton_lock")


class Attempt:
    """What one execution needs to take its lock."""

    __slots__ = ("task", "request", "options", "runtime", "keys", "queued_digest", "token", "enqueue_token",
                 "after", "holder", "description", "limit", "guard")

    def __init__(self, task: Any, args: Sequence[Any], kwargs: Mapping[str, Any], request: Any = None) -> None:
        options, argument_key = task.singleton_lock()
        runtime = runtime_for(task.app)
        if request is None:
            request = task.request
        digest = argument_key(args, kwargs)
        self.task = task
        self.request = request
        self.options: "LockOptions" = options
        self.runtime: LockRuntime = runtime
        self.token: str = request.get(headers.TOKEN) or new_token()
        #: The enqueue lock handed over by the publisher, while it may still be ours to adopt;
        #: ``None`` when the message came without one (send_task by name, eager mode) or once
        #: it was adopted, freed, or found gone (see :meth:`drop_queue_slot`).
        self.enqueue_token: Optional[str] = headers.token(request, headers.ENQUEUE_TOKEN) if options.at_enqueue else None
        # The enqueue lock is the one the message names (the publisher derived it from what this
        # worker receives, so the two agree; if they did not, the named one is still adopted).
        self.queued_digest = headers.enqueue_digest(request, lambda: digest) if self.enqueue_token else digest
        #: How many executions of the key may hold it at once, and how long a place is kept:
        #: the keys are the key's places unless it is the singleton lock (see :mod:`.limits`).
        self.limit = call_limit(task.name, options, args, kwargs)
        name = options.name or task.name
        self.keys = call_keys(runtime.layout.keys(name, digest, options.scope, self.queued_digest), self.limit)
        #: The run lock's key as commits before the keys by name and values named it, held beside it
        #: while a rolling deploy across that change has older workers (:mod:`.guard`); ``""`` when not.
        self.guard = older_key(runtime.layout, name, argument_key.old_digest(args, kwargs), options.scope,
                               self.limit, self.keys.lock) if runtime.guard_old_keys else ""
        #: The token of the execution whose self.retry() published this message, if one did.
        self.after: Optional[str] = headers.token(request, headers.AFTER)
        #: The call in a few words, when the app stores it with the lock (``singleton_lock_describe``).
        self.description = describe_call(argument_key, args, kwargs) if runtime.describe else None
        self.holder = Holder(task_id=request.id or "", host=runtime.hostname, pid=os.getpid(),
                             since_ms=int(time.time() * 1000), heartbeat_ms=int(options.heartbeat * 1000),
                             describe=self.description or "", task="" if name == task.name else task.name)

    @property
    def key(self) -> str:
        """The run lock's key."""
        return self.keys.lock

    # -- asking the store ------------------------------------------------------------------------
    def acquire(self) -> Tuple[Union[Grant, Conflict], float]:
        """Adopt the enqueue lock this message carries, else take the run lock directly.

        Returns the outcome and the monotonic time before the ask (the lease counts from it).
        A lock store that started a moment ago grants nothing yet: the ask waits, in place,
        for its window to pass (a few seconds at most, see :func:`~.store.wait_for_gate`).
        """
        try:
            return wait_for_gate(self._ask, self._waits_for_young_store)
        finally:
            # A release held back for this ask went with it, unless the ask went elsewhere (another
            # connection, another store): then it goes now, before a body or a wait that may be long.
            self.runtime.held_releases.write_now()

    def _ask(self) -> Tuple[Union[Grant, Conflict], float]:
        started = time.monotonic()
        store, keys, ttl_ms = self.runtime.store, self.keys, int(self.options.ttl * 1000)
        if self.enqueue_token:
            outcome = store.adopt(keys.queued, keys.lock, self.enqueue_token, self.token, ttl_ms, self.holder,
                                  limit=self.limit)
            if isinstance(outcome, NotOurs):
                self.drop_queue_slot()  # expired or released while queued: guard at run time
            else:
                if isinstance(outcome, Grant) or (keys.queued == keys.lock and not outcome.same_token):
                    # Adopted, or (one key) taken over by someone else; a holder still running
                    # under our enqueue token is the self.retry() that will hand it to us.
                    self.drop_queue_slot()
                return outcome, started
        return store.acquire(keys.lock, self.token, ttl_ms, self.holder, limit=self.limit), started

    def ask_fence(self) -> Optional[int]:
        """The fencing token of this execution's lock; ``None`` when it no longer holds it."""
        return self.runtime.store.fence(self.keys.lock, self.keys.fence, self.token)

    def holder_token(self) -> Optional[str]:
        """The token the run lock is held under now (``None`` when free); raises store errors."""
        info = self.runtime.store.holder(self.keys.lock)
        return None if info is None else info.get("token")

    def follows(self, conflict: Conflict) -> bool:
        """Whether the lock is held (or was, a moment ago) by the execution that re-queued this message."""
        if not self.after or conflict.task_id != self.request.id:
            return False
        if conflict.holder_token is not None:  # one of a key's places, named by its token
            return conflict.holder_token == self.after
        try:
            token = self.holder_token()
        except STORE_ERRORS:
            return False
        return token is None or token == self.after

    @property
    def holds_queue_slot(self) -> bool:
        """Whether this is the copy that ``queued`` lets wait behind a running one."""
        return bool(self.enqueue_token) and self.keys.queued != self.keys.lock

    def drop_queue_slot(self) -> None:
        """Forget the enqueue lock: adopted, found gone, or freed (see :meth:`give_up_queue_slot`)."""
        self.enqueue_token = None

    def give_up_queue_slot(self) -> None:
        """A ``queued`` copy that will not run frees its place in the queue."""
        if self.enqueue_token:
            try:
                self.runtime.store.release(self.keys.queued, self.enqueue_token, state="queued")
            except STORE_ERRORS as exc:
                logger.warning("singleton lock: freeing queue slot %s failed (%s); it expires within "
                               "lock_queue_ttl", self.keys.queued, error_text(exc))
            self.drop_queue_slot()

    # -- completions (acks_late redeliveries) ----------------------------------------------------
    @property
    def notes_completions(self) -> bool:
        """Whether releases note that this task ran to the end: only ``acks_late`` messages are
        handed out again while their first delivery runs (and not every store can note it)."""
        return bool(self.task.acks_late) and self.runtime.store.records_completions

    def already_ran(self) -> bool:
        """Whether an earlier delivery of this message ran to the end (noted at its release)."""
        if not self.notes_completions:
            return False
        try:
            return self.runtime.store.completed(self.keys.done, self.request.id)
        except STORE_ERRORS:
            return False  # the lock still keeps two copies from running at once

    def completion(self, held_for: float, raised: Optional[BaseException] = None) -> Optional[Completion]:
        """What the release notes for later redeliveries of this message, if one may come.

        Only an execution that ended is noted: ``Reject`` (its message goes back to the queue, or
        away) and ``Retry`` (a new message carries the task on) are no end, and the copies that
        follow them must run. The release notes the task id when a redelivered copy met the lock,
        when this delivery is itself a redelivery, or when it ran long enough for the broker's
        visibility timeout to hand the message out again (``lock_queue_ttl`` is how long it is
        remembered).
        """
        if not self.notes_completions or isinstance(raised, (Reject, Retry)):
            return None
        visibility = self.runtime.visibility_timeout
        always = headers.redelivered(self.request) or (visibility is not None and held_for >= visibility / 2)
        return Completion(self.keys.done, self.request.id or "", int(self.options.queue_ttl * 1000), bool(always))

    # -- saying what it met ----------------------------------------------------------------------
    def _waits_for_young_store(self, young: RestartWait) -> None:
        logger.info("singleton lock: %s[%s] waits for lock %s: %s", self.task.name, self.request.id,
                    self.keys.lock, young)

    def waits_turn(self, conflict: Conflict, behind: str) -> None:
        """Say that this copy runs after the holder: it is no duplicate (no ``lock_conflict``)."""
        logger.info("singleton lock: %s[%s] waits its turn behind %s: key %s held by %s on %s pid %s",
                    self.task.name, self.request.id, behind, self.keys.lock, kept_by(conflict),
                    conflict.host or "?", conflict.pid if conflict.pid is not None else "?")

    def conflict(self, holder: Optional[Conflict], action: str, key: Optional[str] = None) -> None:
        """Log the duplicate and send ``lock_conflict`` (``holder`` ``None``: its first delivery ran); a
        key with places says how many are taken and when the soonest frees. ``key``: the key it met,
        when not the run lock (the older key, :mod:`.guard`)."""
        task_id = holder.task_id if holder is not None else self.request.id
        key = key or self.keys.lock
        logger.info("singleton lock: %s[%s] is a duplicate (%s): key %s held by %s on %s pid %s%s",
                    self.task.name, self.request.id, action, key,
                    kept_by(holder) if holder is not None else f"task {task_id}",
                    (holder.host if holder else "") or "?",
                    holder.pid if holder is not None and holder.pid is not None else "?", _places(holder))
        record_duplicate(self.task, key, task_id, action, self.description)
        signals.lock_conflict.send(sender=self.task, key=key, task_id=self.request.id,
                                   holder=task_id, action=action, at="run", description=self.description,
                                   places=places_taken(holder))

    def waited(self, outcome: Union[Grant, Conflict, object], began: float) -> None:
        """Send ``lock_waited``: this duplicate stopped waiting, with the lock or without it."""
        acquired = not isinstance(outcome, Conflict)
        signals.lock_waited.send(sender=self.task, key=self.keys.lock, task_id=self.request.id,
                                 holder=None if acquired else getattr(outcome, "task_id", None),
                                 waited=time.monotonic() - began, acquired=acquired, description=self.description)

    def store_failed(self, exc: BaseException, step: str) -> Optional[str]:
        """Send ``lock_store_error`` for a store that neither granted nor refused; return what is set up
        wrong when it refused (a misconfiguration), ``None`` for an outage."""
        problem = permanent_problem(exc, step)
        signals.lock_store_error.send(sender=self.task, key=self.keys.lock, task_id=self.request.id,
                                      kind="outage" if problem is None else "misconfiguration", error=exc)
        return problem


def _places(holder: Optional[Conflict]) -> str:
    """What a refusal of one of a key's places adds to the log line (nothing for a singleton lock)."""
    taken = places_taken(holder)
    if holder is None or taken is None:
        return ""
    return f" ({taken}; {frees(holder)})"


def frees(holder: Conflict) -> str:
    """When a place of a full key frees, as far as the store knows it. A place given back frees when
    its window ends; a held one when its run ends, never before its window ends, and at the latest
    when its lease runs out (an upper bound only: the lease is the time a dead holder keeps it)."""
    latest = holder.pttl_ms / 1000
    if holder.state == "restarted":
        return (f"the lock store started less than a window ago and may have lost the places of this key it "
                f"granted before: it grants one again in {latest:.1f}s")
    if holder.window_ms is None:
        return f"a place frees when a run ends, at the latest in {latest:.1f}s (its lease)"
    earliest = holder.window_ms / 1000
    if holder.window_ms + 1 >= holder.pttl_ms:
        return f"the soonest frees in {earliest:.1f}s, when its window ends"
    return (f"the soonest frees in {earliest:.1f}s, when its window ends, if its run is over by then (else "
            f"when it is, at the latest in {latest:.1f}s: its lease)")
