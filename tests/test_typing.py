"""The package ships ``py.typed``: its own annotations must hold under mypy."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_package_type_checks():
    pytest.importorskip("mypy", reason="mypy comes with the test extra")
    package = os.path.join(ROOT, "celery_singleton_lock")
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", package],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
