"""The lock-store contract for keys with a limit or a window (places, see ``store/places.py``).

Registered in :data:`tests.support.contract.CHECKS` beside the singleton lock's checks, so they
run against every store the contract runs against. Each reads Given / When / Then.
"""

from __future__ import annotations

import threading
from typing import Tuple

from celery_singleton_lock.store import Completion, Conflict, Grant, LockKeys, NotOurs
from celery_singleton_lock.store.places import Limit, limited

from tests.support.contract import LONG_MS, Bench, _token, check, holder

#: A store that keeps time in whole ms counts a window from the ms after its start (so no start
#: comes less than a window after another): a refusal may then name up to this much more.
TICK_MS = 1


def _keys(bench: Bench, limit: Limit) -> LockKeys:
    return limited(bench.keys(), limit)


def _take(bench: Bench, key: str, token: str, limit: Limit, ttl_ms: int = LONG_MS, state: str = "running") -> None:
    outcome = bench.backend.acquire(key, token, ttl_ms, holder(f"task-{token}"), state=state, limit=limit)
    assert isinstance(outcome, Grant), outcome


def _refused(bench: Bench, key: str, token: str, limit: Limit) -> Conflict:
    outcome = bench.backend.acquire(key, token, LONG_MS, holder(f"task-{token}"), limit=limit)
    assert isinstance(outcome, Conflict), outcome
    return outcome


def _fill(bench: Bench, limit: Limit, ttl_ms: int = LONG_MS) -> Tuple[LockKeys, list]:
    keys = _keys(bench, limit)
    tokens = [_token(f"p{n}") for n in range(limit.count)]
    for token in tokens:
        _take(bench, keys.lock, token, limit, ttl_ms)
    return keys, tokens


@check
def places_admit_up_to_the_limit_and_the_next_is_told_when_one_frees(bench: Bench) -> None:
    # Given a key with three places, when three holders take one each, then all are granted
    limit = Limit(3)
    keys, tokens = _fill(bench, limit)
    assert keys.lock.endswith(":places") and keys.lock != limited(bench.keys(), limit).lock
    # and asking again under a holder's token is the same grant (a lost reply)
    _take(bench, keys.lock, tokens[0], limit)
    # When a fourth asks, then it is refused: three of three taken, the soonest to free named,
    # with no window to wait for (each place is held by a live run)
    conflict = _refused(bench, keys.lock, _token("x"), limit)
    assert (conflict.held, conflict.limit, conflict.window_ms, conflict.same_token) == (3, 3, None, False)
    assert conflict.task_id.startswith("task-") and conflict.state == "running" and conflict.holder_token in tokens
    assert 0 < conflict.pttl_ms <= LONG_MS
    # and the same token in another state is its own place, not a new one
    again = bench.backend.acquire(keys.lock, tokens[1], LONG_MS, holder(), state="queued", limit=limit)
    assert isinstance(again, Conflict) and again.same_token


@check
def a_release_by_token_frees_exactly_one_place(bench: Bench) -> None:
    limit = Limit(2)
    keys, (a, b) = _fill(bench, limit)
    backend = bench.backend
    # Given both places taken, when a token that holds none releases, then nothing is freed
    assert backend.release(keys.lock, _token("stranger")) is False
    _refused(bench, keys.lock, _token("c"), limit)
    # When a holder releases its place, then one (and only one) newcomer gets in
    assert backend.release(keys.lock, a) is True
    _take(bench, keys.lock, _token("c"), limit)
    _refused(bench, keys.lock, _token("d"), limit)
    # and its second release frees nothing more (its token holds no place now)
    assert backend.release(keys.lock, a) is False
    _refused(bench, keys.lock, _token("d"), limit)
    assert backend.release(keys.lock, b) and backend.release(keys.lock, _token("c"))
    assert backend.holder(keys.lock) is None


@check
def a_dead_holders_place_is_pruned_after_its_ttl(bench: Bench) -> None:
    limit = Limit(2)
    keys = _keys(bench, limit)
    # Given one holder that stops renewing (a short lease) and one that lives
    _take(bench, keys.lock, _token("dead"), limit, ttl_ms=bench.short_ms)
    _take(bench, keys.lock, _token("alive"), limit)
    _refused(bench, keys.lock, _token("new"), limit)
    # When the dead holder's lease runs out, then the next acquire takes its place
    bench.elapse(bench.short_ms + 50)
    _take(bench, keys.lock, _token("new"), limit)
    # and the dead holder can neither renew, fence nor release it any more
    assert bench.backend.renew([(keys.lock, _token("dead"), LONG_MS)]) == [False]
    assert bench.backend.fence(keys.lock, keys.fence, _token("dead")) is None
    assert bench.backend.release(keys.lock, _token("dead")) is False


