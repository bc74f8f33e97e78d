"""The newest call of a key wins (``on_locked="replace"``, ``lock_debounce``), on ``MemoryBackend``:
what ``apply_async`` publishes, and what a message of an older or a claimed call does at run time."""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterator, List

import pytest
from celery import Celery

from celery_singleton_lock import ConfigurationError, LockedTask, superseded
from celery_singleton_lock.calls import headers
from celery_singleton_lock.run import newest
from celery_singleton_lock.run.attempt import Attempt
from celery_singleton_lock.run.decisions import Ignored, Requeue, Superseded
from celery_singleton_lock.config.options import resolve_options
from celery_singleton_lock.runtime import runtime_for
from celery_singleton_lock.store import MemoryBackend
from celery_singleton_lock.enqueue.supersede import debounce_wait
from tests.support.published import published


@pytest.fixture
def app() -> Iterator[Celery]:
    app = Celery("latest", broker="memory://", backend="cache+memory://", set_as_current=False)
    app.conf.singleton_lock_backend = MemoryBackend()
    yield app
    runtime_for(app).close()



def _debounced(app: Celery, **options: Any) -> Any:
    @app.task(base=LockedTask, name="latest.sync", shared=False, lock_key=("account",), **options)
    def sync(account: int, payload: str) -> str:
        return payload
    return sync


def test_every_call_is_published_newer_than_the_last_and_due_after_the_quiet_period(app):
    sync = _debounced(app, lock_debounce=0.5)
    with published() as sent:
        results = [sync.delay(1, payload) for payload in "abc"]
    generations = [int(message[headers.GENERATION]) for message in sent]
    assert generations == sorted(set(generations)) and len(generations) == 3
    for message in sent:
        due = dt.datetime.fromisoformat(message["eta"]) - dt.datetime.now(dt.timezone.utc)
        assert 0.3 < due.total_seconds() <= 0.5
    # the calls the newest displaced are answered at once; the newest waits for its run
    assert [r.state for r in results] == ["SUCCESS", "SUCCESS", "PENDING"]
    assert results[0].get(timeout=1) is None


@pytest.mark.parametrize("failure", [KeyboardInterrupt, SystemExit, ConnectionError])
def test_a_call_whose_publish_raises_displaces_nothing(app, monkeypatch, failure):
    now = [1000.0]
    app.conf.singleton_lock_backend = MemoryBackend(clock=lambda: now[0])
    sync = _debounced(app, lock_debounce=0.5)
    kept = sync.delay(1, "kept")
    # When the next call's publish raises
    real = app.amqp.send_task_message

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise failure("publish refused")
    monkeypatch.setattr(app.amqp, "send_task_message", refuse)
    with pytest.raises(failure):
        sync.delay(1, "lost")
    monkeypatch.setattr(app.amqp, "send_task_message", real)
    # Then the call before it is not answered, and is still the newest: its message looks again once
    # the failed call's message could have reached a worker (quiet period + grace), then runs
    assert kept.state == "PENDING"
    sync.push_request(id=kept.id, args=(1, "kept"), kwargs={},
                      **{headers.GENERATION: str(_newest_generation(app, sync))})
    try:
        looks_again = newest.before_run(Attempt(sync, (1, "kept"), {}))
        assert isinstance(looks_again, Requeue) and looks_again.countdown == pytest.approx(1.5, abs=0.01)
        now[0] += 1.51
        assert newest.before_run(Attempt(sync, (1, "kept"), {})) is None
    finally:
        sync.pop_request()
    # and the next call published displaces it as usual
    assert sync.delay(1, "next") is not None and kept.get(timeout=1) is None


def _newest_generation(app: Celery, task: Any) -> int:
    store = app.conf.singleton_lock_backend.generations
    key = next(key for key in store._hashes)
    return int(store._hashes[key]["gen"])


def test_another_key_is_no_newer_call(app):
    sync = _debounced(app, lock_debounce=0.5)
    first, other = sync.delay(1, "a"), sync.delay(2, "b")
    assert (first.state, other.state) == ("PENDING", "PENDING")


@pytest.mark.parametrize("burst_ms, wait", [(0, 0.5), (600, 0.4), (1_500, 0.0)])
def test_debounce_max_caps_the_quiet_period(burst_ms, wait):
    options = resolve_options("t", {"lock_debounce": 0.5, "lock_debounce_max": 1.0}.get, {})
    assert debounce_wait(options, burst_ms) == pytest.approx(wait)


def _attempt(task: Any, task_id: str, generation: int) -> Attempt:
    task.push_request(id=task_id, args=(1, "x"), kwargs={}, **{headers.GENERATION: str(generation)})
    return Attempt(task, (1, "x"), {})


def test_a_superseded_message_ends_before_asking_and_the_newest_claims_its_run_once(app):
    sync = _debounced(app, lock_scope="queued", on_locked="replace")
    with published() as sent:
        older, newer = sync.delay(1, "old"), sync.delay(1, "new")
    old_gen, new_gen = (int(message[headers.GENERATION]) for message in sent)
    try:
        ended = newest.before_run(_attempt(sync, older.id, old_gen))
        assert ended == Superseded(newer.id)
        assert newest.before_run(_attempt(sync, newer.id, new_gen)) is None
        assert newest.claim_run(_attempt(sync, newer.id, new_gen)) is None
        # another delivery of the same message (a visibility timeout passed) stores nothing
        assert isinstance(newest.before_run(_attempt(sync, newer.id, new_gen)), Ignored)
    finally:
        for _ in range(4):
            sync.pop_request()


