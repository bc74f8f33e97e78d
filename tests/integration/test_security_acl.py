"""The least-privilege ACL user of ``docs/security.md`` is exactly what the library needs.

Given a Redis 7 whose only usable user is the documented one (the default user has
a password the library is not given), when every lock operation runs (as workers,
publishers and ``celery locks`` run them) then Redis refuses nothing (its own
``ACL LOG`` says so), and when any one documented command is taken away, Redis
refuses something: the line is enough, and nothing in it is spare. A duplicate
storm through a real prefork worker, a ``queued_or_running`` publish and the CLI
run under that user too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional

import pytest
import redis

from celery_singleton_lock.store import Completion, Conflict, Grant, Holder, KeyLayout
from celery_singleton_lock.store.admin import clear_lock, scan_locks
from celery_singleton_lock.store.connect import open_store
from redis.crc import key_slot
from tests.integration.helpers import lock_keys, records, wait_unlocked
from tests.integration.storm import run_storm, worker_env
from tests.integration.topo import app_on
from tests.support.acl import (DOC_PATH, AclServer, DocumentedAcl, Unsupported, acl_denials, documented_acl,
                               require_redis_7)
from tests.support.suite_redis import lock_prefix
from tests.support.topologies import LocalCluster, SentinelGroup
from tests.support.waits import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PREFIX = lock_prefix()  # what the test app locks under
TASK = "acl.job"
#: The documented addition for a lock URL with a database other than 0.
OTHER_DB = "database other than 0"
#: A health check before (nearly) every command, so PING is exercised as a long-lived worker sends it.
EAGER_HEALTH_CHECKS: Dict[str, Any] = {"health_check_interval": 0.001}


@pytest.fixture(scope="module")
def documented() -> DocumentedAcl:
    return documented_acl()


@pytest.fixture
def acl_server() -> Iterator[AclServer]:
    server = AclServer()
    try:
        server.start()
    except Unsupported as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_7() -> None:
    try:
        require_redis_7()
    except Unsupported as exc:
        pytest.skip(str(exc))


def _holder(task_id: str) -> Holder:
    return Holder(task_id, "acl-host", os.getpid(), int(time.time() * 1000), 1000)


def exercise_store(store: Any, layout: KeyLayout) -> None:
    """Each operation of the lock protocol once, the way workers, publishers and ``celery locks`` use them."""
    fence, done = layout.fence(TASK, "a" * 32), layout.done(TASK, "a" * 32)
    key, other, queued = layout.lock(TASK, "a" * 32), layout.lock(TASK, "b" * 32), layout.queued(TASK, "b" * 32)
    # take it, meet it as a duplicate, look at its holder, renew it
    assert isinstance(store.acquire(key, "t1", 10_000, _holder("id-1")), Grant)
    assert store.fence(key, fence, "t1")
    conflict = store.acquire(key, "t2", 10_000, _holder("id-2"))
    assert isinstance(conflict, Conflict) and conflict.task_id == "id-1" and conflict.pttl_ms > 0
    assert store.holder(key)["token"] == "t1"
    assert store.renew([(key, "t1", 10_000)]) == [True]
    # a redelivered copy meets it; the release notes the completion and wakes a waiter
    assert store.mark_redelivered(key, "id-1")
    with store.release_events(key) as events:
        assert store.release(key, "t1", Completion(done, "id-1", 60_000, False))
        assert events.wait(5)
    assert store.completed(done, "id-1")
    # an enqueue lock adopted by a worker, handed back by self.retry(), released by the main process
    assert isinstance(store.acquire(queued, "q1", 10_000, _holder("id-3"), "queued"), Grant)
    assert isinstance(store.adopt(queued, other, "q1", "r1", 10_000, _holder("id-3")), Grant)
    assert store.requeue(other, "r1", 10_000)
    assert store.release_many([(other, "r1", "queued")]) == [True]
    # the newest call of a key (on_locked="replace", lock_debounce): published twice, looked at, claimed
    generation, generations = layout.generation(TASK, "a" * 32), store.generations
    older, newest = generations.reserve(generation, 10_000), generations.reserve(generation, 10_000)
    assert generations.supersede(generation, older.gen, "id-6", 10_000) is None
    assert generations.supersede(generation, newest.gen, "id-7", 10_000) == "id-6"
    assert generations.peek(generation, older.gen).outcome == "superseded"
    assert generations.claim(generation, newest.gen, "id-7", 10_000).outcome == "run"
    # the operator's view: list, then clear by token
    assert isinstance(store.acquire(key, "t4", 10_000, _holder("id-5")), Grant)
    [record] = scan_locks(store.client, layout)
    assert record.task_id == "id-5"
    assert clear_lock(store, record, force=True).cleared
    # a key of another type at a lock's name: met as a foreign holder, listed, cleared
    store.client.zadd(key, {"planted": 1})
    assert store.acquire(key, "t5", 10_000, _holder("id-6")).state == "foreign"
    [record] = scan_locks(store.client, layout)
    assert record.state == "foreign" and clear_lock(store, record).cleared


def exercise_quorum(server: AclServer, layout: KeyLayout) -> None:
    """A quorum over three databases whose fencing counters all differ: whichever majority answers
    first disagrees on the fence, so it is settled with RAISE_FENCE; the next acquire proposes a floor."""
    task = "acl.quorum"
    fence, key = layout.fence(task, "c" * 32), layout.lock(task, "c" * 32)
    for db, counter in ((2, 50), (3, 100)):
        admin = server.admin(db)
        try:
            admin.set(fence, counter)
        finally:
            admin.close()
    quorum = open_store([server.user_url(db) for db in (1, 2, 3)],
                        dict(EAGER_HEALTH_CHECKS, quorum_node_timeout=5))
    try:
        assert isinstance(quorum.acquire(key, "f1", 10_000, _holder("id-q1")), Grant)
        first = quorum.fence(key, fence, "f1")
        assert first is not None and first > 1, first
        assert quorum.release(key, "f1")
        assert isinstance(quorum.acquire(key, "f2", 10_000, _holder("id-q2")), Grant)
        second = quorum.fence(key, fence, "f2")
        assert second is not None and second > first, (first, second)
        assert quorum.release(key, "f2")
    finally:
        quorum.close()


def exercise_everything(server: AclServer) -> None:
    """Every operation on a server with no data and no cached script (the first use after a restart)."""
    admin = server.admin()
    try:
        admin.flushall()
        admin.script_flush()
    finally:
        admin.close()
    layout = KeyLayout(PREFIX)
    store = open_store(server.user_url(1), EAGER_HEALTH_CHECKS)  # a database other than 0: SELECT
    try:
        exercise_store(store, layout)
    finally:
        store.close()
    exercise_quorum(server, layout)


def test_the_documented_line_names_single_commands_under_one_prefix(documented):
    assert documented.user == "singleton_lock"
    assert "evalsha" in documented.commands and "script|load" in documented.commands
    assert documented.setuser_args("p", "pw")[:6] == ["singleton_lock", "reset", "on", ">pw", "~p:*", "&p:*"]


def test_the_doc_names_every_key_the_library_writes():
    layout = KeyLayout("<prefix>")
    with open(DOC_PATH) as handle:
        doc = handle.read()
    for key in ("<prefix>:{<task>:<b>}:<digest>", "<prefix>:{<task>:<b>}:<digest>:queued",
                "<prefix>:{<task>:<b>}:fence", "<prefix>:{<task>:<b>}:done"):
        assert f"`{key}`" in doc


def test_every_lock_operation_runs_under_the_documented_user(acl_server, documented):
    acl_server.apply(documented.setuser_args(PREFIX, acl_server.password, plus=documented.additions[OTHER_DB]))

    exercise_everything(acl_server)

    assert acl_server.denials() == []


def test_no_documented_command_is_spare(acl_server, documented):
    """Without any one of them, Redis refuses some lock operation (the line is minimal)."""
    spare = []
    for command in documented.commands + documented.additions[OTHER_DB]:
        acl_server.apply(documented.setuser_args(PREFIX, acl_server.password, without=[command],
                                                 plus=[c for c in documented.additions[OTHER_DB] if c != command]))
        try:
            exercise_everything(acl_server)
        except Exception:
            pass  # refused somewhere: the ACL log says where
        if not any(f" {command} " in denial for denial in acl_server.denials()):
            spare.append(command)
    assert spare == [], f"documented in docs/security.md but never needed: {spare}"


def test_the_base_line_alone_serves_a_lock_store_in_database_0(acl_server, documented):
    acl_server.apply(documented.setuser_args(PREFIX, acl_server.password))
    store = open_store(acl_server.user_url(0), EAGER_HEALTH_CHECKS)
    try:
        exercise_store(store, KeyLayout(PREFIX))
    finally:
        store.close()

    assert acl_server.denials() == []


def test_without_select_the_user_cannot_list_another_databases_keys_but_info_counts_them(acl_server, documented):
    """What the doc says a database of its own does not contain: only a Redis of its own does."""
    acl_server.apply(documented.setuser_args(PREFIX, acl_server.password))
    admin = acl_server.admin(1)
    admin.set("broker-queue", "x")
    admin.close()
    client = redis.Redis.from_url(acl_server.user_url(0), decode_responses=True)
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.execute_command("SELECT", 1)
        assert client.info("keyspace")["db1"]["keys"] == 1  # +info, which the scripts need, shows every db's size
        admin = acl_server.admin(0)
        admin.set("same-database-key", "x")
        admin.close()
        assert "same-database-key" in set(client.scan_iter())  # SCAN lists every key name of its database
    finally:
        client.close()


def test_the_user_cannot_touch_keys_outside_its_prefix(acl_server, documented):
    acl_server.apply(documented.setuser_args(PREFIX, acl_server.password))
    client = redis.Redis.from_url(acl_server.user_url(0))
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.delete("celery")  # a broker queue's name
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.eval("return redis.call('del', KEYS[1])", 1, "celery")  # not through a script either
        sha = client.script_load("return redis.call('del', KEYS[1])")
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.evalsha(sha, 1, "celery")
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.publish("celery-events", "forged")  # a channel outside the prefix
        for command in (("FLUSHDB",), ("CONFIG", "GET", "*"), ("KEYS", "*"), ("ACL", "LIST"),
                        ("MONITOR",), ("SHUTDOWN",)):
            with pytest.raises(redis.exceptions.NoPermissionError):
                client.execute_command(*command)
    finally:
        client.close()


def test_what_the_user_can_do_to_locks_it_does_not_hold(acl_server, documented):
    """The threat model's list, shown: the lock credential is the locks; guard it like the broker's."""
    acl_server.apply(documented.setuser_args(PREFIX, acl_server.password))
    layout = KeyLayout(PREFIX)
    store = open_store(acl_server.user_url(0))
    client = redis.Redis.from_url(acl_server.user_url(0), decode_responses=True)
    try:
        key, fence = layout.lock(TASK, "a" * 32), layout.fence(TASK, "a" * 32)
        assert isinstance(store.acquire(key, "holder", 60_000, _holder("id-holder")), Grant)
        first = store.fence(key, fence, "holder")
        # read who holds it, token included, and delete it: a duplicate may now run beside the holder
        assert "holder" in client.get(key)
        assert client.delete(key) == 1
        # forge a holder of a key, with no expiry: its calls are duplicates until someone clears it
        client.set(key, "forged")
        assert client.pttl(key) == -1 and isinstance(store.acquire(key, "t", 60_000, _holder("id-2")), Conflict)
        client.delete(key)
        # move the fencing counter up: every later fence is above it (writes fenced before are refused)
        client.set(fence, first + 10 ** 9)
        assert isinstance(store.acquire(key, "next", 60_000, _holder("id-next")), Grant)
        assert store.fence(key, fence, "next") > first + 10 ** 9
        assert store.release(key, "next")
        # past what a script's numbers count exactly, a fence would repeat: the store refuses to hand
        # one out, naming the counter, rather than repeat one
        client.set(fence, 2 ** 60)
        assert isinstance(store.acquire(key, "after", 60_000, _holder("id-after")), Grant)
        with pytest.raises(redis.ResponseError, match="fencing counter .* past 2\\^53"):
            store.fence(key, fence, "after")
        assert store.release(key, "after")
        client.delete(fence)
        # load and run any script of its own (one that loops would stall the server for every client)
        sha = client.script_load("redis.call('set', KEYS[1], ARGV[1]) return redis.call('get', KEYS[1])")
        assert client.evalsha(sha, 1, key + ":own", "mine") == "mine"
    finally:
        client.close()
        store.close()
    assert acl_server.denials() == []


def _ask_redirection(cluster: LocalCluster, store: Any, layout: KeyLayout) -> None:
    """A release while its slot migrates and the key is not on the source any more: ASK, then ASKING."""
    key = layout.lock("acl.ask", "e" * 32)
    slot = key_slot(key.encode())
    source = cluster.owner(slot)
    target = next(server for server in cluster.masters if server is not source)
    src, dst = cluster.node(source), cluster.node(target)
    dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", cluster.node_id(source))
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", cluster.node_id(target))
    try:
        assert store.release(key, "nobody's") is False
    finally:
        for node in (src, dst):
            node.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")


def test_a_cluster_needs_the_documented_addition_and_all_of_it(redis_7, documented):
    addition = documented.additions["Redis Cluster"]
    layout = KeyLayout(PREFIX)
    cluster = LocalCluster(masters=3).start()
    try:
        def denials_without(command: Optional[str]) -> List[str]:
            for server in cluster.masters:
                node = cluster.node(server)
                node.flushall()
                node.script_flush()
                node.execute_command("ACL", "SETUSER", *documented.setuser_args(
                    PREFIX, "pw", plus=[c for c in addition if c != command]))
                node.execute_command("ACL", "LOG", "RESET")
            url = f"redis+cluster://{documented.user}:pw@" + ",".join(f"127.0.0.1:{s.port}" for s in cluster.masters)
            try:
                store = open_store(url)
                try:
                    exercise_store(store, layout)
                    _ask_redirection(cluster, store, layout)
                finally:
                    store.close()
            except Exception:
                if command is None:
                    raise
            return [d for server in cluster.masters for d in acl_denials(cluster.node(server), documented.user)]

        assert denials_without(None) == []
        for command in addition:
            assert any(f" {command} " in d for d in denials_without(command)), f"{command} is never needed"
    finally:
        cluster.stop()


def test_sentinel_with_replica_ack_needs_the_documented_lines_on_every_server(redis_7, documented):
    """The lock user on the master and the replica (the next master), the sentinel's own user."""
    layout = KeyLayout(PREFIX)
    group = SentinelGroup().start()
    try:
        assert group.replica is not None
        for server in (group.master, group.replica):
            node = redis.Redis(port=server.port)
            node.execute_command("ACL", "SETUSER", *documented.setuser_args(
                PREFIX, "pw", plus=documented.additions["replica_ack"]))
            node.execute_command("ACL", "LOG", "RESET")
            node.close()
        sentinel_user, _ = documented.others["Sentinel"]
        watcher = redis.Redis(port=group.sentinel_port)
        watcher.execute_command("ACL", "SETUSER", *documented.other_args("Sentinel", "spw"))
        watcher.execute_command("ACL", "LOG", "RESET")
        watcher.close()
        store = open_store(f"sentinel://{documented.user}:pw@127.0.0.1:{group.sentinel_port}/0",
                           {"master_name": group.master_name, "replica_ack": 1, "replica_ack_timeout": 2,
                            "sentinel_kwargs": {"username": sentinel_user, "password": "spw"}})
        try:
            exercise_store(store, layout)
            group.failover()
            key = layout.lock(TASK, "f" * 32)
            wait_for(lambda: _acquired_after_failover(store, layout, key), 20, interval=0.1,
                     what="a lock taken on the new master")
            assert store.release(key, "after-failover")
        finally:
            store.close()
        denials = [_denials_on(server.port, documented.user) for server in (group.master, group.replica)]
        denials.append(_denials_on(group.sentinel_port, sentinel_user))
        assert denials == [[], [], []]
    finally:
        group.stop()


