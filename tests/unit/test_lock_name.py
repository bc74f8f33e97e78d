"""``lock_name``: tasks that share one lock (MemoryBackend, no worker)."""

from __future__ import annotations

import threading
from typing import List

import pytest
from celery import Celery

from celery_singleton_lock import ConfigurationError, LockedTask, SharedLock, lock_acquired
from celery_singleton_lock.config.options import OPTION_NAMES, refuse_unknown_options, resolve_options
from celery_singleton_lock.config.sharing import refuse_disagreeing
from tests.support.apps import MADE
from celery_singleton_lock.store import Holder, MemoryBackend, record
from celery_singleton_lock.worker.start_check import check_lock_store




def _app(store=None):
    app = Celery("lock_name", broker="memory://", set_as_current=False)
    MADE.append(app)
    app.conf.singleton_lock_backend = store or MemoryBackend()
    app.finalize()
    return app


def test_the_name_defaults_to_the_tasks_and_is_a_known_option():
    assert resolve_options("t", {}.get, {}).key_name("t") == "t"
    assert resolve_options("t", {"lock_name": "account"}.get, {}).key_name("t") == "account"
    assert "lock_name" in OPTION_NAMES
    refuse_unknown_options("t", [("lock_name", "account")])
    with pytest.raises(ConfigurationError, match="did you mean lock_name"):
        refuse_unknown_options("t", [("lock_nmae", "account")])


@pytest.mark.parametrize("value", ["", "  ", 3, ("a",)])
def test_a_name_that_is_no_string_is_refused(value):
    with pytest.raises(ConfigurationError, match="lock_name must be a non-empty str"):
        resolve_options("t", {"lock_name": value}.get, {})


def test_tasks_sharing_a_name_exclude_each_other_per_key_and_not_across_keys():
    store = MemoryBackend()
    app = _app(store)
    inside, release = threading.Event(), threading.Event()
    keys: List[str] = []

    @app.task(base=LockedTask, shared=False, bind=True, lock_name="account", lock_key=("account_id",))
    def sync_account(self, account_id, full=False):
        keys.append(self.lock.key)
        inside.set()
        release.wait(10)
        return "synced"

    @app.task(base=LockedTask, shared=False, bind=True, lock_name="account", lock_key=("account_id",))
    def delete_account(self, account_id):
        keys.append(self.lock.key)
        return "deleted"

    # Given sync_account(42) running
    runner = threading.Thread(target=lambda: sync_account.apply((42,), {"full": True}).get())
    runner.start()
    assert inside.wait(10)
    # then delete_account(42) is its duplicate (skipped), and delete_account(43) runs beside it
    assert delete_account.apply((42,)).get() is None
    assert delete_account.apply((43,)).get() == "deleted"
    release.set()
    runner.join(10)
    assert delete_account.apply((42,)).get() == "deleted"
    assert keys[0] == keys[2] and keys[0] != keys[1]
    assert ":{account:" in keys[0]
    assert store.keys() == []


def test_the_record_says_which_task_made_the_call_and_signals_name_the_task():
    store = MemoryBackend()
    app = _app(store)
    seen = {}
    senders: List[str] = []

    def on_acquired(sender=None, **kwargs):
        senders.append(sender.name)

    lock_acquired.connect(on_acquired)

    @app.task(base=LockedTask, shared=False, bind=True, lock_name="account", lock_key=("account_id",))
    def sync_account(self, account_id):
        seen.update(store.holder(self.lock.key))

    try:
        sync_account.apply((42,)).get()
    finally:
        lock_acquired.disconnect(on_acquired)
    assert seen["task"] == sync_account.name
    assert senders == [sync_account.name]


def test_a_records_task_and_description_read_back():
    holder = Holder(task_id="id 1", host="h", pid=1, since_ms=1, heartbeat_ms=1, describe="a=1", task="sync")
    fields = record.decode(record.encode("tok", "running", 10, holder))
    assert (fields["task_id"], fields["describe"], fields["task"]) == ("id 1", "a=1", "sync")
    plain = record.decode(record.encode("tok", "running", 10, Holder("id", "h", 1, 1, 1, describe="a=1")))
    assert (plain["describe"], plain["task"]) == ("a=1", "")
    bare = record.decode(record.encode("tok", "running", 10, Holder("id", "h", 1, 1, 1, task="sync")))
    assert (bare["describe"], bare["task"]) == ("", "sync")


@pytest.mark.parametrize("first, second, option", [
    ({"lock_limit": 2}, {"lock_limit": 1}, "lock_limit"),
    ({"lock_window": 60}, {}, "lock_window"),
    ({"lock_scope": "queued"}, {}, "lock_scope"),
])
def test_tasks_sharing_a_name_but_not_its_shape_are_refused_at_definition_naming_both(first, second, option):
    app = _app()

    @app.task(base=LockedTask, shared=False, name="sync_account", lock_name="account", **first)
    def sync_account(account_id):
        pass

    with pytest.raises(ConfigurationError, match=f"'sync_account' and 'delete_account'.*{option}"):
        @app.task(base=LockedTask, shared=False, name="delete_account", lock_name="account", **second)
        def delete_account(account_id):
            pass


