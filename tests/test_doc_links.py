"""Every relative link of the README and of docs/ names a file or folder that exists (a module
moved into a sub-package left two README links pointing at nothing), and a link to a page's
``#anchor`` names one of that page's headings (the README's links into the site: mkdocs checks the
site's own links when it builds)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _links(page: Path):
    text = page.read_text(encoding="utf-8")
    for match in _LINK.finditer(text):
        target = match.group(1)
        if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not files
            yield text.count("\n", 0, match.start()) + 1, target, match.group(2)


def slug(heading: str) -> str:
    """The anchor mkdocs (and GitHub, for these headings) gives a heading: code marks and punctuation
    dropped, lower case, spaces to hyphens."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(match.group(1)) for match in re.finditer(r"^#{1,6}\s+(.+?)\s*$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=[page.relative_to(ROOT).as_posix() for page in PAGES])
def test_each_relative_link_names_a_file_that_exists(page):
    broken = [f"{page.name}:{line}: {target}" for line, target, _ in _links(page)
              if target and not (page.parent / target).exists()]
    assert not broken, broken


@pytest.mark.parametrize("page", PAGES, ids=[page.relative_to(ROOT).as_posix() for page in PAGES])
def test_each_anchor_names_a_heading_of_its_page(page):
    broken = []
    for line, target, anchor in _links(page):
        path = page.parent / target if target else page
        if anchor and path.suffix == ".md" and path.is_file() and anchor not in anchors(path):
            broken.append(f"{page.name}:{line}: {target}#{anchor}")
    assert not broken, broken


def test_the_slugs_are_mkdocs_slugs():
    assert slug("`SharedLock`: a limit on a resource rather than on a task") == (
        "sharedlock-a-limit-on-a-resource-rather-than-on-a-task")
    assert slug("Choosing `lock_ttl`") == "choosing-lock_ttl"
    assert slug("Fencing: is it safe against every failure?") == "fencing-is-it-safe-against-every-failure"
