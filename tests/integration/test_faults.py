"""A few faults of the campaign (``python -m bench faults``), small, with their invariants asserted.

Given real prefork workers running the campaign's workload (three ``LockedTask`` tasks, fenced
writes to a downstream store) against a private lock store, when no fault, a paused lock store,
or a lock store restarted empty during long bodies hits them, then no stale write is accepted,
no fence is reused or goes back, every published message is accounted for (none lost), and no
key is left in the lock store without a TTL. Given debounced tasks whose publisher processes are
SIGKILLed at random moments, no call answered as superseded runs, every call that ran answers its
own arguments, and every burst runs its newest call that reached the broker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAULTS = ("none", "pause-store", "restart-store-long", "debounce-kill-publisher")


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("faults")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "bench", "faults", "--smoke", "--only", ",".join(FAULTS),
                           "--out", str(out), "--json", str(out / "faults.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=380)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "## Results" in (out / "faults.md").read_text()
    return json.loads((out / "faults.json").read_text())["results"]


@pytest.mark.timeout(400)
@pytest.mark.parametrize("fault", FAULTS)
def test_fault_keeps_the_invariants(campaign: dict, fault: str) -> None:
    run = campaign[fault]
    assert run["executions"] > 0
    assert run["stale_accepted"] == 0, run["write_examples"]
    assert run["token_reuse"] == 0 and run["token_regression"] == 0
    assert run["fates"]["lost"] == 0, run["lost_ids"]
    assert run["fates"]["queued"] == 0
    assert run["no_ttl"] == 0
    assert sum(run["fates"].values()) == run["published"]


@pytest.mark.timeout(400)
def test_a_restart_during_long_bodies_lets_no_duplicate_run_beside_them(campaign: dict) -> None:
    run = campaign["restart-store-long"]
    assert run["overlaps"] == 0, run["overlap_examples"]
    assert run["wrongly_refused"] == 0, run["write_examples"]
    assert run["writes"] == run["accepted"]


@pytest.mark.timeout(400)
def test_a_killed_publisher_loses_no_debounced_burst_and_no_superseded_call_runs(campaign: dict) -> None:
    run = campaign["debounce-kill-publisher"]
    assert run["nemesis_actions"] > 0 and run["calls"] > run["bodies"] > 0
    assert run["superseded_ran"] == 0 and run["wrong_answers"] == 0, run["latest_examples"]
    assert run["calls_lost"] == 0 and run["unanswered"] == 0, run["latest_examples"]
    assert run["overlaps"] == 0, run["overlap_examples"]
