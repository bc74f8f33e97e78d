"""Fixtures of the integration tests: a real Redis (the suite's own, or one named explicitly), real workers."""

from __future__ import annotations

import importlib
import os
import uuid
from typing import Dict, Iterator, List

import pytest
import redis

from tests.integration.helpers import drop_runtime
from tests.support.servers import RedisServer
from tests.support.suite_redis import SuiteRedis, fix_run_prefixes, suite_redis
from tests.support.threads import no_thread_leaks  # noqa: F401 - an autouse fixture
from tests.support.workers import Beat, Worker

fix_run_prefixes()  # before any test module reads them


@pytest.fixture(scope="session")
def suite_servers() -> Iterator[SuiteRedis]:
    """The session's Redis: its own server, or the one CSL_TEST_REDIS_URL names (see tests/support/suite_redis.py).

    With CSL_REDIS_SERVER set (a cell of the support matrix), its own server is of that kind.
    """
    with suite_redis() as servers:
        yield servers


@pytest.fixture(scope="session")
def redis_base(suite_servers: SuiteRedis) -> str:
    """``redis://host:port`` of the server that holds the broker and the lock store."""
    return suite_servers.base


@pytest.fixture(scope="session")
def test_env(suite_servers: SuiteRedis) -> Dict[str, str]:
    env = suite_servers.env()
    os.environ.update(env)
    return env


@pytest.fixture
def proj(test_env: Dict[str, str], suite_servers: SuiteRedis) -> Iterator[object]:
    """The test app module, with the run's keys gone and no lock machinery left from an earlier test."""
    module = importlib.import_module("tests.integration.proj")
    drop_runtime(module.app)
    suite_servers.clean()
    yield module
    drop_runtime(module.app)


@pytest.fixture
def lock_redis(test_env: Dict[str, str]) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(test_env["CSL_LOCK_URL"], decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def events_redis(test_env: Dict[str, str]) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(test_env["CSL_EVENTS_URL"], decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def broker_redis(test_env: Dict[str, str]) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(test_env["CSL_BROKER_URL"], decode_responses=True)
    yield client
    client.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed test's workers and beats tell why in their logs: their ends join the failure's report
    (in CI, the only thing kept)."""
    outcome = yield
    report = outcome.get_result()
    processes: List[Worker] = getattr(item, "csl_processes", [])
    if report.when != "call" or not report.failed:
        return
    for process in processes:
        lines = process.log().splitlines()[-_LOG_LINES:]
        report.sections.append((f"the last {len(lines)} lines of {process.name}'s log ({process.log_path})",
                                "\n".join(lines)))


_LOG_LINES = 150


@pytest.fixture
def start_worker(test_env: Dict[str, str], request: pytest.FixtureRequest) -> Iterator[object]:
    """Start real ``celery worker`` processes on the test app; all are stopped at teardown (a failed
    test's report carries the ends of their logs)."""
    started: List[Worker] = []
    request.node.csl_processes = started

    def start(pool: str = "prefork", concurrency: int = 2, env: Dict[str, str] = None, extra_args=(),
              app: str = "tests.integration.proj") -> Worker:
        worker = Worker(app, dict(test_env, **(env or {})), name=f"w{len(started)}-{uuid.uuid4().hex[:6]}",
                        pool=pool, concurrency=concurrency, extra_args=extra_args)
        started.append(worker)
        return worker.start()

    def beat(env: Dict[str, str] = None, app: str = "tests.integration.proj") -> Beat:
        process = Beat(app, dict(test_env, **(env or {})), name=f"beat{len(started)}")
        started.append(process)
        return process.start()

    start.beat = beat
    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A private redis-server this test may stop, pause or restart."""
    with RedisServer() as server:
        yield server