@check
def a_window_keeps_a_released_place_until_it_ends(bench: Bench) -> None:
    window = 4 * bench.short_ms
    limit = Limit(1, window)
    keys = _keys(bench, limit)
    # Given a one-place key with a window, when its holder takes it and releases at once
    _take(bench, keys.lock, _token("a"), limit)
    assert bench.backend.release(keys.lock, _token("a")) is True
    # then the place is still taken, and the refusal says exactly when the window ends
    conflict = _refused(bench, keys.lock, _token("b"), limit)
    assert conflict.window_ms is not None and 0 < conflict.window_ms <= window + TICK_MS
    assert conflict.pttl_ms == conflict.window_ms and conflict.state == "released"
    # and the released token holds nothing: no second release, no fence, no renewal
    assert bench.backend.release(keys.lock, _token("a")) is False
    assert bench.backend.fence(keys.lock, keys.fence, _token("a")) is None
    assert bench.backend.renew([(keys.lock, _token("a"), LONG_MS)]) == [False]
    # When the window has passed, then the next holder gets the place
    bench.elapse(window + 50)
    _take(bench, keys.lock, _token("b"), limit)


@check
def a_refusal_names_the_soonest_window_end_unless_a_run_past_its_window_may_free_sooner(bench: Bench) -> None:
    window = 4 * bench.short_ms
    limit = Limit(2, window)
    keys = _keys(bench, limit)
    # Given two runs inside their windows
    _take(bench, keys.lock, _token("a"), limit)
    _take(bench, keys.lock, _token("b"), limit)
    # then a refusal says when the first window ends: no place frees before it (a retry's aim)
    conflict = _refused(bench, keys.lock, _token("c"), limit)
    assert conflict.state == "running" and conflict.window_ms is not None and 0 < conflict.window_ms <= window + TICK_MS
    # When one run outlasts its window and the other is released inside its own
    bench.elapse(window + 50)
    assert bench.backend.renew([(keys.lock, _token("a"), LONG_MS)]) == [True]
    assert bench.backend.release(keys.lock, _token("b")) is True
    _take(bench, keys.lock, _token("d"), limit)
    assert bench.backend.release(keys.lock, _token("d")) is True
    # then no window end is the soonest a place frees: the run past its window may end any moment
    assert _refused(bench, keys.lock, _token("c"), limit).window_ms is None


@check
def a_run_longer_than_its_window_keeps_its_place_until_it_ends(bench: Bench) -> None:
    limit = Limit(1, bench.short_ms)
    keys = _keys(bench, limit)
    # Given a holder whose run outlasts the window (its lease renewed past it)
    _take(bench, keys.lock, _token("a"), limit)
    bench.elapse(bench.short_ms + 50)
    assert bench.backend.renew([(keys.lock, _token("a"), LONG_MS)]) == [True]
    # then the place is still its own: the next call is refused until it releases
    assert _refused(bench, keys.lock, _token("b"), limit).window_ms is None
    assert bench.backend.release(keys.lock, _token("a"))
    _take(bench, keys.lock, _token("b"), limit)


@check
def fences_strictly_increase_across_every_holder_of_every_place(bench: Bench) -> None:
    limit = Limit(3)
    keys = _keys(bench, limit)
    backend, fences, holding = bench.backend, [], []
    # Given three places, when 60 holders come and go, up to three at a time,
    for n in range(60):
        token = _token(f"h{n}")
        if len(holding) == 3:
            assert backend.release(keys.lock, holding.pop(n % 3))
        _take(bench, keys.lock, token, limit)
        holding.append(token)
        fence = backend.fence(keys.lock, keys.fence, token)
        assert fence is not None
        fences.append(fence)
    # then every holder's fence is larger than every earlier holder's
    assert all(a < b for a, b in zip(fences, fences[1:])), fences
    # and a token without a place gets none
    assert backend.fence(keys.lock, keys.fence, _token("nobody")) is None


@check
def renew_and_release_many_take_places_and_locks_together(bench: Bench) -> None:
    limit = Limit(2)
    places, plain = _keys(bench, limit), bench.keys()
    backend = bench.backend
    # Given a place with a short lease, a singleton lock, and a token that holds neither
    _take(bench, places.lock, _token("p"), limit, ttl_ms=bench.short_ms)
    assert isinstance(backend.acquire(plain.lock, _token("s"), bench.short_ms, holder()), Grant)
    # When all are renewed in one call, then each answers in order
    assert backend.renew([(plain.lock, _token("s"), LONG_MS), (places.lock, _token("p"), LONG_MS),
                          (places.lock, _token("x"), LONG_MS)]) == [True, True, False]
    bench.elapse(bench.short_ms + 50)
    assert backend.holder(plain.lock) is not None and backend.holder(places.lock) is not None
    # When all are released in one call, then each answers in order and both are free
    assert backend.release_many([(places.lock, _token("p")), (plain.lock, _token("s")),
                                 (places.lock, _token("x"))]) == [True, True, False]
    assert backend.holder(plain.lock) is None and backend.holder(places.lock) is None