def test_the_worker_start_refuses_tasks_that_disagree_on_a_shared_lock():
    a = resolve_options("a", {"lock_name": "n", "lock_limit": 2}.get, {})
    b = resolve_options("b", {"lock_name": "n"}.get, {})
    c = resolve_options("c", {"lock_limit": 5}.get, {})
    refuse_disagreeing([("a", a), ("c", c)])
    with pytest.raises(ConfigurationError, match="'a' and 'b' share lock_name='n' but disagree on lock_limit"):
        refuse_disagreeing([("a", a), ("c", c), ("b", b)])
    # a task named like another's lock_name shares its lock too
    with pytest.raises(ConfigurationError, match="'a' and 'n'"):
        refuse_disagreeing([("a", a), ("n", resolve_options("n", {}.get, {}))])


def test_check_lock_store_at_worker_start_refuses_disagreeing_tasks():
    app = _app()

    class Sync(LockedTask):
        name = "sync_account"
        lock_name = "account"
        lock_limit = 2

        def run(self, account_id):
            pass

    class Delete(LockedTask):
        name = "delete_account"
        lock_name = "account"

        def run(self, account_id):
            pass

    # Registered behind the definition-time check's back (another module, bound lazily)
    app._tasks[Sync.name] = Sync()
    app._tasks[Delete.name] = Delete()
    for task in (Sync, Delete):
        task._singleton_lock_resolved = None
    app._tasks[Sync.name].bind(app)
    with pytest.raises(ConfigurationError, match="share lock_name='account'"):
        app._tasks[Delete.name].bind(app)
    Delete._singleton_lock_resolved = None
    with pytest.raises(ConfigurationError, match="share lock_name='account'"):
        check_lock_store(app)


@pytest.mark.parametrize("first, second", [
    ({"lock_key": ("account_id",)}, {}),                                   # one value against two parameters
    ({"lock_key": ("account_id",)}, {"lock_key": ("account_id", "full")}),
    ({"lock_key": lambda account_id, full=False: str(account_id)}, {}),  # a function's string is one value
])
def test_tasks_sharing_a_name_but_not_the_number_of_key_values_are_refused_naming_both(first, second):
    app = _app()

    @app.task(base=LockedTask, shared=False, name="sync_account", lock_name="account", **first)
    def sync_account(account_id, full=False):
        pass

    with pytest.raises(ConfigurationError, match="'sync_account' and 'delete_account'.* 1 and 2 values"):
        @app.task(base=LockedTask, shared=False, name="delete_account", lock_name="account", **second)
        def delete_account(account_id, full=False):
            pass


def test_tasks_naming_their_one_key_value_otherwise_share_its_lock_with_a_shared_lock():
    store = MemoryBackend()
    app = _app(store)

    @app.task(base=LockedTask, shared=False, bind=True, lock_name="account", lock_key=("account_id",))
    def sync_account(self, account_id, full=False):
        return self.lock.key

    @app.task(base=LockedTask, shared=False, bind=True, lock_name="account", lock_key=("id",))
    def delete_account(self, id):
        return self.lock.key

    @app.task(base=LockedTask, shared=False, bind=True, lock_name="account",
              lock_key=lambda account_id: str(account_id))
    def audit_account(self, account_id):
        return self.lock.key

    lock = SharedLock("account", app=app)
    with lock.hold(42) as held:
        assert sync_account.apply((42,), {"full": True}).get() is None  # the shared lock holds it: skipped
        assert delete_account.apply((), {"id": 42}).get() is None
        assert sync_account.apply((43,)).get() != held.key
    assert sync_account.apply((42,)).get() == delete_account.apply((42,)).get() == held.key
    with lock.hold("42") as as_text:  # a lock_key function's string is the one key value
        assert audit_account.apply((42,)).get() is None
    assert audit_account.apply((42,)).get() == as_text.key != held.key
    with pytest.raises(ConfigurationError, match=r"hold\(\) gives 2 key value.*sync_account'"):
        lock.hold(42, "extra").__enter__()


@pytest.mark.parametrize("first", ["sync_account", "sync_region"])
def test_a_disagreement_refuses_the_first_call_of_either_task_whatever_is_called_first(first):
    # An app not finalized yet (a publisher's): each task is bound when first used, not at definition.
    app = Celery("lock_name_lazy", broker="memory://", set_as_current=False)
    MADE.append(app)
    app.conf.singleton_lock_backend = MemoryBackend()
    ran: List[str] = []

    @app.task(base=LockedTask, shared=False, lock_name="account", lock_key=("account_id",))
    def sync_account(account_id):
        ran.append("sync_account")

    @app.task(base=LockedTask, shared=False, lock_name="account", lock_key=("account_id", "region"))
    def sync_region(account_id, region):
        ran.append("sync_region")

    assert not app.finalized
    tasks = {"sync_account": (sync_account, (42,)), "sync_region": (sync_region, (42, "eu"))}
    second = next(name for name in tasks if name != first)
    for name in (first, first, second):
        task, args = tasks[name]
        with pytest.raises(ConfigurationError, match="share lock_name='account' but their keys have"):
            task.apply(args).get()
    assert ran == []
