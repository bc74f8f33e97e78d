"""Every Python example of the README and of docs/ runs (the excerpts of the suite's own files are
checked word for word by tests/test_docs_pages.py instead).

The blocks of one page run in order, in one namespace, in a fresh interpreter, against a real
redis-server of this test's own: the examples' ``redis://127.0.0.1:6379`` stands for it (the
examples name the usual local Redis; the test never touches one it did not start). A few names are
taken as given, as the pages take them: ``app``, a Celery app on that server (the examples that
make their own replace it), and ``db``, ``gateway`` and ``partner_api``, stand-ins for the reader's
own systems. After the last block every Celery app the page made is finalized, so each task's
options and the app's settings are checked as a worker would check them.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.docs_blocks import PAGES, ROOT, blocks
from tests.support.servers import RedisServer

RUNNABLE = {page: [block for block in blocks(page) if block.excerpt_of is None] for page in PAGES}
RUNNABLE = {page: found for page, found in RUNNABLE.items() if found}

_HARNESS = r'''
import json, sys
from unittest import mock
from celery import Celery

BASE = sys.argv[1]
blocks = json.load(sys.stdin)
namespace = {"__name__": "__docs__", "app": Celery("proj", broker=f"{BASE}/0"),
             "db": mock.MagicMock(), "gateway": mock.MagicMock(), "partner_api": mock.MagicMock()}
for where, source in blocks:
    exec(compile(source.replace("redis://127.0.0.1:6379", BASE), where, "exec"), namespace)
for value in list(namespace.values()):
    if isinstance(value, Celery):
        value.finalize(auto=True)
        for task in list(value.tasks.values()):
            task.name  # binds every task: options and settings are checked here
print("ran", len(blocks))
'''


@pytest.fixture(scope="module")
def redis_base():
    server = RedisServer().start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.mark.parametrize("page", list(RUNNABLE), ids=[page.relative_to(ROOT).as_posix() for page in RUNNABLE])
def test_each_example_of_the_page_runs(page, redis_base):
    payload = json.dumps([(block.where, block.source) for block in RUNNABLE[page]])
    ran = subprocess.run([sys.executable, "-c", _HARNESS, redis_base], input=payload, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-4000:]
    assert f"ran {len(RUNNABLE[page])}" in ran.stdout


def test_the_runner_sees_the_readme_and_the_guides():
    names = {page.name for page in RUNNABLE}
    assert {"README.md", "singleton-locks.md", "shared-locks.md", "testing.md", "getting-started.md"} <= names