def test_a_quorum_cannot_say_which_call_is_the_newest(app):
    app.conf.singleton_lock_backend = None
    app.conf.singleton_lock_url = ["redis://a:6379/0", "redis://b:6379/0", "redis://c:6379/0"]
    with pytest.raises(ConfigurationError, match="quorum of independent masters"):
        _debounced(app, lock_debounce=0.5).name  # bound to the app: the options are checked


def test_calls_a_restarted_store_forgot_wait_a_quiet_period_and_only_the_newest_runs(app):
    sync = _debounced(app, lock_debounce=0.5)
    with published() as sent:
        older, newer = sync.delay(1, "old"), sync.delay(1, "new")
    old_gen, new_gen = (int(message[headers.GENERATION]) for message in sent)
    runtime_for(app).close()
    app.__dict__.pop("_singleton_lock_runtime")
    app.conf.singleton_lock_backend = MemoryBackend()  # the store restarted empty
    quiet = Requeue(None, counted=False, countdown=0.5)
    try:
        assert newest.before_run(_attempt(sync, older.id, old_gen)) == quiet
        assert newest.before_run(_attempt(sync, newer.id, new_gen)) == quiet
        # back after the quiet period: the older call is superseded, the newer one runs
        assert newest.before_run(_attempt(sync, older.id, old_gen)) == Superseded(newer.id)
        assert newest.before_run(_attempt(sync, newer.id, new_gen)) is None
        assert newest.claim_run(_attempt(sync, newer.id, new_gen)) is None
    finally:
        for _ in range(5):
            sync.pop_request()


@pytest.mark.parametrize("options", [dict(lock_debounce=0.5), dict(on_locked="replace", lock_scope="queued"),
                                     dict(on_locked="replace", lock_scope="queued_or_running")])
def test_a_newest_call_digests_its_arguments_once(app, monkeypatch, options):
    from celery_singleton_lock.calls.arguments import ArgumentKey
    digested: List[Any] = []
    for_message = ArgumentKey.for_message

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        digested.append(args)
        return for_message(self, *args, **kwargs)

    monkeypatch.setattr(ArgumentKey, "for_message", counted)
    monkeypatch.setattr(ArgumentKey, "__call__", lambda self, *args: digested.append(args) or "0" * 32)
    sync = _debounced(app, **options)
    with published() as sent:
        sync.delay(1, "a")
    assert len(sent) == 1 and len(digested) == 1


def test_a_call_whose_publisher_was_killed_before_recording_it_is_the_newest_once_a_worker_takes_it(
        app, monkeypatch):
    from celery_singleton_lock.enqueue import supersede

    sync = _debounced(app, lock_scope="queued_or_running", on_locked="replace")
    with published() as sent:
        before = sync.delay(1, "before")
        # When the next call's publisher is killed once its message is out, before it records the call
        monkeypatch.setattr(supersede.NewestCall, "published", lambda self: None)
        killed = sync.delay(1, "killed")
        monkeypatch.undo()
    before_gen, killed_gen = (int(message[headers.GENERATION]) for message in sent)
    assert before.state == "PENDING"
    try:
        # Then the worker that takes its message makes it the newest, as its publisher would have: the call
        # before is answered at once, and ends superseded when its message looks (it does not run first)
        assert newest.before_run(_attempt(sync, killed.id, killed_gen)) is None
        assert before.get(timeout=1) is None
        assert newest.before_run(_attempt(sync, before.id, before_gen)) == Superseded(killed.id)
        assert newest.claim_run(_attempt(sync, killed.id, killed_gen)) is None
    finally:
        for _ in range(3):
            sync.pop_request()


@pytest.mark.parametrize("extended", [True, False])
def test_a_superseded_call_is_marked_in_its_meta_and_still_answers_none(app, extended):
    # Given a result backend storing extended results (or not) and a replace task
    app.conf.result_extended = extended
    sync = _debounced(app, lock_scope="queued", on_locked="replace")
    ran = app.AsyncResult("ran")
    app.backend.store_result(ran.id, None, "SUCCESS")  # a run that returned None
    # When a newer call supersedes a waiting one
    older, newer = sync.delay(1, "old"), sync.delay(1, "new")
    # Then the older one answers None and, where the backend keeps request fields, says it was superseded
    assert older.get(timeout=1) is None
    assert superseded(older) is extended
    meta = app.backend.get_task_meta(older.id)
    assert (meta.get("singleton_lock_superseded_by"), meta.get("singleton_lock_policy")) == \
        ((newer.id, "replace") if extended else (None, None))
    assert not superseded(newer) and not superseded(ran)


def test_an_eager_call_is_never_superseded(app):
    # Given a debounced task called eagerly (in the caller, at once)
    sync = _debounced(app, lock_debounce=2)
    result = sync.apply((1, "draft"))
    # Then it ran, and superseded() says it was not superseded rather than failing on its missing backend
    assert result.get() == "draft"
    assert superseded(result) is False


@pytest.mark.parametrize("forged", [{headers.GENERATION: "1"}, {headers.RETRIES: "0"},
                                    {headers.GENERATION: "1", headers.RETRIES: "3"}])
def test_a_callers_own_library_headers_neither_skip_the_stamping_nor_reach_the_message(app, forged):
    # Given a replace task and a call of a key waiting
    app.conf.result_extended = True
    sync = _debounced(app, lock_scope="queued", on_locked="replace")
    with published() as sent:
        waiting = sync.delay(1, "waiting")
        # When a caller passes the library's own headers to apply_async
        newer = sync.apply_async((1, "newer"), headers=dict(forged))
    # Then its call is stamped as the newest like any other (the headers replaced by the library's own),
    # and the call it displaced is answered superseded
    first, second = (int(message[headers.GENERATION]) for message in sent)
    assert second > first > 1
    assert headers.RETRIES not in sent[1]
    assert waiting.get(timeout=1) is None and superseded(waiting)
    assert newer.state == "PENDING"
