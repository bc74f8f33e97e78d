"""Where the test suite's Redis data lives, and how it is removed without touching anyone else's.

By default the suite starts its own redis-server on a free port for the session and may empty
its databases between tests: nobody else writes there. A Redis of the user's is used only when
named in CSL_TEST_REDIS_URL (``redis://host:port``, never read from REDIS_URL, which a developer's
shell often sets for their own apps). Then the broker and the lock store live in its databases
CSL_TEST_DBS (broker, locks), every key the run writes there starts with a prefix unique to the
run (the lock prefix, kombu's ``global_keyprefix`` for broker and results), and only keys under
that prefix are ever deleted, found by SCAN MATCH. The task bodies' own records stay on a private
server in both cases.

The run's prefixes are fixed in the environment once, when the integration tests' conftest is
imported (:func:`fix_run_prefixes`), before any test module is collected; the test app, its
worker processes and the tests read them from there (:func:`lock_prefix`, :func:`broker_prefix`).
"""

from __future__ import annotations

import os
import re
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Dict, Iterator, Tuple
from urllib.parse import urlsplit, urlunsplit

import redis

from tests.support.servers import RedisServer

__all__ = ["NAMED_URL_VARIABLE", "SuiteRedis", "suite_redis", "fix_run_prefixes", "lock_prefix", "broker_prefix",
           "broker_key", "delete_matching"]

#: The variable that names a Redis for the suite to use instead of starting its own.
NAMED_URL_VARIABLE = "CSL_TEST_REDIS_URL"
#: The lock prefix of a run on the suite's own server.
DEFAULT_PREFIX = "csltest"


def _dbs() -> Tuple[int, int, int]:
    broker, lock, events = (int(n) for n in os.environ.get("CSL_TEST_DBS", "15,14,13").split(","))
    return broker, lock, events


def _named() -> str:
    return os.environ.get(NAMED_URL_VARIABLE, "")


def fix_run_prefixes() -> None:
    """Choose the run's prefixes: unique to the run on a named Redis, the plain ones on the suite's own."""
    prefix = f"{DEFAULT_PREFIX}-{uuid.uuid4().hex[:8]}" if _named() else DEFAULT_PREFIX
    os.environ["CSL_TEST_PREFIX"] = prefix
    os.environ["CSL_BROKER_PREFIX"] = f"{prefix}:broker:" if _named() else ""


def lock_prefix() -> str:
    """``singleton_lock_prefix`` of the test app (the run's prefix on a named Redis)."""
    return os.environ.get("CSL_TEST_PREFIX") or DEFAULT_PREFIX


def broker_prefix() -> str:
    """kombu's ``global_keyprefix`` of the test app's broker and results ("" on the suite's own server)."""
    return os.environ.get("CSL_BROKER_PREFIX", "")


def broker_key(name: str) -> str:
    """The key in the broker database of the transport's ``name`` (a queue, ``unacked``)."""
    return broker_prefix() + name


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def delete_matching(url: str, prefix: str) -> int:
    """Delete every key under ``prefix`` at ``url`` (SCAN MATCH, never FLUSHDB); how many there were."""
    client = redis.Redis.from_url(url)
    try:
        deleted = 0
        batch = []
        for key in client.scan_iter(match=_glob_escape(prefix) + "*", count=500):
            batch.append(key)
            if len(batch) >= 500:
                deleted += client.unlink(*batch)
                batch = []
        if batch:
            deleted += client.unlink(*batch)
        return deleted
    finally:
        client.close()


def _base(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or not parts.hostname or parts.path.strip("/"):
        raise ValueError(f"{NAMED_URL_VARIABLE}={url!r}: expected redis://host:port (the databases are "
                         "CSL_TEST_DBS, default 15,14,13)")
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


@dataclass(frozen=True)
class SuiteRedis:
    """The servers of one test session and the prefixes its keys live under."""

    base: str  #: ``redis://host:port`` of the broker and the lock store
    events_base: str  #: the private server the task bodies record to
    owned: bool  #: whether the suite started ``base`` itself (and so may empty its databases)
    prefix: str  #: the lock prefix; on a named Redis the broker's and results' keys start with it too

    def env(self) -> Dict[str, str]:
        broker, lock, events = _dbs()
        return {
            "CSL_BROKER_URL": f"{self.base}/{broker}",
            "CSL_LOCK_URL": f"{self.base}/{lock}",
            "CSL_EVENTS_URL": f"{self.events_base}/{events}",
            "CSL_TEST_PREFIX": self.prefix,
            "CSL_BROKER_PREFIX": broker_prefix(),
        }

    def clean(self) -> None:
        """Remove what earlier tests left: everything on the suite's own servers, the run's keys elsewhere."""
        env = self.env()
        if self.owned:
            for url in (env["CSL_BROKER_URL"], env["CSL_LOCK_URL"]):
                _flushdb(url)
        else:
            for url in (env["CSL_BROKER_URL"], env["CSL_LOCK_URL"]):
                delete_matching(url, f"{self.prefix}:")
        _flushdb(env["CSL_EVENTS_URL"])  # always the suite's own server


def _flushdb(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


@contextmanager
def suite_redis() -> Iterator[SuiteRedis]:
    """The session's servers: its own, or the one CSL_TEST_REDIS_URL names beside a private one.

    On a named Redis the run's keys are removed at the end as well.
    """
    named = _named()
    with ExitStack() as stack:
        own = stack.enter_context(RedisServer()).url  # see redis_server_binary()
        if not named:
            yield SuiteRedis(base=own, events_base=own, owned=True, prefix=lock_prefix())
            return
        suite = SuiteRedis(base=_base(named), events_base=own, owned=False, prefix=lock_prefix())
        stack.callback(suite.clean)
        yield suite
