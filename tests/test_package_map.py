"""docs/internals.md's package map and Lua script list are the ones the tree gives (``scripts/package_map.py``)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _package_map():
    spec = importlib.util.spec_from_file_location("package_map", ROOT / "scripts" / "package_map.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_internals_page_maps_are_the_trees():
    package_map = _package_map()
    page = (ROOT / "docs" / "internals.md").read_text(encoding="utf-8")
    assert page == package_map.page_with_maps(page), (
        "docs/internals.md's maps differ from the tree: run `python scripts/package_map.py --write`")


def test_the_lua_list_has_a_row_for_every_script():
    table = _package_map().lua_map()
    for path in (ROOT / "celery_singleton_lock" / "store" / "lua").glob("*.lua"):
        assert f"`store/lua/{path.name}`" in table, path.name


def test_the_map_has_a_row_for_every_module_and_subpackage():
    table = _package_map().package_map()
    package = ROOT / "celery_singleton_lock"
    for path in package.rglob("*.py"):
        relative = path.relative_to(package).as_posix()
        row = f"`{path.parent.relative_to(package).as_posix()}/`" if path.name == "__init__.py" else f"`{relative}`"
        if relative == "__init__.py":
            row = "`__init__.py`"
        assert row in table, relative
