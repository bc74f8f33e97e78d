"""The lock-store contract: one set of checks that every :class:`~celery_singleton_lock.store.LockBackend`
must pass, run against ``MemoryBackend`` (``tests/unit/test_backend_contract.py``) and against
``RedisBackend`` on a real server (``tests/integration/test_backend_contract.py``).

A check is a plain function of a :class:`Bench`: the backend under test, fresh key names for each
check, and how time passes for that store (an injected clock for the in-memory backend, the wall
clock for Redis). This module imports nothing from redis and starts nothing; the benches live
beside the tests that use them.

Each check reads Given / When / Then; :data:`CHECKS` lists them by name, in the order written.
"""

from __future__ import annotations

import inspect
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Protocol, Tuple

from celery_singleton_lock.store import (Claim, Completion, Conflict, GenerationStore, Grant, Holder, LockBackend, LockKeys,
                                        NotOurs)

__all__ = ["Bench", "CHECKS", "holder", "protocol_members"]

#: The claim that lets a call run.
RUN_CLAIM = Claim("run")

#: A lease long enough never to run out during a check, on any store.
LONG_MS = 60_000


class Bench(Protocol):
    """What a check needs besides the backend."""

    backend: LockBackend
    #: A lease short enough to run out during a check (milliseconds).
    short_ms: int

    def keys(self) -> LockKeys:
        """Fresh key names: a run lock, a separate enqueue lock, the task's fence and done keys."""

    def elapse(self, ms: int) -> None:
        """Let ``ms`` milliseconds pass for the store."""


def holder(task_id: str = "task-a", heartbeat_ms: int = 1_000) -> Holder:
    return Holder(task_id=task_id, host="host-a", pid=4242, since_ms=1_700_000_000_000, heartbeat_ms=heartbeat_ms)


CHECKS: Dict[str, Callable[[Bench], None]] = {}


def check(fn: Callable[[Bench], None]) -> Callable[[Bench], None]:
    CHECKS[fn.__name__] = fn
    return fn


def _token(name: str) -> str:
    return f"token-{name}"


def _info(backend: LockBackend, key: str) -> Mapping[str, str]:
    """The fields of a lock that must be held."""
    info = backend.holder(key)
    assert info is not None, f"{key} is free"
    return info


def _take(bench: Bench, key: str, fence: str, token: str, ttl_ms: int = LONG_MS, task_id: str = "task-a",
          state: str = "running") -> int:
    outcome = bench.backend.acquire(key, token, ttl_ms, holder(task_id), state=state)
    assert isinstance(outcome, Grant), outcome
    return _fence(bench, key, fence, token)


def _fence(bench: Bench, key: str, fence: str, token: str) -> int:
    """The fence the holder of ``key`` under ``token`` is handed."""
    value = bench.backend.fence(key, fence, token)
    assert value is not None and value >= 1, value
    return value


# -- the protocol itself ---------------------------------------------------------------------------

def protocol_members() -> Tuple[List[str], List[str]]:
    """The protocol's attributes and its methods, by name."""
    attributes = sorted(name for name in getattr(LockBackend, "__annotations__", {}) if not name.startswith("_"))
    methods = sorted(name for name, value in vars(LockBackend).items()
                     if not name.startswith("_") and inspect.isfunction(value))
    return attributes, methods


def _compatible(name: str, wanted: inspect.Signature, found: inspect.Signature) -> List[str]:
    """Why ``found`` cannot stand in for ``wanted`` (empty when it can): every parameter the
    protocol names is there, of the same kind and at the same place, with the same default;
    anything more is optional."""
    problems = []
    found_params = list(found.parameters.values())
    for index, param in enumerate(wanted.parameters.values()):
        match = found.parameters.get(param.name)
        if match is None:
            problems.append(f"{name}: no parameter {param.name!r}")
            continue
        if match.kind != param.kind:
            problems.append(f"{name}: {param.name!r} is {match.kind.description}, not {param.kind.description}")
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD) and found_params.index(match) != index:
            problems.append(f"{name}: {param.name!r} is parameter {found_params.index(match)}, not {index}")
        if param.default is not param.empty and match.default != param.default:
            problems.append(f"{name}: {param.name!r} defaults to {match.default!r}, not {param.default!r}")
    for extra in found_params:
        if extra.name in wanted.parameters or extra.kind in (extra.VAR_POSITIONAL, extra.VAR_KEYWORD):
            continue
        if extra.default is extra.empty:
            problems.append(f"{name}: extra parameter {extra.name!r} has no default")
    return problems


@check
def conforms_to_the_protocol(bench: Bench) -> None:
    # Given the LockBackend protocol, when each of its members is looked up on the backend,
    # then every attribute is there and every method takes what the protocol passes.
    backend = bench.backend
    attributes, methods = protocol_members()
    assert attributes == ["counts_places", "generations", "records_completions"] and "acquire" in methods and "release_events" in methods
    problems = [f"{name}: missing" for name in attributes + methods if not hasattr(backend, name)]
    assert isinstance(backend.records_completions, bool)
    for name in methods:
        if not callable(getattr(backend, name, None)):
            problems.append(f"{name}: not callable")
            continue
        problems += _compatible(name, inspect.signature(getattr(LockBackend, name)),
                                inspect.signature(getattr(type(backend), name)))
    assert not problems, "\n".join(problems)


