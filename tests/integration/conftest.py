"""Fixtures of the integration tests: a real Redis (the one at REDIS_URL, or an embedded one), real workers."""

from __future__ import annotations

import importlib
import os
import uuid
from typing import Dict, Iterator, List
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from tests.integration.helpers import drop_runtime
from tests.support.servers import RedisServer, reachable
from tests.support.threads import no_thread_leaks  # noqa: F401 - an autouse fixture
from tests.support.workers import Beat, Worker


REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
#: Databases of the shared server that the tests own (flushed one by one, never FLUSHALL).
BROKER_DB, LOCK_DB, EVENTS_DB = (int(n) for n in os.environ.get("CSL_TEST_DBS", "15,14,13").split(","))


def _base(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


@pytest.fixture(scope="session")
def redis_base() -> Iterator[str]:
    """``redis://host:port`` of a real server: REDIS_URL when it answers, else an embedded one.

    With CSL_REDIS_SERVER set (a cell of the support matrix), always a server of that kind.
    """
    if not os.environ.get("CSL_REDIS_SERVER") and reachable(REDIS_URL):
        yield _base(REDIS_URL)
        return
    with RedisServer() as server:  # see redis_server_binary()
        yield server.url


@pytest.fixture(scope="session")
def test_env(redis_base: str) -> Dict[str, str]:
    env = {
        "CSL_BROKER_URL": f"{redis_base}/{BROKER_DB}",
        "CSL_LOCK_URL": f"{redis_base}/{LOCK_DB}",
        "CSL_EVENTS_URL": f"{redis_base}/{EVENTS_DB}",
    }
    os.environ.update(env)
    return env


def _flush(redis_base: str) -> None:
    for db in (BROKER_DB, LOCK_DB, EVENTS_DB):
        client = redis.Redis.from_url(f"{redis_base}/{db}")
        client.flushdb()
        client.close()


@pytest.fixture
def proj(test_env: Dict[str, str], redis_base: str) -> Iterator[object]:
    """The test app module, with its databases empty and no lock machinery left from an earlier test."""
    module = importlib.import_module("tests.integration.proj")
    drop_runtime(module.app)
    _flush(redis_base)
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


@pytest.fixture
def start_worker(test_env: Dict[str, str]) -> Iterator[object]:
    """Start real ``celery worker`` processes on the test app; all are stopped at teardown."""
    started: List[Worker] = []

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