def _denials_on(port: int, user: str) -> List[str]:
    client = redis.Redis(port=port)
    try:
        return acl_denials(client, user)
    finally:
        client.close()


def _acquired_after_failover(store: Any, layout: KeyLayout, key: str) -> bool:
    try:
        return isinstance(store.acquire(key, "after-failover", 10_000, _holder("id-f")), Grant)
    except (redis.ConnectionError, redis.ReadOnlyError, redis.TimeoutError):
        return False  # the failover is still under way


def _cli(env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """``celery locks`` as an operator runs it, with the lock store of ``env``."""
    full = dict(os.environ, **env, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "celery", "-A", "tests.integration.proj", "locks", *args],
                          capture_output=True, text=True, cwd=ROOT, env=full, timeout=60)


def _started(events: redis.Redis, key: str) -> dict:
    return wait_for(lambda: next((e for e in records(events, "started") if e["key"] == key), None), 20,
                    what=f"the task holding {key!r} to start")


def test_workers_publishers_and_the_cli_run_under_the_documented_user(acl_server, documented, proj, start_worker,
                                                                      events_redis):
    """(The server is set up first so that it outlives the workers: their shutdown releases too.)"""
    acl_server.apply(documented.setuser_args(PREFIX, acl_server.password))
    url = acl_server.user_url(0)
    env = worker_env(url)
    store = acl_server.admin(0)
    with app_on(proj, url):
        worker = start_worker(concurrency=3, env=env)

        run_storm(proj, events_redis, store, refused=acl_server.denials)

        # queued_or_running: the publisher takes the lock, a duplicate publishes nothing, the worker adopts it
        first = proj.qor_job.delay("qor", duration=1.0)
        assert proj.qor_job.delay("qor").id == first.id
        assert first.get(timeout=30)["key"] == "qor"
        wait_unlocked(store, 5)

        # celery locks: list, show, refuse a live lock, clear it by force; its holder notices
        held = proj.quick_ttl.delay("held", duration=30)
        _started(events_redis, "held")
        listed = _cli(env, "list", "--json")
        assert listed.returncode == 0, listed.stderr
        [lock] = json.loads(listed.stdout)
        assert lock["task_id"] == held.id and lock["state"] == "running"
        shown = _cli(env, "show", lock["digest"])
        assert shown.returncode == 0 and held.id in shown.stdout, shown.stderr
        refused = _cli(env, "clear", lock["digest"][:12])
        assert refused.returncode == 1 and "refused" in refused.stderr
        forced = _cli(env, "clear", lock["key"], "--force")
        assert forced.returncode == 0 and "cleared" in forced.stdout, forced.stderr
        wait_for(lambda: "singleton lock LOST" in worker.log(), 10, what="the holder to report its lost lock")
        assert lock_keys(store) == []

        # a child killed under its lock: the worker's main process releases it
        killed = proj.long_running.delay("killed", duration=30)
        _started(events_redis, "killed")
        assert len(lock_keys(store)) == 1
        killed.revoke(terminate=True, signal="SIGKILL")
        wait_unlocked(store, 5)
        # (the main process logs the release once it is done, so the line may follow the key's end)
        wait_for(lambda: "from the worker's main process" in worker.log(), 10,
                 what="the main process to report its release")
        held.revoke(terminate=True, signal="SIGKILL")
        worker.stop()

    store.close()
    assert acl_server.denials() == []


