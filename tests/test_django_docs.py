"""docs/django.md shows the test Django project's files as they are: each code block that names a
file of the project (``# proj/settings.py``, ``# shop/tasks.py (excerpt)``) is in that file word for
word, so tests/integration/test_django.py, which runs the project, runs the recipes as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "django.md"
PROJECT = ROOT / "tests" / "django_project"
_BLOCK = re.compile(r"```python\n# ([\w/]+\.py)( \(excerpt\))?\n(.*?)```", re.S)
BLOCKS = [(match.group(1), match.group(3)) for match in _BLOCK.finditer(DOC.read_text(encoding="utf-8"))]


def test_the_page_names_the_projects_files():
    assert {path for path, _ in BLOCKS} >= {"proj/celery.py", "proj/__init__.py", "proj/settings.py",
                                            "proj/settings_test.py", "shop/tasks.py", "shop/services.py",
                                            "shop/tests.py"}


@pytest.mark.parametrize("path, text", BLOCKS, ids=[f"{path}-{i}" for i, (path, _) in enumerate(BLOCKS)])
def test_each_recipe_is_the_projects_file_word_for_word(path, text):
    assert text.strip() in (PROJECT / path).read_text(encoding="utf-8"), f"docs/django.md's {path} block"


def test_the_readme_links_the_page():
    assert "(docs/django.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_testing_pages_lines_are_the_ones_the_project_runs_over_its_settings():
    page = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    block = page.split("```python\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines()
             if line.startswith("app.conf.") or line.startswith("from celery_singleton_lock.store")]
    assert len(lines) == 3, lines
    project_test = (PROJECT / "shop" / "test_faq.py").read_text(encoding="utf-8")
    for line in lines:
        assert line.strip() in project_test, line
