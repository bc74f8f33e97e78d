"""The duplicate-policy matrix: what one execution does as it goes for its lock, cell by cell.

Every cell of scope x ``on_locked`` x delivery x lock state is a test of its own, against
``MemoryBackend`` (no Redis, no worker, no sleep): the lock state is set up on the backend directly,
the message is a pushed request, and the execution goes as far as the duplicate policy's decision
(``Attempt``, its ask of the store, ``policy.decide``), where ``run_guarded`` hands over to enacting
it. Each test then checks the decision and what the backend shows afterwards.

Deliveries (the message that starts; its task id is ``M``):

``first``        delivered for the first time.
``redelivered``  handed out again by the broker (``delivery_info["redelivered"]``): a copy of the
                 holder's own message, under the holder's task id.
``retry``        the ``self.retry()`` message of execution ``P`` of ``M``, with the headers the
                 publisher gives it (``AFTER=P``; under ``queued_or_running`` also the lock handed
                 over, ``ENQUEUE_TOKEN=P``; :func:`test_the_deliveries_are_what_the_publisher_sends`).

Lock states (what the lock's keys hold as it starts; the holder named after the delivery):

``free``     nothing (for ``retry``: the predecessor has let go already).
``running``  a running execution holds the run lock: another call ``X`` (``first``); the earlier
             delivery of ``M``, either alive (it renews) or dead (its lease runs out) (``redelivered``);
             the predecessor ``P``, still finishing (``retry``).
``queued``   an enqueue lock that is not this message's waits at the scope's enqueue key: another
             call's (``first``, ``retry``); one under ``M``'s own task id, handed on to a later
             message of ``M`` by ``self.retry()`` (``redelivered``).
``own``      this message's own enqueue lock waits for it, the run lock free.

A message carries an enqueue token in ``own`` (and a ``queued_or_running`` retry) only: elsewhere it
was published without one (``send_task`` by name, ``on_locked="retry"`` at enqueue, a store outage
at enqueue). Options refuse ``on_locked="wait"`` with ``queued_or_running``: those cells assert the
refusal. Cells that cannot arise (an enqueue lock of a ``running``-scope task's message, or of a
``queued``-scope retry) assert why, on the publisher.

What the cells expect is the product contract (what a duplicate does, the ``queued`` scope, the
failure table; in the docs too: docs/singleton-locks.md, "Duplicates", and docs/failures.md): a duplicate follows ``on_locked``; a redelivered copy of a running
message stores nothing, but runs once a dead first delivery's lock has run out; a retry, and the
copy ``queued`` keeps waiting behind a running one, are no duplicates: they go back to the queue,
uncounted; an enqueue lock is adopted into the run lock with a larger fence.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest
from celery import Celery
from celery.signals import before_task_publish

from celery_singleton_lock import LockedTask
from celery_singleton_lock.calls import headers
from celery_singleton_lock.run.attempt import Attempt
from celery_singleton_lock.run.decisions import Decision, Fail, Ignored, Requeue, Run, Skip
from celery_singleton_lock.exceptions import ConfigurationError, LockedError
from celery_singleton_lock.run.policy import decide
from celery_singleton_lock.runtime import runtime_for
from celery_singleton_lock.store import Completion, Grant, Holder, LockKeys, MemoryBackend

TASK = "matrix.job"
ARGS = (7,)
M = "message-m"  # this message's task id
OTHER = "call-x"  # another call with the same arguments
TOKEN = "token-of-this-delivery"
WAIT = 0.01  # lock_wait_timeout: each cell that waits blocks this long, no more
TTL_MS = 30_000
QUEUE_TTL_MS = 3_600_000

SCOPES = ("running", "queued", "queued_or_running")
ON_LOCKED = ("skip", "raise", "retry", "wait", "replace")
DELIVERIES = ("first", "redelivered", "retry")
STATES = ("free", "running", "queued", "own")


# -- the world a cell runs in ----------------------------------------------------------------------

class Clock:
    """The backend's clock: seconds that pass only when a test (or a hook) says so."""

    def __init__(self) -> None:
        self.now = 10_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Store(MemoryBackend):
    """``MemoryBackend``, plus what the holder does while a copy waits on the lock's announcements:
    :meth:`meanwhile` runs once, as the first wait on that key begins (after its subscription)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self._meanwhile: Dict[str, Callable[[], object]] = {}

    def meanwhile(self, key: str, action: Callable[[], object]) -> None:
        self._meanwhile[key] = action

    @contextmanager
    def release_events(self, key: str) -> Iterator[Any]:
        with super().release_events(key) as events:
            yield _Meanwhile(events, self._meanwhile.pop(key, None))

    def snapshot(self) -> Dict[str, Dict[str, str]]:
        """Every lock as its holder holds it: without ``waiting``, which a waiting copy sets on a lock it
        leaves otherwise untouched (the holder's to announce its release, not a change of hands)."""
        return {key: {k: v for k, v in self.holder(key).items() if k != "waiting"}  # type: ignore[union-attr]
                for key in self.keys()}


class _Meanwhile:
    def __init__(self, events: Any, action: Optional[Callable[[], object]]) -> None:
        self._events, self._action = events, action

    def wait(self, timeout: float) -> bool:
        action, self._action = self._action, None
        if action is not None:
            action()
        return self._events.wait(timeout)

    def listen(self, timeout: float) -> bool:
        action, self._action = self._action, None
        if action is not None:
            action()
        return self._events.listen(timeout)

    def follow(self, first: bool) -> bool:
        return bool(self._events.follow(first))


@dataclass
class World:
    app: Celery
    task: Any
    store: Store
    clock: Clock
    scope: str
    tokens_held: List[str] = field(default_factory=list)  # self.lock.token of each body that ran

    @property
    def digest(self) -> str:
        return self.task.lock_digest(ARGS, {})

    @property
    def keys(self) -> LockKeys:
        return runtime_for(self.app).layout.keys(TASK, self.digest, self.scope)

    def hold(self, key: str, token: str, task_id: str, state: str = "running", ttl_ms: int = TTL_MS,
             heartbeat_ms: int = 10_000) -> None:
        """Set the lock state up directly on the backend."""
        holder = Holder(task_id=task_id, host="elsewhere", pid=99, since_ms=1, heartbeat_ms=heartbeat_ms)
        outcome = self.store.acquire(key, token, ttl_ms, holder, state=state)
        assert isinstance(outcome, Grant)

    def execute(self, message: Dict[str, Any]) -> Tuple[Decision, Attempt]:
        """One execution up to its decision, as ``run_guarded`` goes: a redelivery of a message that
        already ran is ignored; a grant runs; a holder is judged by the turns, then ``on_locked``."""
        self.task.push_request(**message)
        try:
            attempt = Attempt(self.task, ARGS, {})
            if headers.redelivered(attempt.request) and attempt.already_ran():
                return Ignored(), attempt
            outcome, started = attempt.acquire()
            return (Run(outcome, started) if isinstance(outcome, Grant) else decide(attempt, outcome)), attempt
        finally:
            self.task.pop_request()


def make_world(scope: str, on_locked: str) -> World:
    clock = Clock()
    store = Store(clock)
    app = Celery("matrix", broker="memory://", set_as_current=False)
    app.conf.singleton_lock_backend = store
    tokens_held: List[str] = []

    @app.task(base=LockedTask, bind=True, name=TASK, shared=False, acks_late=True, lock_key=("n",),
              lock_scope=scope, on_locked=on_locked, lock_ttl=TTL_MS / 1000, lock_wait_timeout=WAIT,
              lock_queue_ttl=QUEUE_TTL_MS / 1000)
    def job(self: Any, n: int, republish: bool = False) -> int:
        tokens_held.append(self.lock.token)
        if republish:  # what self.retry() does: the same message again, under the same task id
            self.apply_async((n,), task_id=self.request.id, countdown=60)
        return n

    return World(app, app.tasks[TASK], store, clock, scope, tokens_held)


@pytest.fixture
def worlds() -> Iterator[Callable[[str, str], World]]:
    made: List[World] = []

    def make(scope: str, on_locked: str) -> World:
        made.append(make_world(scope, on_locked))
        return made[-1]

    yield make
    for world in made:
        runtime_for(world.app).close()  # stops a heartbeat a real execution started


@contextmanager
def published() -> Iterator[List[Dict[str, Any]]]:
    """The library headers of every message published in the block."""
    sent: List[Dict[str, Any]] = []

    def record(headers: Optional[Dict[str, Any]] = None, **_: Any) -> None:
        sent.append({k: v for k, v in (headers or {}).items() if k.startswith("singleton_lock_")})

    before_task_publish.connect(record, weak=False)
    try:
        yield sent
    finally:
        before_task_publish.disconnect(record)


# -- the cells -------------------------------------------------------------------------------------

RUN, ADOPT, DUPLICATE, GUARD, IGNORED, AFTER = "run", "adopt", "duplicate", "guard", "ignored", "after"
NO_ENQUEUE_LOCK, RETRY_WITHOUT_ENQUEUE_LOCK = "n/a: no enqueue lock", "n/a: retry without enqueue lock"

#: (scope, delivery, lock state) -> what the contract says the execution does:
#:   run        runs: takes the run lock with a larger fence
#:   adopt      runs: adopts its enqueue lock into the run lock with a larger fence
#:   duplicate  a duplicate: ``on_locked`` decides; the lock is left as it is
#:   guard      a redelivery of the running message: ignored while that delivery is alive, run once
#:              its lease ran out
#:   ignored    a stale copy of a message whose lock went on to a later message of it: stores nothing
#:   after      a retry of a still finishing execution: waits ``lock_wait_timeout``, then back to the
#:              queue, uncounted
EXPECTED: Dict[Tuple[str, str, str], str] = {
    ("running", "first", "free"): RUN,
    ("running", "first", "running"): DUPLICATE,
    ("running", "first", "queued"): DUPLICATE,  # left by a scope change: held is held
    ("running", "first", "own"): NO_ENQUEUE_LOCK,
    ("running", "redelivered", "free"): RUN,
    ("running", "redelivered", "running"): GUARD,
    ("running", "redelivered", "queued"): IGNORED,
    ("running", "redelivered", "own"): NO_ENQUEUE_LOCK,
    ("running", "retry", "free"): RUN,
    ("running", "retry", "running"): AFTER,
    ("running", "retry", "queued"): DUPLICATE,
    ("running", "retry", "own"): NO_ENQUEUE_LOCK,
    ("queued", "first", "free"): RUN,
    ("queued", "first", "running"): DUPLICATE,
    ("queued", "first", "queued"): RUN,  # one copy queued beside one running: its slot is not the run lock
    ("queued", "first", "own"): ADOPT,
    ("queued", "redelivered", "free"): RUN,
    ("queued", "redelivered", "running"): GUARD,
    ("queued", "redelivered", "queued"): RUN,
    ("queued", "redelivered", "own"): ADOPT,
    ("queued", "retry", "free"): RUN,
    ("queued", "retry", "running"): AFTER,
    ("queued", "retry", "queued"): RUN,
    ("queued", "retry", "own"): RETRY_WITHOUT_ENQUEUE_LOCK,
    ("queued_or_running", "first", "free"): RUN,
    ("queued_or_running", "first", "running"): DUPLICATE,
    ("queued_or_running", "first", "queued"): DUPLICATE,
    ("queued_or_running", "first", "own"): ADOPT,
    ("queued_or_running", "redelivered", "free"): RUN,
    ("queued_or_running", "redelivered", "running"): GUARD,
    ("queued_or_running", "redelivered", "queued"): IGNORED,
    ("queued_or_running", "redelivered", "own"): ADOPT,
    ("queued_or_running", "retry", "free"): RUN,  # the handed-over lock is gone: NotOurs, then the run lock
    ("queued_or_running", "retry", "running"): AFTER,
    ("queued_or_running", "retry", "queued"): DUPLICATE,
    ("queued_or_running", "retry", "own"): ADOPT,  # the lock its predecessor handed over
}

#: (scope, on_locked) refused where the task is defined -> the refusal's words.
REFUSED = {("queued_or_running", "wait"): 'on_locked="wait" makes no sense with lock_scope="queued_or_running"',
           ("running", "replace"): 'on_locked="replace" needs lock_scope="queued" or "queued_or_running"'}


def _cells() -> Iterator[Any]:
    for scope in SCOPES:
        for on_locked in ON_LOCKED:
            for delivery in DELIVERIES:
                for state in STATES:
                    fates = ("alive", "dead") if EXPECTED[scope, delivery, state] == GUARD else (None,)
                    for fate in fates:
                        cell = f"{state}-{fate}" if fate else state
                        yield pytest.param(scope, on_locked, delivery, state, fate,
                                           id=f"{scope}/{on_locked}/{delivery}/{cell}")


@dataclass
class Given:
    message: Dict[str, Any]
    holder_task_id: Optional[str] = None  # whose lock it meets at the run key, if anyone's
    enqueue_token: Optional[str] = None  # the enqueue lock the message carries


def given(world: World, delivery: str, state: str, fate: Optional[str]) -> Given:
    """Set the cell's lock state up on the backend and build its message."""
    keys, store = world.keys, world.store
    message: Dict[str, Any] = {"id": M, "delivery_info": {"redelivered": delivery == "redelivered"},
                               headers.TOKEN: TOKEN}
    enqueue_token = None
    if delivery == "retry":
        message[headers.AFTER] = "token-p"
        if world.scope == "queued_or_running":
            enqueue_token = "token-p"
    holder_task_id: Optional[str] = None
    if state == "running":
        if delivery == "first":
            world.hold(keys.lock, "token-x", OTHER)
            holder_task_id = OTHER
        elif delivery == "redelivered":
            # The first delivery of M, on a 1 s lease with 2 ms left, renewing every 10 ms (if alive).
            world.hold(keys.lock, "token-m0", M, ttl_ms=1_000, heartbeat_ms=10)
            world.clock.advance(0.998)
            if fate == "alive":
                store.meanwhile(keys.lock, lambda: store.renew([(keys.lock, "token-m0", 1_000)]))
            else:
                store.meanwhile(keys.lock, lambda: world.clock.advance(0.01))  # no renewal: it runs out
            holder_task_id = M
        else:
            world.hold(keys.lock, "token-p", M)  # the predecessor, still finishing
            holder_task_id = M
    elif state == "queued":
        enqueue_key = runtime_for(world.app).layout.enqueue(TASK, world.digest, world.scope)
        if delivery == "redelivered":  # M's lock, handed on by self.retry() to a later message of M
            world.hold(enqueue_key, "token-m-later", M, state="queued", ttl_ms=QUEUE_TTL_MS)
        else:
            world.hold(enqueue_key, "token-x", OTHER, state="queued", ttl_ms=QUEUE_TTL_MS)
        holder_task_id = (M if delivery == "redelivered" else OTHER) if enqueue_key == keys.lock else None
    elif state == "own":
        if delivery == "retry":  # the predecessor's run lock, handed back to the queue as it ended
            world.hold(keys.lock, "token-p", M)
            assert store.requeue(keys.lock, "token-p", QUEUE_TTL_MS)
        else:
            enqueue_token = "token-e"
            world.hold(keys.queued, enqueue_token, M, state="queued", ttl_ms=QUEUE_TTL_MS)
    if enqueue_token:
        message[headers.ENQUEUE_TOKEN] = enqueue_token
        message[headers.ENQUEUE_DIGEST] = world.digest
    return Given(message, holder_task_id, enqueue_token)


def expect_duplicate(on_locked: str, decision: Decision, holder_task_id: Optional[str], waited: float) -> None:
    """``on_locked`` at run time, as the contract's "what happens to a duplicate" has it."""
    if on_locked == "skip":  # SUCCESS with result None, body not run
        assert isinstance(decision, Skip), decision
    elif on_locked == "raise":  # FAILURE with LockedError carrying the holder's task id
        assert isinstance(decision, Fail) and isinstance(decision.error, LockedError), decision
        assert decision.error.holder == holder_task_id
    elif on_locked == "retry":  # re-queued, counted against lock_retry_max
        assert isinstance(decision, Requeue) and decision.counted is True, decision
        assert decision.conflict is not None and decision.conflict.task_id == holder_task_id
    elif on_locked == "replace":  # the newest call (no newer one superseded it) waits its turn, uncounted
        assert isinstance(decision, Requeue) and decision.counted is False, decision
        assert decision.conflict is not None and decision.conflict.task_id == holder_task_id
    else:  # waited lock_wait_timeout for a release that did not come, then FAILURE with LockedError
        assert isinstance(decision, Fail) and isinstance(decision.error, LockedError), decision
        assert decision.error.holder == holder_task_id
        assert waited >= WAIT


@pytest.mark.parametrize("scope, on_locked, delivery, state, fate", list(_cells()))
def test_given_lock_state_when_delivery_starts_then_as_the_contract_says(
        worlds, scope, on_locked, delivery, state, fate):
    if (scope, on_locked) in REFUSED:
        # Then the task is refused where it is defined, before any message of it exists
        with pytest.raises(ConfigurationError, match=REFUSED[scope, on_locked]):
            make_world(scope, on_locked)
        return
    expected = EXPECTED[scope, delivery, state]
    world = worlds(scope, on_locked)
    if expected == NO_ENQUEUE_LOCK:
        assert_running_scope_publishes_without_enqueue_lock(world)
        return
    if expected == RETRY_WITHOUT_ENQUEUE_LOCK:
        assert_retry_carries(world, enqueue_lock=False)
        return

    # Given the lock state on the backend and the message
    setup = given(world, delivery, state, fate)
    before, fence_before = world.store.snapshot(), world.store.counter(world.keys.fence)
    # When the delivery starts
    started = time.monotonic()
    decision, attempt = world.execute(setup.message)
    waited = time.monotonic() - started
    after = world.store.snapshot()

    # Then
    if expected == GUARD:
        expected = RUN if fate == "dead" else IGNORED
    if expected in (RUN, ADOPT):
        assert isinstance(decision, Run), decision
        # its fence is larger than every earlier holder's
        assert world.store.fence(world.keys.lock, world.keys.fence, TOKEN) == fence_before + 1
        lock = after.pop(world.keys.lock)
        assert (lock["token"], lock["task_id"], lock["state"]) == (TOKEN, M, "running")
        before.pop(world.keys.lock, None)  # whatever held it ran out (a dead delivery) or was adopted
        if expected == ADOPT:
            assert before.pop(world.keys.queued, None) is not None or world.keys.queued == world.keys.lock
            assert attempt.enqueue_token is None  # the slot is the run lock now
        assert after == before  # nothing else touched (another call's queue slot stays)
        return
    # Nothing runs and nothing is taken: the holder keeps its lock as it was
    assert world.store.counter(world.keys.fence) == fence_before
    if fate == "alive":
        # a redelivered copy met the running delivery: the holder notes it, to remember its completion
        assert after[world.keys.lock].pop("redelivered") == "1"
        assert before[world.keys.lock].pop("redelivered") == ""
        assert {k: v for k, v in after[world.keys.lock].items() if k != "pttl"} == {
            k: v for k, v in before[world.keys.lock].items() if k != "pttl"}
        assert int(after[world.keys.lock]["pttl"]) > int(before[world.keys.lock]["pttl"])  # it renewed
    else:
        assert after == before
    if expected == IGNORED:
        assert isinstance(decision, Ignored), decision  # stores nothing: never the holder's result overwritten
    elif expected == AFTER:
        # whatever on_locked says: the retry is no duplicate of the execution that sent it
        assert isinstance(decision, Requeue) and decision.counted is False, decision
        assert decision.conflict is not None and decision.conflict.task_id == M and waited >= WAIT
        assert attempt.enqueue_token == setup.enqueue_token  # a handed-over lock stays its to adopt
    else:
        assert expected == DUPLICATE
        expect_duplicate(on_locked, decision, setup.holder_task_id, waited)


def test_the_matrix_covers_every_cell():
    cells = list(_cells())
    assert set(EXPECTED) == {(s, d, l) for s in SCOPES for d in DELIVERIES for l in STATES}
    guards = sum(1 for key, value in EXPECTED.items() if value == GUARD)
    assert len(cells) == len(SCOPES) * len(ON_LOCKED) * len(DELIVERIES) * len(STATES) + guards * len(ON_LOCKED)


# -- what the publisher sends: the deliveries above, and why some cells cannot arise --------------

def assert_running_scope_publishes_without_enqueue_lock(world: World) -> None:
    # Given a running-scope task, when a call is published, then no lock is taken and the message
    # names none: no message of it carries an enqueue lock of its own.
    with published() as sent:
        world.task.apply_async(ARGS, task_id=M)
    assert sent == [{}]
    assert world.store.keys() == []


def assert_retry_carries(world: World, enqueue_lock: bool) -> Dict[str, Any]:
    """Run one execution whose body re-publishes itself (what ``self.retry()`` does) and return
    the retry message's library headers."""
    with published() as sent:
        result = world.task.apply(ARGS, {"republish": True}, task_id=M)
    assert result.successful(), result.traceback
    [predecessor] = world.tokens_held
    [retry] = sent
    assert retry[headers.AFTER] == predecessor  # it waits for the execution that sent it
    if enqueue_lock:
        # queued_or_running: the lock goes with the message, handed back to the queue as the body ended
        assert retry[headers.ENQUEUE_TOKEN] == predecessor
        assert retry[headers.ENQUEUE_DIGEST] == world.digest
        held = world.store.holder(world.keys.lock)
        assert held is not None and (held["token"], held["task_id"], held["state"]) == (predecessor, M, "queued")
    else:
        # running, queued: the run lock ends with the execution; the retry carries no enqueue lock
        assert headers.ENQUEUE_TOKEN not in retry
        assert world.store.keys() == []
    return retry


@pytest.mark.parametrize("scope", SCOPES)
def test_the_deliveries_are_what_the_publisher_sends(worlds, scope):
    world = worlds(scope, "skip")
    # The retry delivery: the headers of a self.retry() message
    assert_retry_carries(world, enqueue_lock=scope == "queued_or_running")
    if scope == "running":
        assert_running_scope_publishes_without_enqueue_lock(worlds(scope, "skip"))
        return
    # The own state: apply_async takes an enqueue lock under the message's task id and names it
    fresh = worlds(scope, "skip")
    with published() as sent:
        fresh.task.apply_async(ARGS, task_id=M)
    [message] = sent
    lock = fresh.store.holder(fresh.keys.queued)
    assert message[headers.ENQUEUE_DIGEST] == fresh.digest
    assert lock is not None
    assert (lock["token"], lock["task_id"], lock["state"]) == (message[headers.ENQUEUE_TOKEN], M, "queued")
    assert fresh.store.keys() == [fresh.keys.queued]


# -- beyond the static cells: the holder lets go while a copy waits --------------------------------

def test_given_a_waiting_duplicate_when_the_holder_releases_then_it_runs(worlds):
    world = worlds("running", "wait")
    setup = given(world, "first", "running", None)
    world.store.meanwhile(world.keys.lock, lambda: world.store.release(world.keys.lock, "token-x"))
    fence = world.store.counter(world.keys.fence)

    decision, _ = world.execute(setup.message)

    assert isinstance(decision, Run)
    assert world.store.fence(world.keys.lock, world.keys.fence, TOKEN) == fence + 1
    assert world.store.holder(world.keys.lock)["token"] == TOKEN


@pytest.mark.parametrize("scope", SCOPES)
def test_given_a_retry_waiting_for_its_predecessor_when_it_lets_go_then_the_retry_runs(worlds, scope):
    world = worlds(scope, "skip")
    setup = given(world, "retry", "running", None)
    if scope == "queued_or_running":  # the predecessor hands the lock over as it ends
        world.store.meanwhile(world.keys.lock, lambda: world.store.requeue(world.keys.lock, "token-p", QUEUE_TTL_MS))
    else:  # the predecessor releases as it ends
        world.store.meanwhile(world.keys.lock, lambda: world.store.release(world.keys.lock, "token-p"))

    decision, attempt = world.execute(setup.message)

    assert isinstance(decision, Run), decision
    assert world.store.holder(world.keys.lock)["token"] == TOKEN and attempt.enqueue_token is None


@pytest.mark.parametrize("on_locked", ON_LOCKED)
def test_given_queueds_waiting_copy_when_the_run_lock_is_held_then_it_keeps_its_slot_uncounted(worlds, on_locked):
    # Given the queued scope's one queued copy (its own enqueue lock) and a running one (another call)
    world = worlds("queued", on_locked)
    setup = given(world, "first", "own", None)
    world.hold(world.keys.lock, "token-x", OTHER)
    before = world.store.snapshot()
    # When the queued copy starts while the other still runs
    decision, attempt = world.execute(setup.message)
    # Then it is no duplicate: back to the queue, not counted, keeping its place (after waiting, with "wait")
    assert isinstance(decision, Requeue) and decision.counted is False, decision
    assert decision.conflict.task_id == OTHER
    assert attempt.enqueue_token == "token-e" and world.store.snapshot() == before


def test_given_queueds_waiting_copy_that_waits_when_the_runner_releases_then_it_adopts_its_slot(worlds):
    world = worlds("queued", "wait")
    setup = given(world, "first", "own", None)
    world.hold(world.keys.lock, "token-x", OTHER)
    world.store.meanwhile(world.keys.lock, lambda: world.store.release(world.keys.lock, "token-x"))

    decision, attempt = world.execute(setup.message)

    assert isinstance(decision, Run), decision
    assert world.store.keys() == [world.keys.lock] and attempt.enqueue_token is None


def test_given_a_redelivery_when_the_first_delivery_finishes_meanwhile_then_later_copies_know_it_ran(worlds):
    # Given an acks_late message running, and a redelivered copy of it watching its lock
    world = worlds("running", "skip")
    setup = given(world, "redelivered", "running", "alive")
    done = Completion(world.keys.done, M, QUEUE_TTL_MS, always=False)
    world.store.meanwhile(world.keys.lock, lambda: world.store.release(world.keys.lock, "token-m0", done))
    # When the first delivery finishes while the copy watches, then the copy stores nothing
    decision, _ = world.execute(setup.message)
    assert isinstance(decision, Ignored)
    # and the release noted the completion (the copy had marked the lock), so a copy handed out
    # after that is ignored without taking the lock
    assert world.store.completed(world.keys.done, M)
    decision, _ = world.execute(setup.message)
    assert isinstance(decision, Ignored) and world.store.keys() == []
    # while a first delivery of that message (not redelivered) is not second-guessed
    decision, _ = world.execute(dict(setup.message, delivery_info={}))
    assert isinstance(decision, Run)


@pytest.mark.parametrize("fate", ["alive", "dead"])
@pytest.mark.parametrize("scope", ["queued", "queued_or_running"])
def test_given_a_redelivered_copy_naming_its_adopted_enqueue_lock_then_the_redelivery_guard_judges_it(
        worlds, scope, fate):
    # Given the first delivery of M adopted its enqueue lock and runs, and the broker hands M out
    # again with the same headers (its enqueue token, adopted and gone)
    world = worlds(scope, "raise")
    setup = given(world, "redelivered", "running", fate)
    message = dict(setup.message, **{headers.ENQUEUE_TOKEN: "token-e", headers.ENQUEUE_DIGEST: world.digest})
    # When the copy starts
    decision, attempt = world.execute(message)
    # Then the token is no longer its to adopt, and the copy is judged as a redelivery: it stores
    # nothing while that delivery is alive, and runs once its lease ran out
    assert attempt.enqueue_token is None
    if fate == "alive":
        assert isinstance(decision, Ignored), decision
    else:
        assert isinstance(decision, Run), decision
