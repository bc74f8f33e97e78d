"""Compare the two runs of Celery's unit tests that ``scripts/celery_suite.sh`` makes.

Usage: ``python celery_suite_compare.py PLAIN.xml LOCKED.xml docs/drop-in.md``

A test that fails (or errors) under ``LockedTask`` but passes as Celery ships it is expected
only when docs/drop-in.md names it (its node id, ``t/unit/...::...``) among the differences from
``celery.Task``, with the reason. Anything else is unexpected: exit status 1. A named test that
passes now is reported, so the list does not outlive its reasons.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import List, Set

NODE_ID = re.compile(r"`(t/unit/[\w/]+\.py::[^`\s]+)`")


def failed(junit_xml: str) -> Set[str]:
    """Node ids of the tests that failed or errored in one run (which must have run some)."""
    ids = set()
    cases = list(ET.parse(junit_xml).iter("testcase"))
    if not cases:
        raise SystemExit(f"{junit_xml}: no test ran")
    for case in cases:
        if case.find("failure") is None and case.find("error") is None:
            continue
        # classname is the module's dotted path, then its classes: t.unit.tasks.test_tasks.test_tasks
        parts = case.get("classname", "").split(".")
        depth = _module_depth(parts)
        ids.add("::".join(["/".join(parts[:depth]) + ".py", *parts[depth:], case.get("name", "")]))
    return ids


def _module_depth(parts: List[str]) -> int:
    """How many leading parts name the module (up to the first ``test_*`` part)."""
    for depth, part in enumerate(parts, 1):
        if part.startswith("test_"):
            return depth
    return len(parts)


def documented(page: str) -> Set[str]:
    """The node ids the page lists as failing under ``LockedTask`` for a documented reason."""
    return set(NODE_ID.findall(Path(page).read_text(encoding="utf-8")))


def main(plain_xml: str, locked_xml: str, page: str) -> int:
    plain, locked, listed = failed(plain_xml), failed(locked_xml), documented(page)
    new = locked - plain
    unexpected, stale = sorted(new - listed), sorted(listed - new)
    for node in sorted(new & listed):
        print(f"expected (docs/drop-in.md): {node}")
    for node in stale:
        print(f"listed in docs/drop-in.md but not failing under LockedTask: {node}")
    for node in unexpected:
        print(f"UNEXPECTED failure under LockedTask: {node}")
    print(f"plain Celery: {len(plain)} failed; LockedTask: {len(locked)} failed, {len(new)} of them not in the "
          f"plain run, {len(unexpected)} unexpected")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
