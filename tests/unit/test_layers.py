"""The package's layers, read from its sources with ``ast`` (the installed copy when a wheel is tested).

- The package is a ladder of units (a sub-package, or a module at the root), :data:`LADDER`: a unit
  imports only units on lower rungs, so no package imports one above it or beside it. ``cli/``
  reads locks and never imports the execution side (``run/``, ``enqueue/``, ``worker/``), and
  nothing imports ``demo/`` nor ``contrib/`` (the optional Django app, the only unit that imports
  Django).
- The store (``celery_singleton_lock/store/``) stands alone: no Celery, kombu, billiard or click,
  and nothing of the package outside it.
- Outside the store, only the names ``store/__init__.py`` exports are used, never a submodule.
- The import graph has no cycle of any kind: imports inside functions and under
  ``if TYPE_CHECKING:`` count. A deferred import still ties two modules together, and a circle
  only the type checker walks is still a circle in the design: the types a seam speaks in live
  in the seam.
- The root holds at most ``MAX_ROOT_MODULES`` modules, every sub-package says its role in its
  ``__init__`` docstring, and no module is longer than ``MAX_LINES``.

Every rule counts every import, in a function or under ``if TYPE_CHECKING:`` too. Each rule is its
own test, and a failure names the file, line and import (or the cycle) at fault.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Set, Tuple

import pytest

PACKAGE = "celery_singleton_lock"
STORE = f"{PACKAGE}.store"
#: What the store may not import besides the rest of the package.
FORBIDDEN_IN_STORE = ("celery", "kombu", "billiard", "click")
#: Modules outside the store that may import its submodules (a prefix takes a whole subpackage),
#: e.g. ``(f"{PACKAGE}.cli", f"{PACKAGE}.demo")``. None may today.
STORE_SUBMODULES_ALLOWED_IN: Tuple[str, ...] = ()
MAX_LINES = 300
MAX_ROOT_MODULES = 8

#: The rungs of the package, lowest first: a unit (a sub-package or a root module; ``""`` is the
#: root's ``__init__``) may import units of lower rungs only.
LADDER: Tuple[Tuple[str, ...], ...] = (
    ("exceptions", "signals", "printable"),  # the package-wide basics
    ("store",),  # the lock protocol, alone
    ("config", "metrics"),  # settings and options; counting from the signals
    ("calls",),  # what makes two calls the same
    ("runtime",),  # what one app holds in one process
    ("run",),  # one execution under its lock
    ("shared",),  # places on a named resource, held as a block in any code
    ("enqueue",),  # the publishing side
    ("task",),  # LockedTask
    ("worker",),  # the worker's lifecycle
    ("web",),  # the operator's page (standard library WSGI)
    ("cli",),  # the operator's commands
    ("", "__main__"),  # the public face and the command's entry
    ("demo",),  # the demo: nothing imports it
    ("contrib",),  # optional framework integrations (the Django app): nothing imports them
)
#: Imports the ladder would allow but the design does not: (importer unit, imported unit).
FORBIDDEN_UNITS = (("cli", "run"), ("cli", "enqueue"), ("cli", "worker"),
                   ("web", "run"), ("web", "enqueue"), ("web", "worker"))


def _package_dir() -> Path:
    spec = importlib.util.find_spec(PACKAGE)  # its __file__, without running it
    assert spec is not None and spec.origin, f"{PACKAGE} cannot be found"
    return Path(spec.origin).parent


ROOT = _package_dir()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


#: Every module of the package: dotted name -> source file.
MODULES: Dict[str, Path] = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@dataclass(frozen=True)
class Import:
    importer: str
    path: Path
    line: int
    text: str  # the statement as written, on one line
    target: str  # the module it names: a submodule when it imports one, else the module it takes names from
    runs: bool  # can run: at module level or in a function (not under TYPE_CHECKING); every rule counts both

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT.parent).as_posix()}:{self.line}: {self.text}"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(nodes: Iterable[ast.AST], runs: bool = True) -> Iterator[Tuple[ast.AST, bool]]:
    """Every import statement in or below ``nodes``, with whether it can run (``False`` under TYPE_CHECKING)."""
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, runs
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _statements(node.body, False)
            yield from _statements(node.orelse, runs)
        else:
            yield from _statements(ast.iter_child_nodes(node), runs)


def _base(importer: str, level: int) -> str:
    """The package a relative import of ``level`` dots starts from."""
    package = importer if MODULES[importer].name == "__init__.py" else importer.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return package


def _targets(importer: str, node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    assert isinstance(node, ast.ImportFrom)
    source = node.module or ""
    if node.level:
        source = ".".join(filter(None, [_base(importer, node.level), source]))
    for alias in node.names:
        submodule = f"{source}.{alias.name}"
        yield submodule if submodule in MODULES else source


def _imports(name: str) -> List[Import]:
    path = MODULES[name]
    source = path.read_text(encoding="utf-8")
    found = []
    for node, runs in _statements([ast.parse(source, str(path))]):
        text = " ".join((ast.get_source_segment(source, node) or "").split())
        for target in dict.fromkeys(_targets(name, node)):
            found.append(Import(name, path, node.lineno, text, target, runs))
    return found


IMPORTS: List[Import] = [imp for name in MODULES for imp in _imports(name)]


def _fail(rule: str, problems: List[str]) -> None:
    if problems:
        pytest.fail(f"{rule}:\n  " + "\n  ".join(problems), pytrace=False)


def test_the_store_imports_neither_celery_nor_the_rest_of_the_package():
    problems = []
    for imp in IMPORTS:
        if not _within(imp.importer, STORE):
            continue
        top = imp.target.partition(".")[0]
        if top in FORBIDDEN_IN_STORE:
            problems.append(f"{imp.where()}  (the store may not import {top})")
        elif _within(imp.target, PACKAGE) and not _within(imp.target, STORE):
            problems.append(f"{imp.where()}  (the store may not import {imp.target})")
    _fail("the store layer imports outside itself", problems)


def test_outside_the_store_only_what_store_init_exports_is_used():
    problems = [f"{imp.where()}  (imports {imp.target}; take the name from {STORE})"
                for imp in IMPORTS
                if not _within(imp.importer, STORE) and imp.target.startswith(STORE + ".")
                and not any(_within(imp.importer, allowed) for allowed in STORE_SUBMODULES_ALLOWED_IN)]
    _fail(f"a submodule of {STORE} is imported from outside it", problems)


def _runs_first(importer: str, target: str) -> Iterator[str]:
    """The package modules that must have run for the import of ``target``: each package above it that is
    not already being imported (the importer's own), and ``target`` itself."""
    parts = target.split(".")
    for end in range(1, len(parts) + 1):
        module = ".".join(parts[:end])
        if module not in MODULES or module == importer:
            continue
        if end < len(parts) and _within(importer, module):
            continue  # a package above the importer: it is importing the importer
        yield module


def _graph(imports: Iterable[Import] = IMPORTS) -> Dict[str, Dict[str, Import]]:
    graph: Dict[str, Dict[str, Import]] = {name: {} for name in MODULES}
    for imp in imports:
        if _within(imp.target, PACKAGE):
            for module in _runs_first(imp.importer, imp.target):
                graph[imp.importer].setdefault(module, imp)
    return graph


def _components(graph: Dict[str, Dict[str, Import]]) -> List[List[str]]:
    """Strongly connected components (Tarjan), each sorted, of more than one module."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _shortest_cycle(graph: Dict[str, Dict[str, Import]], start: str, within: Set[str]) -> List[str]:
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node]):
                if nxt == start:
                    return paths[node] + [start]
                if nxt in within and nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def _short(name: str) -> str:
    return name[len(PACKAGE) + 1:] if name != PACKAGE else PACKAGE


def test_the_import_graph_has_no_cycle():
    graph = _graph()
    problems = []
    for component in _components(graph):
        cycle = _shortest_cycle(graph, component[0], set(component))
        lines = [" -> ".join(_short(m) for m in cycle)]
        lines += [f"    {graph[a][b].where()}" for a, b in zip(cycle, cycle[1:])]
        if len(component) > len(cycle) - 1:
            lines.append(f"    (all in one cycle group: {', '.join(_short(m) for m in component)})")
        problems.append("\n".join(lines))
    _fail("the package's imports go round in a cycle", problems)


def test_no_module_is_longer_than_the_limit():
    problems = []
    for name, path in MODULES.items():
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > MAX_LINES:
            problems.append(f"{path.relative_to(ROOT.parent).as_posix()}: {count} lines")
    _fail(f"modules longer than {MAX_LINES} lines", problems)


def test_the_rules_see_imports_in_functions_and_under_type_checking():
    source = ("import a\n"
              "if TYPE_CHECKING:\n    import b\n"
              "def f():\n    import c\n    if typing.TYPE_CHECKING:\n        import d\n"
              "class K:\n    async def g(self):\n        from e import x\n")
    seen = {node.names[0].name if isinstance(node, ast.Import) else node.module: runs
            for node, runs in _statements([ast.parse(source)])}
    assert seen == {"a": True, "b": False, "c": True, "d": False, "e": True}


def _unit(module: str) -> str:
    """The ladder's unit a package module belongs to: its sub-package, its root module, or ``""``."""
    return module[len(PACKAGE) + 1:].partition(".")[0] if module != PACKAGE else ""


RUNG: Dict[str, int] = {unit: rung for rung, units in enumerate(LADDER) for unit in units}


def test_every_module_sits_on_a_rung_of_the_ladder():
    missing = sorted({_unit(name) for name in MODULES} - set(RUNG))
    _fail("units of the package that the ladder does not place", missing)


def _package_problems(imports: Iterable[Import]) -> List[str]:
    problems = []
    for imp in imports:
        if not _within(imp.target, PACKAGE):
            continue
        src, dst = _unit(imp.importer), _unit(imp.target)
        if src == dst or src not in RUNG or dst not in RUNG:
            continue
        if (src, dst) in FORBIDDEN_UNITS:
            problems.append(f"{imp.where()}  ({src or 'the root'} may not import {dst})")
        elif RUNG[dst] >= RUNG[src]:
            where = "above" if RUNG[dst] > RUNG[src] else "beside"
            problems.append(f"{imp.where()}  ({dst or 'the root'} sits {where} {src or 'the root'})")
    return problems


def test_no_package_imports_one_above_or_beside_it():
    _fail("a package imports one that is not below it", _package_problems(IMPORTS))


#: The only unit that may import a web framework: Django is no dependency of the library.
FRAMEWORKS, FRAMEWORK_UNIT = ("django",), "contrib"


def test_only_contrib_imports_a_framework():
    problems = [imp.where() for imp in IMPORTS
                if imp.target.partition(".")[0] in FRAMEWORKS and _unit(imp.importer) != FRAMEWORK_UNIT]
    _fail("a framework imported outside contrib/", problems)


def test_the_package_rule_catches_an_upward_and_a_forbidden_import():
    def fake(importer: str, target: str) -> Import:
        return Import(f"{PACKAGE}.{importer}", ROOT / "x.py", 1, f"import {target}", f"{PACKAGE}.{target}", False)

    problems = _package_problems([fake("store.keys", "run.attempt"), fake("cli.views", "run.policy"),
                                  fake("run.policy", "store.keys")])
    assert len(problems) == 2 and "sits above store" in problems[0] and "may not import run" in problems[1]


def test_a_type_only_import_closes_a_cycle():
    a, b = f"{PACKAGE}.store.keys", f"{PACKAGE}.store.lease"
    imports = [Import(a, MODULES[a], 1, "from .lease import Lease", b, True),
               Import(b, MODULES[b], 1, "from .keys import LockKeys  (under TYPE_CHECKING)", a, False)]
    assert _components(_graph(imports)) == [[a, b]]


def test_the_root_is_the_public_face_and_each_subpackage_says_its_role():
    root = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, f"{len(root)} modules at the package root: {root}"
    silent = [p.parent.name for p in ROOT.glob("*/__init__.py") if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not silent, f"sub-packages without a role docstring: {silent}"
