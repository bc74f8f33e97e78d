"""The unit tests' conftests load nothing heavy: no Redis client, no Celery, no worker or server helpers.

Given a fresh interpreter, when it imports the conftests pytest loads for ``tests/unit``, then none
of those modules is in ``sys.modules`` (a fresh process, since this one has the whole suite loaded).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

#: The directory holding the ``tests`` package (the repository, or the copy a support-matrix cell runs).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFTESTS = ("tests.conftest", "tests.unit.conftest")
HEAVY = ("redis", "celery", "kombu", "billiard", "tests.support.servers", "tests.support.workers",
         "tests.support.topologies", "tests.support.acl", "tests.support.certs")


def test_the_unit_conftests_load_neither_redis_nor_the_worker_helpers():
    code = textwrap.dedent(f"""
        import importlib, sys
        sys.path.insert(0, {ROOT!r})
        for name in {CONFTESTS!r}:
            importlib.import_module(name)
        print(" ".join(sorted(name for name in {HEAVY!r} if name in sys.modules)))
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    assert not loaded, f"importing {', '.join(CONFTESTS)} loads {', '.join(loaded)}"