@check
def an_enqueue_place_is_adopted_by_token_on_the_same_key(bench: Bench) -> None:
    limit = Limit(2)
    keys = _keys(bench, limit)
    backend = bench.backend
    # Given an enqueue place (queued_or_running: one key) beside a running one
    _take(bench, keys.lock, _token("q"), limit, state="queued")
    _take(bench, keys.lock, _token("r"), limit)
    # When the message's worker adopts it by the enqueue token, then it runs under its own token
    adopted = backend.adopt(keys.lock, keys.lock, _token("q"), _token("n"), LONG_MS, holder("task-n"), limit=limit)
    assert isinstance(adopted, Grant), adopted
    assert backend.fence(keys.lock, keys.fence, _token("n")) is not None
    assert backend.fence(keys.lock, keys.fence, _token("q")) is None
    # and asking again is the same grant, while the enqueue token adopts nothing more
    assert isinstance(backend.adopt(keys.lock, keys.lock, _token("q"), _token("n"), LONG_MS, holder(), limit=limit),
                      Grant)
    assert isinstance(backend.adopt(keys.lock, keys.lock, _token("q"), _token("z"), LONG_MS, holder(), limit=limit),
                      NotOurs)
    # When the holder hands its place back to the queue (self.retry()), then the retry adopts it
    assert backend.requeue(keys.lock, _token("n"), 5_000) is True
    assert backend.renew([(keys.lock, _token("n"), LONG_MS)]) == [False]  # queued: not a run to renew
    adopted = backend.adopt(keys.lock, keys.lock, _token("n"), _token("m"), LONG_MS, holder(), limit=limit)
    assert isinstance(adopted, Grant), adopted
    _refused(bench, keys.lock, _token("x"), limit)


@check
def an_enqueue_place_waits_for_a_running_place_on_its_own_key(bench: Bench) -> None:
    limit = Limit(1)
    keys = limited(bench.keys(), Limit(1, 1))  # queued: enqueue places on a key of their own
    assert keys.queued != keys.lock
    backend = bench.backend
    # Given a running place taken and a queued copy's enqueue place
    _take(bench, keys.lock, _token("r"), limit)
    _take(bench, keys.queued, _token("q"), limit, state="queued")
    # When the queued copy's worker adopts while the running place is taken, then it is refused
    refused = backend.adopt(keys.queued, keys.lock, _token("q"), _token("n"), LONG_MS, holder(), limit=limit)
    assert isinstance(refused, Conflict) and not refused.same_token and refused.held == 1
    # and once the runner released, it adopts: its enqueue place is freed for the next copy
    assert backend.release(keys.lock, _token("r"))
    adopted = backend.adopt(keys.queued, keys.lock, _token("q"), _token("n"), LONG_MS, holder(), limit=limit)
    assert isinstance(adopted, Grant), adopted
    _take(bench, keys.queued, _token("q2"), limit, state="queued")


@check
def a_waiter_is_told_when_any_place_is_let_go(bench: Bench) -> None:
    limit = Limit(2)
    keys, (a, _b) = _fill(bench, limit)
    backend = bench.backend
    woke = threading.Event()
    # Given a waiter subscribed while every place is taken
    with backend.release_events(keys.lock) as events:
        assert events.ask() is True

        def wait() -> None:
            if events.wait(10.0):
                woke.set()

        thread = threading.Thread(target=wait)
        thread.start()
        try:
            # When one holder lets its place go, then the waiter wakes, and a place is free
            assert backend.release(keys.lock, a)
            assert woke.wait(10.0)
        finally:
            thread.join(10.0)
        _take(bench, keys.lock, _token("w"), limit)
    # and with a place free, asking to be told is answered "free" at once
    assert backend.release(keys.lock, _token("w"))
    with backend.release_events(keys.lock) as events:
        assert events.ask() is False


@check
def holder_reports_k_of_n_and_the_soonest_place(bench: Bench) -> None:
    limit = Limit(3, LONG_MS)
    keys = _keys(bench, limit)
    assert bench.backend.holder(keys.lock) is None
    _take(bench, keys.lock, _token("a"), limit)
    _take(bench, keys.lock, _token("b"), limit)
    assert bench.backend.release(keys.lock, _token("a"))
    info = bench.backend.holder(keys.lock)
    assert info is not None
    assert (info["held"], info["limit"]) == ("2", "3")
    assert info["task_id"].startswith("task-") and 0 < int(info["pttl"]) <= LONG_MS + TICK_MS


