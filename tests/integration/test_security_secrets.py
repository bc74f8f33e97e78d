"""The lock store's password never leaves through what Celery prints about an app's settings.

Given a lock store with a password (in ``singleton_lock_url``, in a query parameter
and in the transport options), when anyone who can publish to the broker asks a
real worker for its settings (``celery inspect conf``, a remote-control command)
or an operator runs ``celery report``, then the answer names the lock store's
host but no password.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, Iterator

import pytest

from tests.support.servers import RedisServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PASSWORD = "lock-store-pw-5b1e"
KEY_PASSWORD = "key-file-pw-93c2"


@pytest.fixture
def guarded_store() -> Iterator[RedisServer]:
    server = RedisServer(extra_args=["--requirepass", PASSWORD])
    server.start(probe_url=f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0")
    yield server
    server.stop()


def _env(test_env: Dict[str, str], server: RedisServer) -> Dict[str, str]:
    return dict(test_env, CSL_LOCK_URL=f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0?ssl_keyfile_password="
                                       f"{KEY_PASSWORD}",
                CSL_LOCK_TRANSPORT_OPTIONS=json.dumps({"password": PASSWORD,
                                                       "sentinel_kwargs": {"password": PASSWORD}}))


def _celery(env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, **env, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "celery", "-A", "tests.integration.proj", *args],
                          capture_output=True, text=True, cwd=ROOT, env=full, timeout=60)


def _assert_censored(output: str, server: RedisServer) -> None:
    assert PASSWORD not in output and KEY_PASSWORD not in output, output
    assert f"redis://:***@127.0.0.1:{server.port}/0?ssl_keyfile_password=***" in output, output


def test_inspect_conf_of_a_real_worker_masks_the_lock_store_password(test_env, guarded_store, start_worker):
    env = _env(test_env, guarded_store)
    worker = start_worker(concurrency=1, env=env)

    answer = _celery(env, "inspect", "conf", "--json", "--timeout", "10", "-d", f"{worker.name}@{os.uname()[1]}")

    assert answer.returncode == 0, answer.stderr
    [settings] = json.loads(answer.stdout).values()
    _assert_censored(answer.stdout, guarded_store)
    assert settings["singleton_lock_transport_options"]["sentinel_kwargs"]["password"] != PASSWORD


def test_celery_report_masks_the_lock_store_password(test_env, guarded_store):
    report = _celery(_env(test_env, guarded_store), "report")

    assert report.returncode == 0, report.stderr
    assert "singleton_lock_url" in report.stdout and "singleton_lock_transport_options" in report.stdout
    _assert_censored(report.stdout, guarded_store)
