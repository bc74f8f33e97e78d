"""The README's package map is the one the tree gives (``scripts/package_map.py``)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _package_map():
    spec = importlib.util.spec_from_file_location("package_map", ROOT / "scripts" / "package_map.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_package_map_is_the_trees():
    package_map = _package_map()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme == package_map.readme_with_map(readme), (
        "the README's package map differs from the tree: run `python scripts/package_map.py --write`")


def test_the_map_has_a_row_for_every_module_and_subpackage():
    table = _package_map().package_map()
    package = ROOT / "celery_singleton_lock"
    for path in package.rglob("*.py"):
        relative = path.relative_to(package).as_posix()
        row = f"`{path.parent.relative_to(package).as_posix()}/`" if path.name == "__init__.py" else f"`{relative}`"
        if relative == "__init__.py":
            row = "`__init__.py`"
        assert row in table, relative