@check
def places_note_redeliveries_and_completions(bench: Bench) -> None:
    limit = Limit(2)
    keys = _keys(bench, limit)
    backend = bench.backend
    if not backend.records_completions:
        return
    _take(bench, keys.lock, _token("a"), limit)
    # Given a redelivered copy that met the holder's place
    assert backend.mark_redelivered(keys.lock, f"task-{_token('a')}") is True
    assert backend.mark_redelivered(keys.lock, "someone-else") is False
    # When the holder releases with a completion note, then the task id is remembered
    note = Completion(keys.done, f"task-{_token('a')}", LONG_MS, always=False)
    assert backend.release(keys.lock, _token("a"), note)
    assert backend.completed(keys.done, f"task-{_token('a')}")


@check
def keys_taken_once_leave_nothing_after_their_windows(bench: Bench) -> None:
    window = 2 * bench.short_ms
    limit = Limit(2, window)
    taken = [_keys(bench, limit) for _ in range(200)]
    # Given 200 keys each taken once and released
    for keys in taken:
        _take(bench, keys.lock, _token("once"), limit)
        assert bench.backend.release(keys.lock, _token("once"))
        # each one still counted in its window just after its release
        assert bench.backend.holder(keys.lock) is not None
    # When their windows have passed, then none holds a place (the store's own count is checked
    # per store: see the Redis tests and MemoryBackend.keys())
    bench.elapse(window + 50)
    assert all(bench.backend.holder(keys.lock) is None for keys in taken)


@check
def a_second_execution_of_one_task_id_meets_the_first_ones_place(bench: Bench) -> None:
    limit = Limit(3)
    keys = _keys(bench, limit)
    backend = bench.backend
    # Given an execution of task t holding a place, and free places beside it
    assert isinstance(backend.acquire(keys.lock, _token("first"), LONG_MS, holder("t"), limit=limit), Grant)
    # When another delivery of the same message (same task id, its own token) asks, then it
    # is refused with the first one's place, named by its token: never a second run of one message
    twin = backend.acquire(keys.lock, _token("second"), LONG_MS, holder("t"), limit=limit)
    assert isinstance(twin, Conflict), twin
    assert (twin.task_id, twin.holder_token, twin.same_token) == ("t", _token("first"), False)
    # and once the first let its place go, the task id may take one again
    assert backend.release(keys.lock, _token("first"))
    assert isinstance(backend.acquire(keys.lock, _token("second"), LONG_MS, holder("t"), limit=limit), Grant)


@check
def a_full_window_hands_a_call_that_comes_back_a_turn_behind_the_turns_before_it(bench: Bench) -> None:
    window = 4 * bench.short_ms
    limit = Limit(2, window, turns=True)
    keys = _keys(bench, limit)
    # Given both places of a key with a window taken and given back at once
    for name in "ab":
        _take(bench, keys.lock, _token(name), limit)
        assert bench.backend.release(keys.lock, _token(name))
    # When four calls that come back for a turn are refused
    turns = [_refused(bench, keys.lock, _token(name), limit).turn_ms for name in "cdef"]
    # then the first two are handed the first window's end, the next two a window later
    assert all(turn is not None for turn in turns), turns
    assert 0 < turns[0] <= window + TICK_MS and abs(turns[1] - turns[0]) <= 50, turns
    assert all(window - 50 <= turns[n] - turns[0] <= window + 50 for n in (2, 3)), turns
    # and asking again before its turn keeps the turn (not one at the back)
    assert _refused(bench, keys.lock, _token("c"), limit).turn_ms <= turns[0]
    # and a call that will not come back is handed none
    assert _refused(bench, keys.lock, _token("x"), Limit(2, window)).turn_ms is None
    # When the first window has passed
    bench.elapse(turns[0] + 50)
    # then a call with no turn queues behind the turns handed out, though both places are free
    late = _refused(bench, keys.lock, _token("g"), limit)
    assert late.turn_ms is not None and late.turn_ms > turns[3] - turns[0], (late, turns)
    assert _refused(bench, keys.lock, _token("y"), Limit(2, window)).held == 0
    # and a call whose turn is still ahead waits for it
    assert _refused(bench, keys.lock, _token("e"), limit).turn_ms > 0
    # and the two whose turn has come take the places, and nobody else gets one
    _take(bench, keys.lock, _token("c"), limit)
    _take(bench, keys.lock, _token("d"), limit)
    assert _refused(bench, keys.lock, _token("c2"), Limit(2, window)).held == 2
    # and the window still counts from each grant: the next turns come only as those windows end
    assert _refused(bench, keys.lock, _token("e"), limit).turn_ms > 0
