"""The everyday tier (``scripts/test.sh --fast``) names real tests: a renamed test would silently
leave its control without a real worker in that tier."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import EVERYDAY

INTEGRATION = Path(__file__).parent.parent / "integration"


def _tests_of(path: Path) -> set:
    tree = ast.parse(path.read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_every_everyday_entry_names_a_test_of_the_integration_tier():
    missing = []
    for entry in EVERYDAY:
        file, name = entry.split("::")
        path = INTEGRATION / file
        if not path.exists() or name not in _tests_of(path):
            missing.append(entry)
    assert missing == []


def test_the_everyday_tier_covers_the_main_controls():
    files = {entry.split("::")[0] for entry in EVERYDAY}
    assert {"test_run_lock.py", "test_enqueue_lock.py", "test_limits.py", "test_latest_wins.py",
            "test_shared.py"} <= files
