"""``singleton_lock_guard_old_keys``: a run holds its key as older commits name it too (MemoryBackend).

The older keys below are what the package at commit ``2614155^`` (keys by parameter name) names
these calls: an older worker during a rolling deploy. The real older worker meets a newer one in
``tests/integration/test_rolling_deploy.py``.
"""

from __future__ import annotations

import types
from typing import Dict, List

import pytest
import redis
from celery import Celery

from celery_singleton_lock import ConfigurationError, LockBackendError, LockedError, LockedTask, lock_conflict
from celery_singleton_lock.calls import headers
from celery_singleton_lock.config.settings import setting_problems
from celery_singleton_lock.run.attempt import Attempt
from celery_singleton_lock.run.exits import release_for_child
from celery_singleton_lock.store import Holder, Limit, MemoryBackend
from tests.support.apps import MADE

#: (task, call) -> its run lock's key as the package at 2614155^ names it.
OLDER = {
    "sync_account": "singleton_lock:{sync_account:9}:9663939e415103435b4873edf109c921",
    "plain": "singleton_lock:{plain:b}:b48465408132d0bff24c5d5f94bfe758",
    "fn": "singleton_lock:{fn:d}:d743a29cbaa00804ca5cf89d87b0dc06",
    "limited": "singleton_lock:{limited:8}:8aef2154e44a7b129041c2ab2dfa1a05:places",
    "named": "singleton_lock:{account:f}:f3e7dc66e04b3215f6b17c41adbfc816",
}
CALLS = {"sync_account": (7,), "plain": (1,), "fn": (3,), "limited": (5,), "named": (42,)}
OLDER_HOLDER = Holder(task_id="older-run", host="older-host", pid=4242, since_ms=1, heartbeat_ms=10000)


def _app(store: MemoryBackend, guard: object = True, **conf: object) -> Celery:
    app = Celery("old_keys", broker="memory://", set_as_current=False)
    MADE.append(app)
    app.conf.singleton_lock_backend = store
    app.conf.singleton_lock_guard_old_keys = guard
    app.conf.update(conf)
    return app


def _tasks(app: Celery, seen: List[Dict[str, object]], store: MemoryBackend, **options: object):
    """One task of each kind of key; each body notes which keys were held while it ran."""
    def note(name: str) -> str:
        seen.append({"task": name, "held": sorted(store.keys())})
        return name

    def task(**extra: object):
        return app.task(base=LockedTask, shared=False, **{**extra, **options})

    @task(name="sync_account", lock_key=("account_id",))
    def sync_account(account_id, seconds=0):
        return note("sync_account")

    @task(name="plain")
    def plain(a, b=2):
        return note("plain")

    @task(name="fn", lock_key=lambda x: f"x{x}")
    def fn(x):
        return note("fn")

    @task(name="limited", lock_key=("a",), lock_limit=2)
    def limited(a):
        return note("limited")

    @task(name="named", lock_name="account", lock_key=("id",))
    def named(id):
        return note("named")

    app.finalize()
    return {t.name: t for t in (sync_account, plain, fn, limited, named)}


def _hold_older(store: MemoryBackend, name: str) -> None:
    """Older workers run the call: as many runs as its limit (each takes one of the older key's places)."""
    limit = Limit(2, 0) if name == "limited" else None
    for run in range(limit.count if limit else 1):
        holder = Holder(task_id=f"older-run-{run}" if run else "older-run", host="older-host", pid=4242 + run,
                        since_ms=1, heartbeat_ms=10000)
        granted = store.acquire(OLDER[name], f"older-token-{run}", 30000, holder, limit=limit)
        assert type(granted).__name__ == "Grant"


def test_a_limited_call_takes_a_place_of_the_older_key_beside_an_older_run():
    store, seen = MemoryBackend(), []
    tasks = _tasks(_app(store), seen, store)
    assert store.acquire(OLDER["limited"], "older-token", 30000, OLDER_HOLDER, limit=Limit(2, 0))
    assert tasks["limited"].apply((5,)).get() == "limited"  # one place of two taken by the older run
    assert OLDER["limited"] in seen[0]["held"]


@pytest.mark.parametrize("name", sorted(OLDER))
def test_a_run_holds_its_key_as_older_commits_name_it_and_lets_go_of_both(name):
    store, seen = MemoryBackend(), []
    tasks = _tasks(_app(store), seen, store)
    assert tasks[name].apply(CALLS[name]).get() == name
    assert OLDER[name] in seen[0]["held"] and len(seen[0]["held"]) == 2  # beside its own lock, while the body ran
    assert store.keys() == []


def test_with_the_setting_off_no_older_key_is_held():
    store, seen = MemoryBackend(), []
    tasks = _tasks(_app(store, guard=False), seen, store)
    assert tasks["sync_account"].apply((7,)).get() == "sync_account"
    assert OLDER["sync_account"] not in seen[0]["held"]


