"""The documentation site builds with MkDocs, every warning an error (``mkdocs.yml`` turns broken
links and anchors between pages, and pages left out of the nav, into warnings): what
``bash scripts/docs.sh`` and CI run."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason="mkdocs and mkdocs-material are not installed (the test and docs extras install them)")


def _build(site: Path, config: Path = ROOT / "mkdocs.yml") -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=240)


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    built = _build(tmp_path / "site")
    assert built.returncode == 0, built.stderr[-4000:]
    for page in ("getting-started", "which-control", "singleton-locks", "limits-and-windows", "shared-locks",
                 "newest-call", "enqueue-scopes", "beat", "django", "testing", "observability", "web", "topologies",
                 "reference", "api", "drop-in", "failures", "faults", "guarantees", "security", "benchmarks",
                 "failover-sentinel", "internals", "contributing", "faq"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "SharedLock" in api and "LockedError" in api  # the public API, from the docstrings
    assert (tmp_path / "site" / "search" / "search_index.json").is_file()


def test_a_broken_anchor_fails_the_build(tmp_path):
    """The strict build is what catches a broken link: a page linking to an anchor no page has fails it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[there](other.md#no-such-heading)\n", encoding="utf-8")
    (docs / "other.md").write_text("# Other\n", encoding="utf-8")
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    config = config.split("\nnav:", 1)[0].replace("docs_dir: docs", f"docs_dir: {docs}")
    (tmp_path / "mkdocs.yml").write_text(config, encoding="utf-8")
    built = _build(tmp_path / "site", tmp_path / "mkdocs.yml")
    assert built.returncode != 0
    assert "no-such-heading" in built.stderr
