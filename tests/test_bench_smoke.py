"""The benchmark suite in a tiny size, so ``python -m bench`` cannot rot.

Given the bench command in ``--smoke`` mode (its own redis-servers, one solo
worker, a handful of messages per section), when it runs, then it finishes in
seconds and writes a report with every section, our lock never overlapping, and
one hash tag putting a whole task on one cluster master.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_smoke_writes_every_section(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "bench", "--smoke", "--out", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    report = (tmp_path / "benchmarks.md").read_text()
    for heading in ("## Micro", "## Publish cost", "## End to end", "## Duplicate storm", "## Heartbeat",
                    "## Key derivation", "## How it compares, in this run", "## Profile", "## Redis Cluster",
                    "## The worker's side alone"):
        assert heading in report
    assert "| ours: running (acquire + release) |" in report
    assert re.search(r"\| LockedTask running \| \d+ \| 0 \| \d+ \| 0 \|", report), "storm row of our lock"
    assert "storm: 0 overlaps for LockedTask | max 0 | yes |" in report
    end_to_end = report.split("## End to end", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"\| redis-py Lock by hand \|", end_to_end), "the by-hand lock is an end-to-end variant"
    assert "| worker CPU, solo, concurrency 1, running: at most redis-py's Lock by hand" in report
    assert "*The lock's own share of a task's worker time*" in report
    assert "| Redis Cluster: one task's locks spread over the masters" in report
    cluster = report.split("## Redis Cluster", 1)[1].split("## ", 1)[0]
    if "Skipped:" not in cluster:  # one hash tag: one slot, one master does everything
        assert "| 3 masters, one hash tag {hot} (contrast) | 3 |" in cluster
        assert re.search(r"\| 1 \(\d / \d / \d\) \| [\d.]+ \| 1\.00 \|", cluster), cluster
    heartbeat = report.split("## Heartbeat", 1)[1].split("## ", 1)[0]
    assert "n/a" not in heartbeat, "every heartbeat row has its renewal time:\n" + heartbeat
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        pytest.skip("charts need the bench extra (matplotlib)")
    assert {p.name for p in tmp_path.glob("bench-*.png")} >= {"bench-micro.png", "bench-e2e.png", "bench-storm.png"}