# -- acquire and fences ----------------------------------------------------------------------------

@check
def acquire_takes_a_free_lock_and_reports_a_held_one(bench: Bench) -> None:
    keys = bench.keys()
    # Given a free key, when it is asked for, then it is granted
    first = bench.backend.acquire(keys.lock, _token("a"), LONG_MS, holder("task-a", 2_000))
    assert isinstance(first, Grant) and _fence(bench, keys.lock, keys.fence, _token("a")) >= 1
    # When another token asks, then it meets the holder, described in full
    conflict = bench.backend.acquire(keys.lock, _token("b"), LONG_MS, holder("task-b"))
    assert isinstance(conflict, Conflict)
    assert (conflict.task_id, conflict.host, conflict.pid, conflict.since_ms, conflict.heartbeat_ms) == (
        "task-a", "host-a", 4242, 1_700_000_000_000, 2_000)
    assert (conflict.state, conflict.same_token) == ("running", False)
    assert 0 < conflict.pttl_ms <= LONG_MS
    # and the lock is still the first holder's
    assert _info(bench.backend, keys.lock)["token"] == _token("a")


@check
def acquire_again_with_the_same_token_and_state_is_the_same_grant(bench: Bench) -> None:
    # Given a lock taken under a token (its reply lost, say)
    keys = bench.keys()
    fence = _take(bench, keys.lock, keys.fence, _token("a"))
    # When the same token asks again in the same state, then it is the same grant
    again = bench.backend.acquire(keys.lock, _token("a"), LONG_MS, holder())
    assert again == Grant()
    later = _take(bench, bench.keys().lock, keys.fence, _token("other-key"))
    assert later > fence


@check
def acquire_with_the_same_token_in_another_state_is_a_same_token_conflict(bench: Bench) -> None:
    # Given an enqueue lock (queued) and a run lock (running), each under its token
    keys = bench.keys()
    _take(bench, keys.lock, keys.fence, _token("q"), state="queued")
    other = bench.keys()
    _take(bench, other.lock, other.fence, _token("r"), state="running")
    # When the same token asks for the other state, then it meets itself: a conflict with same_token
    met_queued = bench.backend.acquire(keys.lock, _token("q"), LONG_MS, holder(), state="running")
    met_running = bench.backend.acquire(other.lock, _token("r"), LONG_MS, holder(), state="queued")
    assert isinstance(met_queued, Conflict) and (met_queued.state, met_queued.same_token) == ("queued", True)
    assert isinstance(met_running, Conflict) and (met_running.state, met_running.same_token) == ("running", True)
    # and nothing changed
    assert _info(bench.backend, keys.lock)["state"] == "queued"
    assert _info(bench.backend, other.lock)["state"] == "running"


@check
def fences_strictly_increase_across_200_holders(bench: Bench) -> None:
    # Given one task's run key, a second run key and an enqueue key, all on one fence counter,
    keys, second = bench.keys(), bench.keys()
    backend, fences = bench.backend, []
    # when 200 holders take them in turn (acquire, adopt from the queue, hand back and adopt again),
    for n in range(200):
        token = _token(f"h{n}")
        if n % 4 == 0:
            fences.append(_take(bench, keys.lock, keys.fence, token))
            assert backend.release(keys.lock, token)
        elif n % 4 == 1:
            fences.append(_take(bench, second.lock, keys.fence, token))
            assert backend.release(second.lock, token)
        elif n % 4 == 2:
            fences.append(_take(bench, keys.queued, keys.fence, f"{token}-q", state="queued"))
            adopted = backend.adopt(keys.queued, keys.lock, f"{token}-q", token, LONG_MS, holder())
            assert isinstance(adopted, Grant), adopted
            fences.append(_fence(bench, keys.lock, keys.fence, token))
            assert backend.release(keys.lock, token)
        else:
            _take(bench, keys.lock, keys.fence, f"{token}-r")
            assert backend.requeue(keys.lock, f"{token}-r", LONG_MS)
            adopted = backend.adopt(keys.lock, keys.lock, f"{token}-r", token, LONG_MS, holder())
            assert isinstance(adopted, Grant), adopted
            fences.append(_fence(bench, keys.lock, keys.fence, token))
            assert backend.release(keys.lock, token)
    # then every holder's fence (an enqueue lock's too) is larger than every earlier one's
    assert len(fences) == 250
    assert all(a < b for a, b in zip(fences, fences[1:])), fences


