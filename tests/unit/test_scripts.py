"""The Lua scripts as the package loads them from its ``lua/`` files (no Redis needed)."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from celery_singleton_lock.store import scripts

HELPERS = ("next_fence", "now_us", "uptime_ms", "restart_window", "gen_verdict")
LUA = resources.files("celery_singleton_lock.store") / "lua"


def _code(text: str) -> str:
    """The script without its comments (they name the helpers too)."""
    return re.sub(r"--[^\n]*", "", text)


def _files():
    return sorted((entry.name, entry.read_text(encoding="utf-8"))
                  for entry in LUA.iterdir() if entry.name.endswith(".lua"))


@pytest.mark.parametrize("name", scripts.__all__)
def test_every_script_is_non_empty_text(name):
    text = getattr(scripts, name)
    assert isinstance(text, str) and _code(text).strip()


@pytest.mark.parametrize("name", scripts.__all__)
@pytest.mark.parametrize("helper", HELPERS)
def test_a_script_that_calls_a_helper_defines_it_once_before_its_first_call(name, helper):
    code = _code(getattr(scripts, name))
    definitions = [m.start() for m in re.finditer(rf"\blocal function {helper}\(", code)]
    calls = [m.start() for m in re.finditer(rf"(?<!function ){helper}\(", code)]
    if calls:
        assert len(definitions) == 1, (name, helper, len(definitions))
        assert definitions[0] < calls[0], (name, helper)
    else:
        assert len(definitions) <= 1, (name, helper, len(definitions))


def test_the_helpers_are_defined_in_the_shared_file():
    code = _code(dict(_files())["_common.lua"])
    for helper in HELPERS:
        assert re.search(rf"\blocal function {helper}\(", code), helper


def test_every_lua_file_is_used_by_a_script():
    texts = [getattr(scripts, name) for name in scripts.__all__]
    files = _files()
    assert len(files) == len(scripts.__all__) + 3  # one per script, _common.lua, _places.lua and _line.lua
    for name, text in files:
        assert any(text in script for script in texts), f"lua/{name} is in no script"


@pytest.mark.parametrize("name", [name for name, _ in _files()])
def test_every_lua_file_opens_with_a_comment_header(name):
    text = dict(_files())[name]
    assert text.startswith("-- "), name
    assert re.search(r"^-- +Returns", text, re.M), name
