"""What a user installs: the declared floors are the ones the support matrix runs, and the
installed package carries its data files."""

from __future__ import annotations

import ast
import re
from importlib import metadata, resources
from pathlib import Path
from typing import Dict, List

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def _cell(call: ast.Call) -> Dict[str, str]:
    args = [ast.literal_eval(a) for a in call.args]
    cell = dict(zip(["name", "python", "celery", "kombu", "redis", "server"], args))
    for pin in args[6] if len(args) > 6 else ():
        name, version = pin.split("==")
        cell[name] = version
    return cell


def _cells() -> List[Dict[str, str]]:
    """The support matrix's stacks (its cells and the main stack), read from noxfile.py without nox."""
    cells = []
    for node in ast.parse((ROOT / "noxfile.py").read_text()).body:
        names = {getattr(t, "id", None) for t in getattr(node, "targets", [])}
        if "CELLS" in names:
            cells += [_cell(call) for call in node.value.elts]  # type: ignore[attr-defined]
        elif "MAIN" in names:
            cells.append(_cell(node.value))  # type: ignore[attr-defined]
    assert len(cells) > 1, "noxfile.py has no CELLS and MAIN"
    return cells


def _declared() -> Dict[str, Requirement]:
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M)
    assert block, "pyproject.toml declares no dependencies"
    found = re.findall(r'^\s*"([^"]+)",', block.group(1), re.M)
    return {Requirement(r).name: Requirement(r) for r in found}


def _floor(requirement: Requirement) -> Version:
    floors = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    assert floors, f"{requirement} declares no floor"
    return floors[0]


@pytest.mark.parametrize("name", ["celery", "kombu", "redis", "packaging"])
def test_every_declared_floor_is_a_version_the_matrix_runs(name):
    floor = _floor(_declared()[name])
    oldest = min(Version(cell[name]) for cell in _cells() if name in cell)
    assert floor == Version(f"{oldest.major}.{oldest.minor}") or floor == oldest, (name, floor, oldest)


def test_the_declared_python_floor_is_a_cell_and_every_supported_python_is_one():
    text = (ROOT / "pyproject.toml").read_text()
    floor = re.search(r'^requires-python = ">=(3\.\d+)"', text, re.M).group(1)  # type: ignore[union-attr]
    classified = set(re.findall(r'"Programming Language :: Python :: (3\.\d+)"', text))
    assert {cell["python"] for cell in _cells()} == classified
    assert min(classified, key=Version) == floor


def test_the_installed_package_ships_its_type_marker():
    assert resources.files("celery_singleton_lock").joinpath("py.typed").is_file()
    assert metadata.metadata("celery-singleton-lock")["License-Expression"] == "MIT"
