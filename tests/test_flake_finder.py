"""The flake finder (``scripts/flakes.sh``) as its header shows it: N runs, J of them at once, and
every test that failed in any run listed with how many runs it failed in."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TARGET = '''
import os
import time
from pathlib import Path

HERE = Path(__file__).parent


def test_meets_another_run():
    (HERE / f"run-{os.getpid()}").touch()
    deadline = time.monotonic() + 120
    while len(list(HERE.glob("run-*"))) < 2:  # two runs at once: each sees the other's mark
        assert time.monotonic() < deadline, "no other run started beside this one"
        time.sleep(0.05)


def test_always_fails():
    assert False
'''


def _finder(*args: str) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    return subprocess.run(["bash", str(ROOT / "scripts" / "flakes.sh"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_runs_side_by_side_and_lists_each_failure_with_its_count(tmp_path: Path):
    target = tmp_path / "test_target.py"
    target.write_text(TARGET)
    done = _finder("-n", "2", "-j", "2", str(target))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "run 1 of 2: rc 1" in done.stdout and "run 2 of 2: rc 1" in done.stdout
    assert re.search(r"^\s*2 \S*test_target\.py::test_always_fails$", done.stdout, re.M), done.stdout
    assert "test_meets_another_run" not in done.stdout  # it met the other run in both


def test_exits_0_when_no_run_failed(tmp_path: Path):
    target = tmp_path / "test_target.py"
    target.write_text(TARGET)
    (tmp_path / "run-0").touch()  # another run's mark, so one run alone passes
    done = _finder("-n", "1", str(target), "-k", "meets")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no test failed in 1 runs" in done.stdout


def test_refuses_a_number_of_lanes_that_is_not_one():
    done = _finder("-j", "0")
    assert done.returncode == 2
    assert "-j takes a number of runs at once above 0, not '0'" in done.stderr
