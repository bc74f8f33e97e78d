"""Ask a lock store, once, everything the lock protocol will ask of it.

A worker that starts against a misconfigured lock store (a wrong password, an
ACL user without a command the scripts run, a read-only replica) would
otherwise find out task by task. :func:`probe_store` runs every script of the
protocol, the way the worker sends it, on a throw-away lock of its own under
the app's prefix (so the same key and channel patterns apply), then deletes
what it wrote. Redis checks the commands inside a script against the caller's
ACL only when the script runs them, so each script is run to its end. The
generation scripts (``on_locked="replace"``, ``lock_debounce``) are run only for an
app that has such a task: a store user set up for the older command line, without
their hash commands, serves every other app.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Callable, Optional

from .backend import Completion, Holder, new_token
from .redis_backend import RedisBackend
from .keys import KeyLayout
from .places import Limit, limited
from .start_gate import RestartWait, wait_for_gate

__all__ = ["probe_store", "ProbeFailed", "PROBE_TASK"]

#: The task name the probe's keys are filed under (a name no Celery task has).
PROBE_TASK = "celery_singleton_lock.probe"
#: The probe's places: two, kept a moment after release, so the window's path runs too.
PROBE_LIMIT = Limit(2, 1)

logger = logging.getLogger("celery_singleton_lock")


def _say_young(young: RestartWait) -> None:
    logger.info("singleton lock: the lock store is not granting yet at worker start: %s; waiting", young)


class ProbeFailed(Exception):
    """One step of the probe failed: ``step`` names it (a script, or ``holder``...), ``error`` is Redis's."""

    def __init__(self, step: str, error: BaseException) -> None:
        super().__init__(step, error)
        self.step = step
        self.error = error


class _Step:
    """Names the step under way, for the error it may raise."""

    def __init__(self) -> None:
        self.name = "connect"

    def __call__(self, name: str) -> "_Step":
        self.name = name
        return self


def _subscribe(store: RedisBackend, channel: str, timeout: float = 5.0) -> None:
    """Subscribe as ``on_locked="wait"`` does, and read the answer: a refusal arrives as a reply, not at once."""
    pubsub = store.client.pubsub()
    try:
        pubsub.subscribe(channel)
        deadline = time.monotonic() + timeout
        while pubsub.get_message(timeout=max(deadline - time.monotonic(), 0.0)) is None:
            if time.monotonic() >= deadline:
                return  # no confirmation in time: a slow server, not a refusal
    finally:
        pubsub.close()


def _probe_generations(store: RedisBackend, generation: str, task_id: str, ttl_ms: int, step: _Step) -> None:
    """Publish a call of the probe key, look at it and claim its run, as a latest-wins task does."""
    generations = store.generations
    if generations is None:
        return
    step("gen_reserve")
    reserved = generations.reserve(generation, ttl_ms)
    step("gen_supersede")
    generations.supersede(generation, reserved.gen, task_id, ttl_ms)
    step("gen_peek")
    generations.peek(generation, reserved.gen)
    step("gen_claim")
    generations.claim(generation, reserved.gen, task_id, ttl_ms)


def _probe_places(store: RedisBackend, key: str, token: str, ttl_ms: int, holder: Holder, step: _Step) -> None:
    """Take one of a key's places, renew it and give it back, as a task with a limit or a window does."""
    step("place_acquire")
    store.acquire(key, token, ttl_ms, holder, limit=PROBE_LIMIT)
    step("place_renew")
    store.renew([(key, token, ttl_ms)])
    step("place_release")
    store.release(key, token)


def probe_store(store: RedisBackend, layout: KeyLayout, ttl_ms: int = 10_000,
                on_young: Optional[Callable[[RestartWait], None]] = _say_young, generations: bool = False,
                places: bool = False) -> None:
    """Run the protocol once on a probe lock; raise :class:`ProbeFailed` for the first error Redis answers.

    ``store`` is one Redis (a quorum is probed master by master). The probe lock
    lives ``ttl_ms`` at most, should the probe be cut short. A server that started a
    moment ago is waited for (``on_young`` is told), as grants wait for it. With
    ``generations``, the scripts naming a key's newest call are run too; with ``places``, those
    of a key's places (:mod:`.places`).
    """
    queued_token, token = new_token(), new_token()
    queued, key = layout.queued(PROBE_TASK, queued_token), layout.lock(PROBE_TASK, queued_token)
    fence, done = layout.fence(PROBE_TASK, queued_token), layout.done(PROBE_TASK, queued_token)
    generation = layout.generation(PROBE_TASK, queued_token)
    placed = limited(layout.keys(PROBE_TASK, queued_token, "running"), PROBE_LIMIT).lock
    holder = Holder(task_id=queued_token, host=socket.gethostname(), pid=os.getpid(),
                    since_ms=int(time.time() * 1000), heartbeat_ms=ttl_ms // 3)
    step = _Step()
    try:
        step("acquire")  # a server that started a moment ago grants within seconds: no outage
        wait_for_gate(lambda: store.acquire(queued, queued_token, ttl_ms, holder, state="queued"), on_young)
        step("adopt")
        store.adopt(queued, key, queued_token, token, ttl_ms, holder)  # loads the script
        step("fence")
        store.fence(key, fence, token)
        step("renew")
        store.renew([(key, token, ttl_ms)])
        step("mark_redelivered")
        store.mark_redelivered(key, holder.task_id)
        step("holder")
        store.holder(key)
        step("requeue")
        store.requeue(key, token, ttl_ms)
        step("await")
        store.await_release(key)  # a waiter's ask: the release below announces itself
        step("raise_fence")
        store.raise_fence(fence, 1)
        step("release")
        store.release(key, token, Completion(done, holder.task_id, ttl_ms, True), "queued")  # requeued above
        step("completed")
        store.completed(done, holder.task_id)
        step("subscribe")
        _subscribe(store, key)
        if generations:
            _probe_generations(store, generation, queued_token, ttl_ms, step)
        if places:
            _probe_places(store, placed, token, ttl_ms, holder, step)
    except Exception as exc:
        raise ProbeFailed(step.name, exc) from exc
    finally:
        try:
            store.client.delete(queued, key, fence, done, generation, placed)
        except Exception:  # the probe's own error says what matters; its lock expires anyway
            pass
