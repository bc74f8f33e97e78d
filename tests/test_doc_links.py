"""Every relative link of the README and of docs/*.md names a file or folder that exists (a module
moved into a sub-package left two README links pointing at nothing)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _relative_links(page: Path):
    text = page.read_text(encoding="utf-8")
    for match in _LINK.finditer(text):
        target = match.group(1)
        if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not files
            yield text.count("\n", 0, match.start()) + 1, target


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_each_relative_link_names_a_file_that_exists(page):
    broken = [f"{page.name}:{line}: {target}" for line, target in _relative_links(page)
              if not (page.parent / target).exists()]
    assert not broken, broken
