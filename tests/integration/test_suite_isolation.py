"""The test suite deletes nothing it did not create.

Given a Redis holding someone's keys, when a part of the integration suite runs in a fresh pytest
process, then: by default it never even connects to the Redis at REDIS_URL (it starts its own
server); with that Redis named in CSL_TEST_REDIS_URL it runs there, and afterwards every key that
was there before is there still and no key of the run is left.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, List

import redis

from tests.support.servers import RedisServer
from tests.support.suite_redis import NAMED_URL_VARIABLE

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Databases the suite uses (broker, locks, records) and one it never names.
SENTINEL_DBS = (0, 13, 14, 15)
#: A run lock, an enqueue lock and a queue, a revoke: the kinds of keys the library and kombu write.
SUBSET = [
    "tests/integration/test_run_lock.py::test_duplicate_storm_never_overlaps",
    "tests/integration/test_enqueue_lock.py::test_five_calls_publish_one_message_until_it_has_run",
    "tests/integration/test_enqueue_lock.py::test_revoking_a_waiting_message_frees_its_lock",
]


def run_suite(env: Dict[str, str], tests: List[str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("CSL_") or k in ("CSL_REDIS_SERVER", "CSL_TEST_DBS")}  # not this run's
    clean["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                          cwd=ROOT, env=dict(clean, **env), capture_output=True, text=True, timeout=300)


def plant_sentinels(url: str) -> Dict[int, Dict[str, str]]:
    """Keys of someone else's in every database the suite could touch, some looking like the suite's."""
    planted = {}
    for db in SENTINEL_DBS:
        client = redis.Redis.from_url(f"{url}/{db}", decode_responses=True)
        keys = {f"sentinel:{db}": "mine", "celery": "not a queue", "csltest:{x:0}:mine": "a look-alike",
                "unacked": "mine too"}
        client.mset(keys)
        planted[db] = keys
        client.close()
    return planted


def contents(url: str) -> Dict[int, Dict[str, str]]:
    found = {}
    for db in SENTINEL_DBS:
        client = redis.Redis.from_url(f"{url}/{db}", decode_responses=True)
        found[db] = {key: client.get(key) for key in client.scan_iter()}
        client.close()
    return found


def stat(url: str, name: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        info = client.info("all")
        return int(info.get(name, info.get("cmdstat_" + name, {}).get("calls", 0)))
    finally:
        client.close()


def test_a_named_redis_keeps_every_key_the_run_did_not_make():
    with RedisServer() as theirs:
        planted = plant_sentinels(theirs.url)
        scripts_before = stat(theirs.url, "evalsha")

        run = run_suite({NAMED_URL_VARIABLE: theirs.url, "REDIS_URL": theirs.url}, SUBSET)

        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "3 passed" in run.stdout
        assert stat(theirs.url, "evalsha") > scripts_before  # the locks really lived there
        assert contents(theirs.url) == planted


def test_the_default_run_never_connects_to_redis_url():
    with RedisServer() as theirs:
        planted = plant_sentinels(theirs.url)
        watcher = redis.Redis.from_url(theirs.url)
        try:
            connections = int(watcher.info("stats")["total_connections_received"])

            run = run_suite({"REDIS_URL": theirs.url}, SUBSET[:1])

            assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
            assert int(watcher.info("stats")["total_connections_received"]) == connections
        finally:
            watcher.close()
        assert contents(theirs.url) == planted
