"""The documentation site's pages say what the code says: the Reference page is the one
``scripts/reference.py`` writes from the option table, every Python block of ``docs/`` is Python,
the "which control" page names only options that exist, and each block marked as an excerpt of a file
of the suite is in that file word for word. (The site's build: tests/test_docs_site.py; the other
blocks run in tests/test_docs_examples.py.)"""

from __future__ import annotations

import ast
import importlib.util
import re
import textwrap
from pathlib import Path

import pytest

from celery_singleton_lock.config.options import OPTION_NAMES, SETTING_NAMES
from tests.docs_blocks import PAGES as ALL_PAGES
from tests.docs_blocks import blocks, excerpt_text

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").rglob("*.md"))
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


EXCERPTS = [block for page in ALL_PAGES for block in blocks(page) if block.excerpt_of]
_TESTS = ROOT / "tests"


def _run_by_the_suite(path: Path) -> bool:
    """A test module, the Django project the tests run, or a module a test module imports."""
    if path.name.startswith("test_") or _TESTS / "django_project" in path.parents:
        return True
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return any(module in test.read_text(encoding="utf-8") for test in _TESTS.rglob("test_*.py"))


def _contains(text: str, excerpt: str) -> bool:
    """``excerpt`` is a run of lines of ``text``, both compared after dedent."""
    lines, wanted = text.splitlines(), excerpt.splitlines()
    return any(textwrap.dedent("\n".join(lines[i:i + len(wanted)])) == "\n".join(wanted)
               for i in range(len(lines) - len(wanted) + 1))


@pytest.mark.parametrize("block", EXCERPTS, ids=[block.where for block in EXCERPTS])
def test_each_excerpt_is_a_file_of_the_suite_word_for_word(block):
    path = ROOT / block.excerpt_of
    assert _TESTS in path.parents and path.is_file(), f"{block.where}: {block.excerpt_of} is no file under tests/"
    assert _run_by_the_suite(path), f"{block.where}: no test runs {block.excerpt_of}"
    assert _contains(path.read_text(encoding="utf-8"), excerpt_text(block)), (
        f"{block.where} differs from {block.excerpt_of}")


def test_an_excerpt_that_drifted_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- excerpt: tests/integration/proj_limits.py -->\n```python\nPERIOD = 3.0\n```\n")
    (block,) = blocks(page)
    assert block.excerpt_of == "tests/integration/proj_limits.py"
    assert not _contains((ROOT / block.excerpt_of).read_text(encoding="utf-8"), excerpt_text(block))