def exercise_places(store: Any, layout: KeyLayout) -> None:
    """Every place operation: take, refuse, fence, renew, read, mark, hand back, adopt, ask, release."""
    from celery_singleton_lock.store import Limit, limited

    limit = Limit(2, 1_000)
    keys = limited(layout.keys("acl.places", uuid.uuid4().hex, "queued"), limit)  # fresh: no window left over
    for n in range(2):
        assert isinstance(store.acquire(keys.lock, f"p{n}", 10_000, _holder(f"id-p{n}"), limit=limit), Grant)
    assert isinstance(store.acquire(keys.lock, "p2", 10_000, _holder("id-p2"), limit=limit), Conflict)
    assert store.fence(keys.lock, keys.fence, "p0") is not None
    assert store.renew([(keys.lock, "p0", 10_000)]) == [True]
    assert store.holder(keys.lock) is not None
    assert store.mark_redelivered(keys.lock, "id-p0")
    assert store.await_release(keys.lock)
    assert store.requeue(keys.lock, "p1", 10_000)
    assert isinstance(store.adopt(keys.lock, keys.lock, "p1", "p3", 10_000, _holder("id-p1"), limit=limit), Grant)
    assert store.release(keys.lock, "p0", Completion(keys.done, "id-p0", 10_000, True))
    assert isinstance(store.acquire(keys.queued, "q", 10_000, _holder("id-q"), state="queued", limit=limit), Grant)
    assert store.release_many([(keys.lock, "p3"), (keys.queued, "q", "queued")]) == [True, True]
    assert list(scan_locks(store.client, layout))


def test_places_run_under_the_documented_user_with_their_addition_and_need_all_of_it(acl_server, documented):
    addition = documented.additions["Limits and windows"]
    layout = KeyLayout(PREFIX)

    def run(plus) -> None:
        acl_server.apply(documented.setuser_args(PREFIX, acl_server.password, plus=plus))
        store = open_store(acl_server.user_url(0), EAGER_HEALTH_CHECKS)
        try:
            exercise_places(store, layout)
        finally:
            store.close()

    # Given the base line and the addition, every place operation runs, and nothing is refused
    run(addition)
    assert acl_server.denials() == []
    # and without any one command of the addition, Redis refuses some place operation
    for command in addition:
        with pytest.raises(redis.exceptions.ResponseError):
            run([c for c in addition if c != command])
        assert any(f" {command} " in denial for denial in acl_server.denials()), command