@pytest.mark.parametrize("name", sorted(OLDER))
def test_a_call_an_older_worker_runs_is_skipped_naming_the_older_key(name):
    store, seen = MemoryBackend(), []
    tasks = _tasks(_app(store), seen, store)
    _hold_older(store, name)
    met: List[str] = []

    def heard(sender=None, key=None, action=None, **_):
        met.append(f"{action} {key}")

    lock_conflict.connect(heard, weak=False)
    try:
        assert tasks[name].apply(CALLS[name]).get() is None
    finally:
        lock_conflict.disconnect(heard)
    assert seen == [] and met == [f"skip {OLDER[name]}"]
    assert store.keys() == [OLDER[name]]  # its own lock given back, the older holder's untouched


def test_raise_fails_naming_the_older_key_and_its_holder():
    store, seen = MemoryBackend(), []
    tasks = _tasks(_app(store), seen, store, on_locked="raise")
    _hold_older(store, "sync_account")
    with pytest.raises(LockedError, match=r"older commits name it, is held by task older-run") as caught:
        tasks["sync_account"].apply((7,)).get()
    assert caught.value.key == OLDER["sync_account"] and caught.value.holder == "older-run"
    assert seen == [] and store.keys() == [OLDER["sync_account"]]


@pytest.mark.parametrize("options", [{"on_locked": "retry"}, {"on_locked": "wait", "lock_wait_timeout": 1},
                                     {"on_locked": "replace", "lock_scope": "queued"}])
def test_retry_wait_and_replace_are_requeued_while_an_older_run_holds_the_call(options):
    store, seen = MemoryBackend(), []
    tasks = _tasks(_app(store), seen, store, **options)
    _hold_older(store, "sync_account")
    # An eager run has no queue to go back to: it ends at once with LockedError.
    with pytest.raises(LockedError, match="in eager mode a lock retry cannot wait"):
        tasks["sync_account"].apply((7,)).get()
    assert seen == [] and store.keys() == [OLDER["sync_account"]]


def test_the_requeue_is_reported_as_a_retry_and_counted_only_for_retry():
    from celery_singleton_lock.run import guard
    from celery_singleton_lock.run.decisions import Requeue

    for policy, counted in (("retry", True), ("wait", False), ("replace", False)):
        reported: List[object] = []
        attempt = types.SimpleNamespace(options=types.SimpleNamespace(on_locked=policy), guard=OLDER["plain"],
                                        conflict=lambda holder, action, key=None: reported.append((action, key)))
        decision = guard.refusal(attempt, object())  # type: ignore[arg-type]
        assert isinstance(decision, Requeue) and decision.counted is counted
        assert reported == [("retry", OLDER["plain"])]  # it is re-queued, whatever its policy: said so


def test_a_store_error_taking_the_older_key_names_it_and_gives_back_the_run_lock():
    class Failing(MemoryBackend):
        def acquire(self, key, *args, **kwargs):
            if key == OLDER["sync_account"]:
                raise redis.ConnectionError("connection refused")
            return super().acquire(key, *args, **kwargs)

    store, seen = Failing(), []
    tasks = _tasks(_app(store), seen, store, on_lock_error="raise")
    with pytest.raises(LockBackendError, match=f"taking lock {OLDER['sync_account']}".replace("{", r"\{")):
        tasks["sync_account"].apply((7,)).get()
    assert seen == [] and store.keys() == []


def test_the_worker_main_process_gives_back_the_older_key_of_a_dead_pool_process():
    store = MemoryBackend()
    tasks = _tasks(_app(store), [], store)
    task = tasks["sync_account"]
    holder = Holder(task_id="t1", host="h", pid=1, since_ms=1, heartbeat_ms=10000)
    request = types.SimpleNamespace(id="t1", is_eager=False, get=lambda key, default=None: None)
    attempt = Attempt(task, (7,), {}, request)
    store.acquire(attempt.key, "tok", 30000, holder)
    store.acquire(attempt.guard, "tok", 30000, holder)
    assert sorted(store.keys()) == sorted([attempt.key, OLDER["sync_account"]])
    assert release_for_child(task, "t1", {headers.TOKEN: "tok"}, (7,), {}, "pool process killed")
    assert store.keys() == []


def test_the_setting_is_read_under_djangos_celery_namespace():
    store, seen = MemoryBackend(), []
    app = Celery("old_keys_ns", broker="memory://", set_as_current=False)
    MADE.append(app)
    app.config_from_object(types.SimpleNamespace(CELERY_SINGLETON_LOCK_BACKEND=store,
                                                 CELERY_SINGLETON_LOCK_GUARD_OLD_KEYS=True), namespace="CELERY")
    tasks = _tasks(app, seen, store)
    assert tasks["plain"].apply((1,)).get() == "plain"
    assert OLDER["plain"] in seen[0]["held"]


@pytest.mark.parametrize("value", ["yes", "False", 1, None.__class__])
def test_a_value_that_is_no_bool_is_refused_naming_the_setting(value):
    store = MemoryBackend()
    app = _app(store, guard=value)
    with pytest.raises(ConfigurationError, match="singleton_lock_guard_old_keys must be True or False"):
        _tasks(app, [], store)["plain"].apply((1,)).get()
    assert [name for name, _ in setting_problems(app.conf)] == ["singleton_lock_guard_old_keys"]
