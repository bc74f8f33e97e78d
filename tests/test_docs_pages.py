"""The documentation site's pages say what the code says: the Reference page is the one
``scripts/reference.py`` writes from the option table, every Python block of ``docs/`` is Python,
and the "which control" page names only options that exist. (The site's build: tests/test_docs_site.py.)"""

from __future__ import annotations

import ast
import importlib.util
import re
import textwrap
from pathlib import Path

import pytest

from celery_singleton_lock.config.options import OPTION_NAMES, SETTING_NAMES

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))
_BLOCK = re.compile(r"^([ \t]*)```(?:python|py)\b[^\n]*\n(.*?)^\1```", re.S | re.M)


def _reference():
    spec = importlib.util.spec_from_file_location("reference", ROOT / "scripts" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_page_is_the_option_tables():
    page = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    assert page == _reference().page(), (
        "docs/reference.md differs from the option table: run `python scripts/reference.py --write`")


def test_the_reference_page_lists_every_option_and_setting():
    page = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    missing = [name for name in (*OPTION_NAMES, *SETTING_NAMES) if f"`{name}`" not in page]
    assert not missing, missing


def test_an_option_the_reference_does_not_describe_stops_the_script(monkeypatch):
    reference = _reference()
    monkeypatch.delitem(reference.OPTIONS, "lock_window")
    with pytest.raises(SystemExit, match="lock_window"):
        reference.page()


def _python_blocks(page: Path):
    text = page.read_text(encoding="utf-8")
    for match in _BLOCK.finditer(text):
        yield text.count("\n", 0, match.start()) + 1, textwrap.dedent(match.group(2))


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_each_python_block_of_the_docs_is_python(page):
    broken = []
    for line, source in _python_blocks(page):
        try:
            ast.parse(source, filename=f"{page.name}:{line}")
        except SyntaxError as exc:
            broken.append(f"{page.name}:{line + (exc.lineno or 0)}: {exc.msg}")
    assert not broken, broken


def test_the_block_finder_sees_the_new_pages_examples():
    assert len(list(_python_blocks(ROOT / "docs" / "getting-started.md"))) >= 2


def test_the_which_control_page_names_only_real_options():
    text = (ROOT / "docs" / "which-control.md").read_text(encoding="utf-8")
    named = set(re.findall(r"\b((?:lock|on_lock)_[a-z_]+|on_locked)\b", text))
    settings = {name for name in named if name.startswith("singleton_lock_")}
    unknown = sorted((named - settings) - set(OPTION_NAMES))
    assert not unknown, unknown
    assert set(OPTION_NAMES) <= named, sorted(set(OPTION_NAMES) - named)
