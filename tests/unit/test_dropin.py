"""``LockedTask`` keeps what ``celery.Task`` does where the lock has no say.

An app on the in-memory lock store and Celery's in-memory broker: calls are published (nothing
consumes them) or run eagerly with ``.apply()``.
"""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace
from typing import Any, Callable, Iterator, List

import pytest
from celery import Celery
from celery.app.trace import get_log_policy, log_policy_expected
from kombu.exceptions import EncodeError

from celery_singleton_lock import LockedError, LockedTask, UnencodableArgumentError, UnserializableArgumentError
from celery_singleton_lock.runtime import peek_runtime
from celery_singleton_lock.store import MemoryBackend

MakeApp = Callable[..., Celery]


@pytest.fixture
def make_app() -> Iterator[MakeApp]:
    made: List[Celery] = []

    def make(**params: Any) -> Celery:
        app = Celery("dropin", broker="memory://", set_as_current=False, **params)
        app.conf.singleton_lock_backend = MemoryBackend()
        made.append(app)
        return app

    yield make
    for app in made:
        runtime = peek_runtime(app)
        if runtime is not None:
            runtime.close()


@pytest.fixture
def app(make_app: MakeApp) -> Celery:
    return make_app()


# -- typing=False -----------------------------------------------------------------------------------
@pytest.mark.parametrize("untyped", [{"task": {"typing": False}}, {"app": {"strict_typing": False}}],
                         ids=["typing=False", "strict_typing=False"])
def test_untyped_calls_are_published_as_celery_publishes_them(make_app, untyped):
    app = make_app(**untyped.get("app", {}))

    @app.task(shared=False, base=LockedTask, **untyped.get("task", {}))
    def add(x, y, kw=1):
        pass

    for args, kwargs in [((1,), {}), ((1,), {"kw": 2}), ((1, 2), {"foobar": 3}), ((1, 2, 3, 4), {})]:
        add.apply_async(args, kwargs)  # Celery publishes each of these; so do we

    # Keyed by what was passed: the same call spelled otherwise shares its key, another does not.
    assert add.lock_digest((1,), {}) == add.lock_digest((), {"x": 1}) == add.lock_digest((1,), {"kw": 1})
    keys = {add.lock_digest(*call) for call in [((1,), {}), ((1, None), {}), ((1,), {"kw": 2}), ((1, 2), {"foobar": 3}),
                                                ((1, 2, 1, 3), {}), ((1, 2), {"x": 3}), ((), {"y": 1})]}
    assert len(keys) == 7


def test_typed_calls_that_do_not_fit_are_still_refused(app):
    @app.task(shared=False, base=LockedTask)
    def add(x, y):
        pass

    with pytest.raises(TypeError):
        add.delay(1)


# -- the shape of a call ----------------------------------------------------------------------------
def test_arguments_of_the_wrong_shape_get_celerys_type_error(app):
    @app.task(shared=False, base=LockedTask)
    def task(*args, **kwargs):
        pass

    with pytest.raises(TypeError, match="task keyword arguments must be a mapping"):
        task.apply_async([], "str")
    with pytest.raises(TypeError, match="task args must be a list or tuple"):
        task.apply_async("s", {})


# -- arguments the serializer refuses ---------------------------------------------------------------
@pytest.mark.parametrize("scope", ["running", "queued_or_running"])
def test_an_argument_the_serializer_refuses_is_an_encode_error_naming_the_parameter(app, scope):
    @app.task(shared=False, base=LockedTask, lock_scope=scope)
    def task(x):
        pass

    with pytest.raises(EncodeError) as info:
        task.delay(object())
    assert isinstance(info.value, UnserializableArgumentError)
    assert isinstance(info.value, UnencodableArgumentError) and isinstance(info.value, TypeError)
    assert info.value.parameter == "x" and "lock_key" in str(info.value)


@pytest.fixture
def pickled(make_app: MakeApp) -> Any:
    """A task of one parameter, on an app whose messages are pickled (pickle carries any object)."""
    app = make_app()
    app.conf.update(task_serializer="pickle", accept_content=["pickle"])

    @app.task(shared=False, base=LockedTask)
    def task(x):
        pass

    return task


def test_an_argument_only_the_lock_key_refuses_is_no_encode_error(pickled):
    with pytest.raises(UnencodableArgumentError, match="argument 'x' cannot be used in a lock key.*lock_key") as info:
        pickled.delay(ValueError("no canonical form"))
    assert not isinstance(info.value, EncodeError)


def test_sets_have_a_key_under_pickle(pickled):
    pickled.delay({3, 1, 2})
    assert pickled.lock_digest(({1, 2, 3},), {}) == pickled.lock_digest((frozenset([3, 2, 1]),), {})
    assert pickled.lock_digest(({1, 2},), {}) != pickled.lock_digest(([1, 2],), {})


# -- a task calling itself as a function ------------------------------------------------------------
def test_a_task_calling_itself_as_a_function_makes_a_plain_call(app):
    seen = []

    @app.task(shared=False, base=LockedTask, bind=True, lock_wait_timeout=5, on_locked="wait")
    def countdown(self, i):
        outer_lock = self.lock
        inner = countdown(i - 1) if i else None  # the same task, called as a function
        seen.append((i, self.request.args, outer_lock is not None, self.lock is outer_lock))
        return inner if inner is not None else i

    done = threading.Event()
    result: List[Any] = []

    def run() -> None:
        result.append(countdown.apply(args=(2,)))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(3), "the nested call blocked"
    assert result[0].state == "SUCCESS" and result[0].get() == 0
    # Each call sees its own arguments; only the execution holds the lock, and keeps it.
    assert seen == [(0, (0,), False, True), (1, (1,), False, True), (2, (2,), True, True)]


def test_a_nested_call_with_the_same_arguments_does_not_wait_for_itself(app):
    @app.task(shared=False, base=LockedTask, bind=True, lock_key=("key",), on_locked="wait", lock_wait_timeout=5)
    def again(self, key, depth=0):
        return depth if depth else again(key, depth=1)  # the same lock key as the running execution

    assert again.apply(args=("k",)).get(timeout=3) == 1


# -- on_locked="raise" ------------------------------------------------------------------------------
def test_a_refused_duplicate_is_an_expected_error(app):
    @app.task(shared=False, base=LockedTask, on_locked="raise")
    def raising(x):
        pass

    @app.task(shared=False, base=LockedTask, on_locked="raise", throws=(KeyError,))
    def own_throws(x):
        pass

    assert LockedError in raising.throws
    assert own_throws.throws == (KeyError, LockedError)  # the user's own kept
    error = LockedError("duplicate", "t", "k", "holder-id")
    einfo = SimpleNamespace(internal=False)
    assert get_log_policy(raising, einfo, error) is log_policy_expected  # one INFO line, no traceback
    assert log_policy_expected.severity == logging.INFO


def test_other_policies_leave_throws_alone(app):
    @app.task(shared=False, base=LockedTask)
    def skipping(x):
        pass

    assert skipping.throws == ()