@check
def a_fence_is_handed_only_to_the_token_that_holds_the_lock(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    # Given a free key, then nobody is handed a fence for it
    assert backend.fence(keys.lock, keys.fence, _token("a")) is None
    # Given a holder, when another token asks for a fence, then it is refused
    first = _take(bench, keys.lock, keys.fence, _token("a"))
    assert backend.fence(keys.lock, keys.fence, _token("b")) is None
    # When the holder has released it, then its own token is refused too
    assert backend.release(keys.lock, _token("a"))
    assert backend.fence(keys.lock, keys.fence, _token("a")) is None
    # and the next holder's fence is larger than the first's
    assert _take(bench, keys.lock, keys.fence, _token("b")) > first


# -- release ---------------------------------------------------------------------------------------

@check
def release_deletes_only_under_its_own_token(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    # Given a lock held under token a
    _take(bench, keys.lock, keys.fence, _token("a"))
    # When another token releases it, then nothing happens
    assert backend.release(keys.lock, _token("b")) is False
    assert _info(backend, keys.lock)["token"] == _token("a")
    # When its own token releases it, then it is gone; a second release is harmless
    assert backend.release(keys.lock, _token("a")) is True
    assert backend.holder(keys.lock) is None
    assert backend.release(keys.lock, _token("a")) is False
    # and a release of a key the next holder took does not touch the next holder's lock
    _take(bench, keys.lock, keys.fence, _token("c"))
    assert backend.release(keys.lock, _token("a")) is False
    assert _info(backend, keys.lock)["token"] == _token("c")


@check
def giving_up_an_enqueue_lock_never_deletes_a_running_lock_under_that_token(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    # Given a running lock (queued_or_running: its key is also the enqueue key), whose token a
    # self.retry() message (or a forged one) carries as its enqueue token
    _take(bench, keys.lock, keys.fence, _token("p"))
    # When that enqueue lock is given up (revoked, a duplicate dropped), alone or among others
    assert backend.release(keys.lock, _token("p"), state="queued") is False
    assert backend.release_many([(keys.lock, _token("p"), "queued")]) == [False]
    # Then the running lock is untouched
    info = _info(backend, keys.lock)
    assert (info["token"], info["state"]) == (_token("p"), "running")
    # Given it was handed back to the queue (the execution ended), then a run's release leaves the
    # retry's enqueue lock alone, and giving up the enqueue lock deletes it
    assert backend.requeue(keys.lock, _token("p"), LONG_MS)
    assert backend.release(keys.lock, _token("p")) is False
    assert backend.release_many([(keys.lock, _token("p"))]) == [False]
    assert _info(backend, keys.lock)["state"] == "queued"
    assert backend.release(keys.lock, _token("p"), state="queued") is True
    assert backend.holder(keys.lock) is None
    # and an enqueue lock under its own key goes the same way, by its token only
    _take(bench, keys.queued, keys.fence, _token("e"), state="queued")
    assert backend.release_many([(keys.queued, _token("x"), "queued"), (keys.queued, _token("e"), "queued")]) == [
        False, True]


@check
def release_many_answers_per_pair_in_order(bench: Bench) -> None:
    one, two, three = bench.keys(), bench.keys(), bench.keys()
    _take(bench, one.lock, one.fence, _token("1"))
    _take(bench, two.lock, two.fence, _token("2"))
    # Given two held locks and a free key, when all three are released at once (one with a wrong token)
    result = bench.backend.release_many([(one.lock, _token("1")), (two.lock, _token("x")), (three.lock, "none")])
    # then each pair gets its own answer, in order, and only the right token deleted
    assert result == [True, False, False]
    assert bench.backend.holder(one.lock) is None and _info(bench.backend, two.lock)["token"] == _token("2")
    assert bench.backend.release_many([]) == []


# -- renew -----------------------------------------------------------------------------------------

@check
def renew_extends_only_a_running_lock_still_held(bench: Bench) -> None:
    backend = bench.backend
    running, queued, taken, gone = bench.keys(), bench.keys(), bench.keys(), bench.keys()
    # Given a running lock with a short lease, an enqueue lock, a lock held by someone else, a free key
    _take(bench, running.lock, running.fence, _token("r"), ttl_ms=bench.short_ms)
    _take(bench, queued.lock, queued.fence, _token("q"), state="queued")
    _take(bench, taken.lock, taken.fence, _token("other"))
    # When all are renewed in one call
    result = backend.renew([(running.lock, _token("r"), LONG_MS), (queued.lock, _token("q"), LONG_MS),
                            (taken.lock, _token("mine"), LONG_MS), (gone.lock, _token("g"), LONG_MS)])
    # then only the running lock still held is extended; the answers come in order
    assert result == [True, False, False, False]
    assert int(_info(backend, running.lock)["pttl"]) > bench.short_ms
    assert _info(backend, queued.lock)["token"] == _token("q") and backend.holder(gone.lock) is None
    assert backend.renew([]) == []


# -- requeue and adopt -----------------------------------------------------------------------------

@check
def requeue_then_adopt_by_token_on_the_same_key(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    # Given a running lock (queued_or_running: the enqueue lock is the run lock's key)
    first = _take(bench, keys.lock, keys.fence, _token("p"))
    # When its holder hands it back to the queue (self.retry())
    assert backend.requeue(keys.lock, _token("p"), 5_000) is True
    info = _info(backend, keys.lock)
    assert (info["token"], info["state"], info["ttl"]) == (_token("p"), "queued", "5000")
    assert 0 < int(info["pttl"]) <= 5_000
    # and the retry adopts it by that token
    adopted = backend.adopt(keys.lock, keys.lock, _token("p"), _token("n"), LONG_MS, holder("task-n"))
    # then it runs under its own token with a larger fence
    assert isinstance(adopted, Grant) and _fence(bench, keys.lock, keys.fence, _token("n")) > first
    info = _info(backend, keys.lock)
    assert (info["token"], info["state"], info["task_id"]) == (_token("n"), "running", "task-n")
    # and asking again (a lost reply) is the same grant, while the old token adopts nothing
    assert backend.adopt(keys.lock, keys.lock, _token("p"), _token("n"), LONG_MS, holder()) == adopted
    other = backend.adopt(keys.lock, keys.lock, _token("p"), _token("z"), LONG_MS, holder())
    assert isinstance(other, Conflict) and other.same_token is False


@check
def requeue_then_adopt_by_token_from_a_separate_queued_key(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    # Given an enqueue lock under its own key (queued scope) and a free run key
    queued = _take(bench, keys.queued, keys.fence, _token("e"), state="queued", task_id="task-e")
    # When the message's delivery adopts it by token
    adopted = backend.adopt(keys.queued, keys.lock, _token("e"), _token("t"), LONG_MS, holder("task-e"))
    # then the enqueue lock is gone, and the run lock is the delivery's with a larger fence
    assert isinstance(adopted, Grant) and _fence(bench, keys.lock, keys.fence, _token("t")) > queued
    assert backend.holder(keys.queued) is None
    assert (_info(backend, keys.lock)["token"], _info(backend, keys.lock)["state"]) == (_token("t"), "running")
    # and asking again (a lost reply) is the same grant
    assert backend.adopt(keys.queued, keys.lock, _token("e"), _token("t"), LONG_MS, holder()) == adopted
    # Given it ran and was handed back to the queue, when a retry adopts it on the run key, then it runs
    assert backend.requeue(keys.lock, _token("t"), LONG_MS) is True
    again = backend.adopt(keys.lock, keys.lock, _token("t"), _token("u"), LONG_MS, holder())
    assert isinstance(again, Grant) and _fence(bench, keys.lock, keys.fence, _token("u")) > queued


@check
def requeue_needs_the_token(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    # Given a running lock, when another token or a free key is handed back, then nothing changes
    _take(bench, keys.lock, keys.fence, _token("a"))
    assert backend.requeue(keys.lock, _token("b"), 5_000) is False
    assert backend.requeue(bench.keys().lock, _token("a"), 5_000) is False
    info = _info(backend, keys.lock)
    assert (info["token"], info["state"]) == (_token("a"), "running")


@check
def adopt_of_an_enqueue_lock_that_is_not_ours_is_not_ours(bench: Bench) -> None:
    backend = bench.backend
    # Given enqueue locks that are gone, held under another token, or running (already adopted)
    gone, other, adopted, same_key = bench.keys(), bench.keys(), bench.keys(), bench.keys()
    _take(bench, other.queued, other.fence, _token("someone"), state="queued")
    _take(bench, adopted.queued, adopted.fence, _token("e"), state="running")
    cases = {"gone": (gone.queued, gone.lock), "other token": (other.queued, other.lock),
             "not queued": (adopted.queued, adopted.lock), "same key, free": (same_key.lock, same_key.lock)}
    for name, (queued_key, run_key) in cases.items():
        # When a delivery adopts by its token, then the answer is NotOurs and nothing is taken
        outcome = backend.adopt(queued_key, run_key, _token("e"), _token("t"), LONG_MS,
                                holder())
        assert isinstance(outcome, NotOurs), (name, outcome)
        assert backend.holder(run_key) is None, name
    assert _info(backend, other.queued)["token"] == _token("someone")


@check
def adopt_when_the_run_key_is_held_is_a_conflict(bench: Bench) -> None:
    backend = bench.backend
    # Given our enqueue lock under its own key, and the run key held by another call
    split = bench.keys()
    _take(bench, split.queued, split.fence, _token("e"), state="queued")
    _take(bench, split.lock, split.fence, _token("x"), task_id="task-x")
    # When we adopt, then we meet the runner (same_token false: it is never us), and keep our slot
    met = backend.adopt(split.queued, split.lock, _token("e"), _token("t"), LONG_MS, holder())
    assert isinstance(met, Conflict) and (met.task_id, met.state, met.same_token) == ("task-x", "running", False)
    assert _info(backend, split.queued)["token"] == _token("e")
    # Even when the runner's token is our enqueue token, same_token stays false on separate keys
    twin = bench.keys()
    _take(bench, twin.queued, twin.fence, _token("e"), state="queued")
    _take(bench, twin.lock, twin.fence, _token("e"), task_id="task-x")
    met = backend.adopt(twin.queued, twin.lock, _token("e"), _token("t"), LONG_MS, holder())
    assert isinstance(met, Conflict) and met.same_token is False
    # Given one key (queued_or_running) still running under our enqueue token (a self.retry() whose
    # execution has not handed it over yet), when we adopt, then we meet it with same_token true
    one = bench.keys()
    _take(bench, one.lock, one.fence, _token("p"), task_id="task-p")
    met = backend.adopt(one.lock, one.lock, _token("p"), _token("t"), LONG_MS, holder())
    assert isinstance(met, Conflict) and (met.task_id, met.state, met.same_token) == ("task-p", "running", True)
    # and held by anyone else (running or queued), same_token false
    for state in ("running", "queued"):
        held = bench.keys()
        _take(bench, held.lock, held.fence, _token("x"), task_id="task-x", state=state)
        met = backend.adopt(held.lock, held.lock, _token("p"), _token("t"), LONG_MS, holder())
        assert isinstance(met, Conflict) and (met.state, met.same_token) == (state, False), (state, met)
        assert _info(backend, held.lock)["token"] == _token("x")
    assert _info(backend, one.lock)["token"] == _token("p")


# -- completions -----------------------------------------------------------------------------------

@check
def release_notes_a_completion_only_when_marked_or_always(bench: Bench) -> None:
    backend = bench.backend
    assert backend.records_completions is True
    done = bench.keys().done

    def run(task_id: str, mark: Optional[str], completion: Optional[Completion], token: Optional[str] = None) -> bool:
        keys = bench.keys()
        _take(bench, keys.lock, keys.fence, _token(task_id), task_id=task_id)
        if mark is not None:
            assert backend.mark_redelivered(keys.lock, mark) is (mark == task_id)
        return backend.release(keys.lock, token or _token(task_id), completion)

    def note(task_id: str, always: bool = False) -> Completion:
        return Completion(done, task_id, LONG_MS, always)

    # Given releases with a completion asked for, then the task id is noted only when
    assert run("plain", None, note("plain")) and not backend.completed(done, "plain")  # nothing met the lock
    assert run("marked", "marked", note("marked")) and backend.completed(done, "marked")  # a redelivery met it
    assert run("always", None, note("always", always=True)) and backend.completed(done, "always")  # or always
    assert run("wrong-mark", "someone-else", note("wrong-mark")) and not backend.completed(done, "wrong-mark")
    assert run("none", "none", None) and not backend.completed(done, "none")  # no completion asked for
    # and a release that fails (not our token) notes nothing
    assert not run("failed", "failed", note("failed", always=True), token="not-ours")
    assert not backend.completed(done, "failed")
    # and a redelivery mark on a free key is refused
    assert backend.mark_redelivered(bench.keys().lock, "plain") is False


@check
def completed_is_forgotten_after_remember_ms(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    remember = bench.short_ms
    # Given a completion noted for remember_ms
    _take(bench, keys.lock, keys.fence, _token("a"), task_id="task-a")
    assert backend.release(keys.lock, _token("a"), Completion(keys.done, "task-a", remember, True))
    # Then it is remembered at once, and forgotten once remember_ms has passed
    assert backend.completed(keys.done, "task-a") is True
    bench.elapse(remember + 50)
    assert backend.completed(keys.done, "task-a") is False


@check
def completions_are_forgotten_each_after_its_own_remember_ms(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    remember = 4 * bench.short_ms
    # Given task a's completion noted, and task b's half its remember_ms later
    for task_id in ("task-a", "task-b"):
        _take(bench, keys.lock, keys.fence, _token(task_id), task_id=task_id)
        assert backend.release(keys.lock, _token(task_id), Completion(keys.done, task_id, remember, True))
        if task_id == "task-a":
            bench.elapse(remember // 2)
    # When a's remember_ms has passed (but not b's)
    bench.elapse(remember // 2 + remember // 4)
    # Then a is forgotten while b is still remembered
    assert backend.completed(keys.done, "task-b") is True
    assert backend.completed(keys.done, "task-a") is False


# -- time ------------------------------------------------------------------------------------------

@check
def a_lock_runs_out_after_its_ttl(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    # Given a lock with a short lease that nobody renews
    first = _take(bench, keys.lock, keys.fence, _token("a"), ttl_ms=bench.short_ms)
    assert 0 < int(_info(backend, keys.lock)["pttl"]) <= bench.short_ms
    # When the lease has run out
    bench.elapse(bench.short_ms + 50)
    # Then the key is free, the next holder gets a larger fence, and the old token changes nothing
    assert backend.holder(keys.lock) is None
    assert _take(bench, keys.lock, keys.fence, _token("b")) > first
    assert backend.renew([(keys.lock, _token("a"), LONG_MS)]) == [False]
    assert backend.release(keys.lock, _token("a")) is False
    assert backend.requeue(keys.lock, _token("a"), LONG_MS) is False
    assert _info(backend, keys.lock)["token"] == _token("b")


@check
def a_lock_handed_back_to_the_queue_runs_out_after_its_queued_ttl(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    # Given a running lock handed back to the queue for a short while
    _take(bench, keys.lock, keys.fence, _token("p"))
    assert backend.requeue(keys.lock, _token("p"), bench.short_ms)
    # When nobody adopts it in time, then it is gone and adopting it is NotOurs
    bench.elapse(bench.short_ms + 50)
    assert backend.holder(keys.lock) is None
    assert isinstance(backend.adopt(keys.lock, keys.lock, _token("p"), _token("n"), LONG_MS, holder()),
                      NotOurs)


# -- release announcements ------------------------------------------------------------------------

@check
def release_events_wake_a_waiter_on_release(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    _take(bench, keys.lock, keys.fence, _token("a"))
    # Given a waiter that subscribed, then asked the holder to announce its release
    with backend.release_events(keys.lock) as events:
        assert events.ask() is True
        # When the holder releases, then the waiter is told at once
        assert backend.release(keys.lock, _token("a"))
        started = time.monotonic()
        assert events.wait(5.0) is True
        assert time.monotonic() - started < 2.0
        # and one announcement wakes it once; the lock is free, so nothing more is to come
        assert events.wait(0.05) is False
        assert events.ask() is False


@check
def a_release_right_after_the_subscription_is_announced(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    _take(bench, keys.lock, keys.fence, _token("a"))
    # Given a subscription (which asks the holder to announce its release as it starts)
    with backend.release_events(keys.lock) as events:
        # When the holder releases before the waiter first waits
        assert backend.release(keys.lock, _token("a"))
        # Then the first wait hears of it at once
        assert events.wait(5.0) is True


@check
def release_events_wake_a_blocked_waiter_in_another_thread(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    _take(bench, keys.lock, keys.fence, _token("a"))
    woken: List[Tuple[bool, float]] = []
    with backend.release_events(keys.lock) as events:
        waiting = threading.Event()

        def wait() -> None:
            started = time.monotonic()
            waiting.set()
            woken.append((events.wait(5.0), time.monotonic() - started))

        # Given a thread blocked on the lock's announcements (asked for before it blocks)
        assert events.ask() is True
        thread = threading.Thread(target=wait, name="contract-waiter", daemon=True)
        thread.start()
        assert waiting.wait(2.0)
        # When the holder releases
        assert backend.release(keys.lock, _token("a"))
        thread.join(5.0)
    # Then the thread wakes with the news, long before its timeout
    assert woken and woken[0][0] is True and woken[0][1] < 2.0, woken


@check
def a_waiter_takes_the_lock_as_soon_as_it_is_released_not_when_its_ttl_runs_out(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    _take(bench, keys.lock, keys.fence, _token("a"))
    took: List[float] = []
    with backend.release_events(keys.lock) as events:

        def waiter() -> None:
            # what on_locked="wait" does: ask for the lock, and wait for news between asks
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:
                if isinstance(backend.acquire(keys.lock, _token("w"), LONG_MS, holder("task-w")), Grant):
                    took.append(time.monotonic())
                    return
                events.wait(deadline - time.monotonic())

        # Given a waiter on a lock that would hold for another minute
        thread = threading.Thread(target=waiter, name="contract-waiter", daemon=True)
        thread.start()
        time.sleep(0.3)
        # When the holder releases
        released = time.monotonic()
        assert backend.release(keys.lock, _token("a"))
        thread.join(10.0)
    # Then the waiter holds it promptly
    assert took and took[0] - released < 2.0, took
    assert _info(backend, keys.lock)["token"] == _token("w")


@check
def a_release_that_nobody_asked_about_announces_nothing(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    _take(bench, keys.lock, keys.fence, _token("a"))
    with backend.release_events(keys.lock) as events:
        # Given a subscriber that asked about the holder a, and was told of its release
        assert events.ask() is True
        assert backend.release(keys.lock, _token("a"))
        assert events.wait(5.0) is True
        # When the next holder takes the lock and releases it without anyone asking
        _take(bench, keys.lock, keys.fence, _token("b"))
        assert backend.release(keys.lock, _token("b"))
        # Then the subscriber hears nothing of it
        assert events.wait(0.2) is False


@check
def release_events_wake_a_waiter_on_requeue(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    _take(bench, keys.lock, keys.fence, _token("p"))
    # Given a retry waiting for its predecessor's lock, when the predecessor hands it back to the queue
    with backend.release_events(keys.lock) as events:
        assert events.ask() is True
        assert backend.requeue(keys.lock, _token("p"), LONG_MS)
        # Then the waiter is told, and can adopt it
        assert events.wait(5.0) is True
    assert isinstance(backend.adopt(keys.lock, keys.lock, _token("p"), _token("n"), LONG_MS, holder()),
                      Grant)


@check
def a_waiters_ask_outlives_the_hand_over_of_an_enqueue_lock(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    # Given a queued_or_running enqueue lock that a waiter asked about
    assert isinstance(backend.acquire(keys.lock, _token("q"), LONG_MS, holder(), state="queued"), Grant)
    with backend.release_events(keys.lock) as events:
        assert events.ask() is True
        # When a worker adopts it, and later releases the running lock
        assert isinstance(backend.adopt(keys.lock, keys.lock, _token("q"), _token("r"), LONG_MS, holder()),
                          Grant)
        assert backend.mark_redelivered(keys.lock, "task-a")
        assert events.wait(0.05) is False
        assert backend.release(keys.lock, _token("r"))
        # Then the waiter is told of the release
        assert events.wait(5.0) is True


@check
def release_events_stay_quiet_while_nothing_is_let_go(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    _take(bench, keys.lock, keys.fence, _token("a"))
    with backend.release_events(keys.lock) as events:
        # Given a waiter that asked, when the lock is renewed, asked for, refused a wrong-token
        # release or requeue, and another key is released
        assert events.ask() is True
        backend.renew([(keys.lock, _token("a"), LONG_MS)])
        backend.acquire(keys.lock, _token("b"), LONG_MS, holder())
        backend.release(keys.lock, _token("b"))
        backend.requeue(keys.lock, _token("b"), LONG_MS)
        other = bench.keys()
        _take(bench, other.lock, other.fence, _token("c"))
        backend.release(other.lock, _token("c"))
        # Then nothing is announced
        assert events.wait(0.05) is False


# -- diagnostics -----------------------------------------------------------------------------------

@check
def holder_reports_the_lock_fields(bench: Bench) -> None:
    keys, backend = bench.keys(), bench.backend
    # Given a free key, then there is no holder
    assert backend.holder(keys.lock) is None
    # Given a lock taken, then its fields are the holder's, as text
    _take(bench, keys.lock, keys.fence, _token("a"), ttl_ms=LONG_MS, task_id="task-a")
    info = _info(backend, keys.lock)
    assert set(info) == {"token", "task_id", "host", "pid", "pid_ns", "since", "ttl", "hb", "state", "redelivered",
                         "waiting", "pttl", "describe", "task"}
    assert {k: v for k, v in info.items() if k != "pttl"} == {
        "token": _token("a"), "task_id": "task-a", "host": "host-a", "pid": "4242", "redelivered": "", "waiting": "",
        "since": "1700000000000", "ttl": str(LONG_MS), "hb": "1000", "state": "running",
        "pid_ns": holder().pid_ns, "describe": "", "task": ""}
    assert holder().pid_ns  # the holder's PID namespace is recorded (this process's, unless given)
    assert 0 < int(info["pttl"]) <= LONG_MS
    # When a redelivered copy of its message meets it, then the lock says so
    assert backend.mark_redelivered(keys.lock, "task-a") is True
    assert _info(backend, keys.lock)["redelivered"] == "1"
    # Given a lock taken with a description of its call, then it is kept apart from the task id,
    # also once a redelivery has met the lock
    described = Holder(task_id="task d", host="host-a", pid=1, since_ms=1, heartbeat_ms=1_000,
                       describe="account_id=42, note='a b'")
    assert isinstance(backend.acquire(keys.queued, _token("d"), LONG_MS, described), Grant)
    assert backend.mark_redelivered(keys.queued, "task d") is True
    info = _info(backend, keys.queued)
    assert (info["task_id"], info["describe"], info["redelivered"]) == ("task d", "account_id=42, note='a b'", "1")


# -- generations: the newest call of a key, and its one claimed run ------------------------------

def _generations(bench: Bench) -> Tuple[GenerationStore, str]:
    store = bench.backend.generations
    assert store is not None, "this store keeps generations"
    return store, f"{bench.keys().lock}:gen"


@dataclass(frozen=True)
class _Call:
    gen: int
    previous: Optional[str]
    burst_ms: int


def _publish(store: GenerationStore, key: str, task_id: str, ttl_ms: int) -> _Call:
    """A call as ``apply_async`` makes it: its generation reserved, then (published) made the newest."""
    reserved = store.reserve(key, ttl_ms)
    return _Call(reserved.gen, store.supersede(key, reserved.gen, task_id, ttl_ms), reserved.burst_ms)


@check
def only_the_newest_generation_claims_its_run_and_only_once(bench: Bench) -> None:
    # Given three calls of one key
    store, key = _generations(bench)
    first = _publish(store, key, "call-1", LONG_MS)
    second = _publish(store, key, "call-2", LONG_MS)
    third = _publish(store, key, "call-3", LONG_MS)
    # Then each displaced the one before it, and generations increase
    assert (first.previous, second.previous, third.previous) == (None, "call-1", "call-2")
    assert first.gen < second.gen < third.gen
    # When the older ones ask, then they are superseded by the newest (peek and claim agree)
    assert store.peek(key, first.gen) == Claim("superseded", "call-3")
    assert store.claim(key, second.gen, "call-2", LONG_MS) == Claim("superseded", "call-3")
    # When the newest claims, then it runs; when it (another delivery of it) claims again, it ran
    assert store.peek(key, third.gen) == RUN_CLAIM
    assert store.claim(key, third.gen, "call-3", LONG_MS) == RUN_CLAIM
    assert store.claim(key, third.gen, "call-3", LONG_MS) == Claim("ran", "call-3")
    assert store.peek(key, third.gen) == Claim("ran", "call-3")


@check
def a_claim_ends_the_burst_and_a_claimed_call_is_never_superseded(bench: Bench) -> None:
    # Given a burst whose first call was made a while ago
    store, key = _generations(bench)
    _publish(store, key, "call-1", LONG_MS)
    bench.elapse(150)
    newest = _publish(store, key, "call-2", LONG_MS)
    assert newest.burst_ms >= 140, newest
    # When the newest claims its run, then a call made during that run displaces nothing
    assert store.claim(key, newest.gen, "call-2", LONG_MS) == RUN_CLAIM
    during = _publish(store, key, "call-3", LONG_MS)
    assert during.previous is None
    # and it starts a new burst, newer than the running call
    assert during.burst_ms < 100 and during.gen > newest.gen
    assert store.claim(key, during.gen, "call-3", LONG_MS) == RUN_CLAIM


@check
def calls_the_store_forgot_start_a_new_burst_and_the_newest_of_them_runs_once(bench: Bench) -> None:
    # Given three calls whose hash lasts a short while, and runs out (or the store restarted empty)
    store, key = _generations(bench)
    oldest = _publish(store, key, "call-1", bench.short_ms)
    older = _publish(store, key, "call-2", bench.short_ms)
    newer = _publish(store, key, "call-3", bench.short_ms)
    bench.elapse(bench.short_ms + 50)
    # When their messages arrive, then none runs at once: each becomes the newest of a new burst
    assert store.peek(key, older.gen) == Claim("lost")
    assert store.claim(key, older.gen, "call-2", LONG_MS) == Claim("lost")
    assert store.claim(key, newer.gen, "call-3", LONG_MS) == Claim("lost")
    assert store.claim(key, oldest.gen, "call-1", LONG_MS) == Claim("superseded", "call-3")
    # and once they come back after a quiet period, the newest runs, once, and nothing older
    assert store.claim(key, older.gen, "call-2", LONG_MS) == Claim("superseded", "call-3")
    assert store.claim(key, newer.gen, "call-3", LONG_MS) == RUN_CLAIM
    assert store.claim(key, newer.gen, "call-3", LONG_MS) == Claim("ran", "call-3")


@check
def an_older_call_never_runs_however_long_its_burst_lasted(bench: Bench) -> None:
    # Given a burst whose first call was made a while ago, and a newer call
    store, key = _generations(bench)
    older = _publish(store, key, "call-1", LONG_MS)
    bench.elapse(150)
    newest = _publish(store, key, "call-2", LONG_MS)
    # When the older call asks, then it is superseded (its caller was answered so), peek and claim alike
    assert store.peek(key, older.gen) == Claim("superseded", "call-2")
    assert store.claim(key, older.gen, "call-1", LONG_MS) == Claim("superseded", "call-2")
    # Then the newest runs once, and the older one still does not
    assert store.claim(key, newest.gen, "call-2", LONG_MS) == RUN_CLAIM
    assert store.claim(key, older.gen, "call-1", LONG_MS).outcome == "superseded"
    assert store.claim(key, newest.gen, "call-2", LONG_MS) == Claim("ran", "call-2")


@check
def a_call_whose_publish_failed_displaces_nothing(bench: Bench) -> None:
    # Given a call published, and a newer one whose generation was reserved but whose publish failed
    store, key = _generations(bench)
    kept = _publish(store, key, "call-1", LONG_MS)
    failed = store.reserve(key, LONG_MS)
    # Then the first is still the newest: pending while the newer call's message may be on its way,
    # then free to run
    pending = store.peek(key, kept.gen, 100)
    assert pending.outcome == "pending" and 0 < pending.wait_ms <= 101, pending  # ms, rounded up
    assert store.claim(key, kept.gen, "call-1", LONG_MS, 100).outcome == "pending"
    bench.elapse(150)
    assert store.peek(key, kept.gen, 100) == RUN_CLAIM
    # and the next call displaces it, newer than the failed one
    later = _publish(store, key, "call-3", LONG_MS)
    assert later.previous == "call-1" and later.gen > failed.gen
    assert store.peek(key, later.gen) == RUN_CLAIM and store.peek(key, kept.gen).outcome == "superseded"


@check
def a_published_call_its_publisher_did_not_record_is_the_newest_when_its_message_arrives(bench: Bench) -> None:
    # Given a call published, and a newer one published whose publisher was killed before saying so
    store, key = _generations(bench)
    older = _publish(store, key, "call-1", LONG_MS)
    unrecorded = store.reserve(key, LONG_MS)
    # When its message asks, then it runs (a reserved generation in hand was published), not yet
    # recorded as the newest (so the worker records it), and is the newest
    assert store.peek(key, older.gen, 100).outcome == "pending"
    assert store.peek(key, unrecorded.gen, 100) == Claim("run", recorded=False)
    assert store.claim(key, unrecorded.gen, "call-2", LONG_MS, 100) == RUN_CLAIM
    assert store.claim(key, older.gen, "call-1", LONG_MS, 100) == Claim("superseded", "call-2")
    assert store.claim(key, unrecorded.gen, "call-2", LONG_MS) == Claim("ran", "call-2")
    # and its publisher's late record changes nothing, nor displaces anything
    assert store.supersede(key, unrecorded.gen, "call-2", LONG_MS) is None
    assert store.peek(key, unrecorded.gen) == Claim("ran", "call-2")
    # When a generation above any reserved one asks (the store forgot the key), then it is lost
    assert store.peek(f"{key}-fresh", unrecorded.gen) == Claim("lost")


# -- keys with a limit or a window: their checks live in their own module and register here -------
from tests.support import contract_places  # noqa: E402,F401  (registers its checks in CHECKS)
from tests.support import contract_line  # noqa: E402,F401  (registers its checks in CHECKS)
