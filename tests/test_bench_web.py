"""``python -m bench web`` in a tiny size, so the web view's benchmark cannot rot: it fills a private
redis-server, builds ``/api/locks``, counts the round trips, and prints its section."""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_web_prints_its_section():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "bench", "web", "--locks", "1200", "--rounds", "1"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "## The operator's web view" in proc.stdout
    assert "for 1200 locks |" in proc.stdout
    # one pipelined read per 500 keys; SCAN's COUNT is a hint, so its calls are about one per 500 keys too
    trips = re.search(r"\| store round trips per refresh \| (\d+): (\d+) SCAN calls \(COUNT 500\) \+ (\d+) pipelined",
                      proc.stdout)
    assert trips and int(trips.group(3)) == 3 and 2 <= int(trips.group(2)) <= 6, proc.stdout
