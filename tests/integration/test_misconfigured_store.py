"""A lock store that is set up wrong is no outage: real workers, real redis-servers set up wrong.

Given a wrong password, an ACL user without a command the library runs (directly
or inside a script), a read-only replica, or a database the server does not have,
when a worker starts, then it refuses to start with one line that names the URL
(without its password), what is wrong and what to do, and exits non-zero. Given
a lock store that is merely down, the worker starts and warns. Given a store that
becomes misconfigured while the worker runs, tasks fail with ConfigurationError,
whatever on_lock_error says, and no body runs unguarded; ``apply_async`` of a
``queued*`` task raises it too, and publishes nothing.
"""

from __future__ import annotations

import uuid
from typing import Dict, Iterator, Tuple

import pytest
import redis
from celery import Celery

from celery_singleton_lock import ConfigurationError, LockedTask
from celery_singleton_lock.runtime import peek_runtime
from tests.integration.helpers import records
from tests.support.servers import RedisServer, free_port
from tests.support.suite_redis import lock_prefix
from tests.support.workers import Worker

PASSWORD = "s3cret-pw"
EXIT_CONFIG = 78


def refused_start(test_env: Dict[str, str], lock_url: str, module: str = "tests.integration.proj") -> Tuple[int, str]:
    """Start a real worker of ``module`` whose lock URL is ``lock_url``; it must exit. (status, log)."""
    worker = Worker(module, dict(test_env, CSL_LOCK_URL=lock_url),
                    name=f"refused-{uuid.uuid4().hex[:6]}", concurrency=1)
    try:
        with pytest.raises(RuntimeError, match="exited with"):
            worker.start(timeout=60)
        assert worker.process is not None
        return worker.process.returncode, worker.log()
    finally:
        worker.stop()


def the_one_line(log: str) -> str:
    """The log's only error line (anything else at ERROR or above, a traceback included, fails the test)."""
    assert "Traceback" not in log, log
    assert " ready." not in log, log
    lines = [line for line in log.splitlines() if "CRITICAL" in line or "ERROR" in line]
    assert len(lines) == 1, log
    assert "singleton lock: the worker refuses to start" in lines[0]
    return lines[0]


@pytest.fixture
def acl_server() -> Iterator[RedisServer]:
    """A redis-server whose default user is off; ``admin`` may do anything."""
    server = RedisServer(extra_args=["--user", "admin", "on", f">{PASSWORD}", "~*", "&*", "+@all",
                                     "--user", "default", "off"])
    server.start(probe_url=f"redis://admin:{PASSWORD}@127.0.0.1:{server.port}/0")
    yield server
    server.stop()


def admin(server: RedisServer) -> redis.Redis:
    return redis.Redis(port=server.port, username="admin", password=PASSWORD, decode_responses=True)


def test_a_wrong_password_stops_the_worker_at_start(test_env):
    server = RedisServer(extra_args=["--requirepass", PASSWORD])
    server.start(probe_url=f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0")
    try:
        status, log = refused_start(test_env, f"redis://:not-the-password@127.0.0.1:{server.port}/0")
    finally:
        server.stop()

    line = the_one_line(log)
    assert status == EXIT_CONFIG
    assert f"redis://:***@127.0.0.1:{server.port}/0" in line and "not-the-password" not in log
    assert "authentication failed" in line and "invalid username-password pair" in line
    assert "set the right user and password" in line


@pytest.mark.parametrize("denied, words", [
    ("-evalsha", "no permissions to run the 'evalsha' command"),
    ("-set", "at the acquire step"),               # the first command a grant sends
    ("-time", "in the fence script"),              # Redis checks a script's inner commands as it runs them
    ("-zadd", "in the release script"),             # sent as EVAL, its reply read later
    ("-subscribe", "at the subscribe step"),
])
def test_an_acl_user_without_a_command_the_library_runs_stops_the_worker(test_env, acl_server, denied, words):
    admin(acl_server).acl_setuser("locks", enabled=True, passwords=["+pw"], keys=[f"{lock_prefix()}:*"],
                                  channels=[f"{lock_prefix()}:*"], commands=["+@all", denied])

    status, log = refused_start(test_env, f"redis://locks:pw@127.0.0.1:{acl_server.port}/0")

    line = the_one_line(log)
    assert status == EXIT_CONFIG
    assert f"redis://locks:***@127.0.0.1:{acl_server.port}/0" in line
    assert "lacks a permission" in line and words in line and "docs/security.md" in line


def test_the_hash_commands_are_asked_for_only_by_an_app_whose_newest_call_wins(test_env, acl_server):
    # a user set up for the command line before on_locked="replace" and lock_debounce
    admin(acl_server).acl_setuser("locks", enabled=True, passwords=["+pw"], keys=[f"{lock_prefix()}:*"],
                                  channels=[f"{lock_prefix()}:*"], commands=["+@all", "-hmget", "-hset", "-hdel"])
    lock_url = f"redis://locks:pw@127.0.0.1:{acl_server.port}/0"

    worker = Worker("tests.integration.proj", dict(test_env, CSL_LOCK_URL=lock_url),
                    name=f"older-{uuid.uuid4().hex[:6]}", concurrency=1)
    try:
        worker.start(timeout=60)  # no task of this app needs the hash: the worker starts
        assert "refuses to start" not in worker.log()
    finally:
        worker.stop()
    status, log = refused_start(test_env, lock_url, "tests.integration.proj_latest")

    line = the_one_line(log)
    assert status == EXIT_CONFIG
    assert "lacks a permission" in line and "in the gen_reserve script" in line and "hmget" in line
    # and an app whose tasks have a limit or a window asks for them too, for its places
    status, log = refused_start(test_env, lock_url, "tests.integration.proj_limits")
    line = the_one_line(log)
    assert status == EXIT_CONFIG
    assert "lacks a permission" in line and "in the place_acquire script" in line, line


def test_a_read_only_replica_stops_the_worker_at_start(test_env):
    with RedisServer() as primary:
        replica = RedisServer(extra_args=["--replicaof", "127.0.0.1", str(primary.port)])
        replica.start()
        try:
            status, log = refused_start(test_env, f"{replica.url}/0")
        finally:
            replica.stop()

    line = the_one_line(log)
    assert status == EXIT_CONFIG
    assert "read-only replica" in line and "point singleton_lock_url at the master" in line
    assert f"{replica.url}/0" in line


def test_a_database_the_server_does_not_have_stops_the_worker_at_start(test_env, redis_base):
    status, log = refused_start(test_env, f"{redis_base}/99")

    line = the_one_line(log)
    assert status == EXIT_CONFIG
    assert "database index does not exist" in line and "DB index is out of range" in line


def test_a_lock_store_that_is_down_at_start_is_an_outage_the_worker_starts_and_warns(proj, start_worker):
    port = free_port()
    worker = start_worker(concurrency=1, env={"CSL_LOCK_URL": f"redis://127.0.0.1:{port}/0"})

    warning = [line for line in worker.log().splitlines() if "singleton lock" in line]
    assert len(warning) == 1 and "WARNING" in warning[0], worker.log()
    assert f"redis://127.0.0.1:{port}/0" in warning[0] and "Connection refused" in warning[0]
    assert "starting anyway" in warning[0] and "on_lock_error" in warning[0]
    with RedisServer(port=port):  # once it is up, locked tasks run
        assert proj.error_raise.delay("k").get(timeout=30)["key"] == "k"


@pytest.fixture
def locks_user(acl_server: RedisServer) -> Iterator[Tuple[RedisServer, str]]:
    admin(acl_server).acl_setuser("locks", enabled=True, passwords=["+pw"], keys=[f"{lock_prefix()}:*"],
                                  channels=[f"{lock_prefix()}:*"], commands=["+@all"])
    yield acl_server, f"redis://locks:pw@127.0.0.1:{acl_server.port}/0"


def test_a_permission_lost_while_the_worker_runs_fails_tasks_never_runs_them_unguarded(
        proj, start_worker, events_redis, locks_user):
    server, url = locks_user
    worker = start_worker(concurrency=2, env={"CSL_LOCK_URL": url})
    assert proj.error_run.delay("warm-up").get(timeout=20)["key"] == "warm-up"
    admin(server).acl_setuser("locks", enabled=True, commands=["-set"])  # applies to connections already open

    outcomes = [proj.error_run.delay("run"), proj.error_retry.delay("retry"), proj.error_raise.delay("raise")]

    for result in outcomes:
        with pytest.raises(ConfigurationError, match="lacks a permission at the acquire step"):
            result.get(timeout=30)
    assert [e["key"] for e in records(events_redis, "started")] == ["warm-up"]  # on_lock_error="run" too
    log = worker.log()
    assert " busy" not in log and "Retry in" not in log  # not a held lock, and not retried
    assert "no permissions to run the 'set' command" in log and "refused lock" in log


def test_a_lock_store_turned_read_only_replica_fails_tasks_with_configuration_error(
        proj, start_worker, events_redis):
    with RedisServer() as primary, RedisServer() as store:
        start_worker(concurrency=1, env={"CSL_LOCK_URL": f"{store.url}/0"})
        assert proj.error_run.delay("warm-up").get(timeout=20)["key"] == "warm-up"
        redis.Redis(port=store.port).replicaof("127.0.0.1", primary.port)

        with pytest.raises(ConfigurationError, match="read-only replica"):
            proj.error_run.delay("run").get(timeout=30)
    assert [e["key"] for e in records(events_redis, "started")] == ["warm-up"]


@pytest.mark.parametrize("on_lock_error", ["retry", "run", "raise"])
def test_apply_async_of_a_queued_task_refuses_a_misconfigured_store_and_publishes_nothing(
        test_env, locks_user, on_lock_error):
    server, url = locks_user
    admin(server).acl_setuser("locks", enabled=True, commands=["-set"])
    app = Celery("publisher", broker=test_env["CSL_BROKER_URL"], set_as_current=False)
    app.conf.singleton_lock_url = url
    queue = f"csl-misconfigured-{uuid.uuid4().hex[:8]}"

    @app.task(base=LockedTask, shared=False, lock_scope="queued_or_running", on_lock_error=on_lock_error)
    def job(key):
        pass

    broker = redis.Redis.from_url(test_env["CSL_BROKER_URL"])
    try:
        with pytest.raises(ConfigurationError, match="lacks a permission at the acquire step.*nothing was "
                                                     "published"):
            job.apply_async(("k",), queue=queue)
        assert broker.llen(queue) == 0
    finally:
        runtime = peek_runtime(app)
        if runtime is not None:
            runtime.close()
        broker.close()


def test_a_quorum_master_set_up_wrong_stops_the_worker_even_when_a_majority_works(test_env, acl_server):
    admin(acl_server).acl_setuser("locks", enabled=True, passwords=["+pw"], keys=[f"{lock_prefix()}:*"],
                                  channels=[f"{lock_prefix()}:*"], commands=["+@all", "-set"])
    with RedisServer() as one, RedisServer() as two:
        urls = [f"{one.url}/0", f"{two.url}/0", f"redis://locks:pw@127.0.0.1:{acl_server.port}/0"]
        worker = Worker("tests.integration.proj_topo", dict(test_env, CSL_LOCK_URLS=",".join(urls)),
                        name=f"quorum-{uuid.uuid4().hex[:6]}", concurrency=1)
        try:
            with pytest.raises(RuntimeError, match="exited with"):
                worker.start(timeout=60)
            status, log = worker.process.returncode, worker.log()
        finally:
            worker.stop()

    line = the_one_line(log)
    assert status == EXIT_CONFIG
    assert f"redis://locks:***@127.0.0.1:{acl_server.port}/0" in line and "lacks a permission" in line
    assert one.url not in line and two.url not in line
