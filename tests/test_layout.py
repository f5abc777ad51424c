"""The package map of docs/index.md, enforced: the core (the root of ``src/routing``) imports
nothing above it, no module imports one that imports it back (counted over every import: at
any depth, inside functions and under ``if TYPE_CHECKING:``), no module grows past the size
limit, and the paths that moved in 0.2.0 still work for one release, with a warning."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from collections.abc import Iterable
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "routing"

#: Every capability above the core; the core may import none of them.
SUBPACKAGES = ("cli", "heartbeat", "journal", "pipeline", "remoting", "sim", "testing")
#: Old public paths kept for one release as thin re-exports that warn.
DEPRECATED_ALIASES = {"strategies": "routing.testing.strategies",
                      "pytest_plugin": "routing.testing.pytest_plugin"}
#: The size past which a module should be split by responsibility (lines).
MAX_LINES = 600


def _module_name(path: Path, root: Path = SRC) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path = SRC) -> dict[str, Path]:
    return {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _imports(path: Path, root: Path = SRC, known: Iterable[str] | None = None) -> set[str]:
    """Absolute names of the modules of ``root``'s package that ``path`` imports: every
    import statement at any depth (inside functions, classes, ``try`` and
    ``if TYPE_CHECKING:`` blocks alike), since a deferred import closes a loop as surely as
    a top-level one, only later."""
    top = root.name
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    known = set(_modules(root) if known is None else known)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names
                         if a.name == top or a.name.startswith(top + "."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target != top and not target.startswith(top + "."):
                continue
            found.add(target)
            for alias in node.names:  # ``from . import x`` may name a module
                if f"{target}.{alias.name}" in known:
                    found.add(f"{target}.{alias.name}")
    return found


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """Module → the modules of the same tree it imports (every import, see `_imports`).

    An edge from a module to a package it sits in is left out: a package's ``__init__``
    re-exporting its submodules, which reach their siblings through it, is the normal
    shape. Every other edge counts."""
    modules = _modules(root)
    return {name: {m for m in _imports(path, root, modules)
                   if m in modules and not name.startswith(m + ".")} - {name}
            for name, path in modules.items()}


def find_loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import loop, each as one closed path through its modules, the first module
    repeated at the end (`loop_components` has all the modules of each). Sorted, so a
    report reads the same every run."""
    return sorted(_closed_path(graph, c) for c in loop_components(graph))


def loop_components(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative): every module that can reach itself through another, grouped."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)
    return components


def _closed_path(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself (breadth first,
    inside the component)."""
    start = min(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{sorted(component)} is not a loop")


def assert_no_loops(graph: dict[str, set[str]], tolerated: frozenset[str] = frozenset()) -> None:
    """Fail listing every loop of ``graph``, unless all the modules of a loop are in
    ``tolerated`` (empty in the suite: every loop fails)."""
    loops = sorted(loop_components(graph), key=min)
    failing = [c for c in loops if not c <= tolerated]
    assert not failing, (
        f"{len(failing)} import loop(s) (every import counts, deferred ones too):\n"
        + "\n".join(f"  {' -> '.join(_closed_path(graph, c))}"
                     + (f"\n    (the loop holds {', '.join(sorted(c))})" if len(c) > 2 else "")
                     for c in failing)
        + (f"\n(and {len(loops) - len(failing)} tolerated)"
           if len(loops) > len(failing) else ""))


def _core_modules() -> dict[str, Path]:
    return {name: path for name, path in _modules().items()
            if name.count(".") <= 1 and path.parent == SRC
            and name.rpartition(".")[2] not in DEPRECATED_ALIASES}


def test_the_root_holds_the_core_and_nothing_else():
    extra = {p.name for p in SRC.iterdir()
             if p.is_dir() and p.name not in SUBPACKAGES and not p.name.startswith(("_", "."))}
    assert extra == set(), f"unexpected subpackages {extra}: add them to the package map"
    public_files = {p.stem for p in SRC.glob("*.py") if not p.stem.startswith("_")}
    assert public_files == set(DEPRECATED_ALIASES), (
        "the root's only public modules are the deprecated aliases; capabilities live in "
        f"subpackages: {sorted(public_files - set(DEPRECATED_ALIASES))}")


@pytest.mark.parametrize("name", sorted(_core_modules()))
def test_core_imports_nothing_above_it(name: str):
    above = tuple(f"routing.{p}" for p in SUBPACKAGES)
    reached = {m for m in _imports(_core_modules()[name])
               if m.startswith(above)}
    assert reached == set(), f"{name} (core) imports {sorted(reached)}"


def test_import_routing_loads_no_capability():
    code = ("import sys, routing\n"
            "print(sorted(m for m in sys.modules if m.startswith('routing.') and "
            "m.split('.')[1] in " + repr(SUBPACKAGES) + "))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_no_import_loops():
    assert_no_loops(import_graph())


def _plant(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / next(iter(files)).split("/")[0]


def test_a_deferred_import_loop_fails(tmp_path: Path):
    # Neither import runs at import time (one inside a method, one for the type checker):
    # a top-level-only count saw no loop here.
    pkg = _plant(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "class A:\n    def f(self):\n        try:\n"
                    "            from .b import g\n        finally:\n            pass\n",
        "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                    "    from pkg.a import A\n",
        "pkg/c.py": "def h():\n    import pkg.sub.d\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/d.py": "def k():\n    from .. import c\n",
    })
    assert find_loops(import_graph(pkg)) == [["pkg.a", "pkg.b", "pkg.a"],
                                             ["pkg.c", "pkg.sub.d", "pkg.c"]]
    with pytest.raises(AssertionError, match=r"2 import loop\(s\)") as failed:
        assert_no_loops(import_graph(pkg))
    assert "pkg.a -> pkg.b -> pkg.a" in str(failed.value)
    assert "pkg.c -> pkg.sub.d -> pkg.c" in str(failed.value)
    # tolerating one loop's modules leaves the other failing
    with pytest.raises(AssertionError, match=r"1 import loop\(s\)"):
        assert_no_loops(import_graph(pkg), frozenset({"pkg.a", "pkg.b"}))


def test_a_module_importing_its_own_package_is_no_loop(tmp_path: Path):
    # __init__ re-exports from a, and a reaches its sibling through the package: the
    # package-to-__init__ edge is left out, as the package map allows.
    pkg = _plant(tmp_path, {
        "pkg/__init__.py": "from .a import f\nfrom .b import g\n",
        "pkg/a.py": "def f():\n    from pkg import g\n",
        "pkg/b.py": "def g():\n    pass\n",
    })
    graph = import_graph(pkg)
    assert graph["pkg"] == {"pkg.a", "pkg.b"}
    assert graph["pkg.a"] == set()
    assert find_loops(graph) == []
    assert_no_loops(graph)


@pytest.mark.parametrize("name", sorted(_modules()))
def test_no_module_past_the_size_limit(name: str):
    lines = len(_modules()[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines: split it by responsibility"


@pytest.mark.parametrize(("old", "new"), sorted(DEPRECATED_ALIASES.items()))
def test_moved_paths_still_work_and_warn(old: str, new: str):
    sys.modules.pop(f"routing.{old}", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alias = importlib.import_module(f"routing.{old}")
    assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    moved = importlib.import_module(new)
    assert list(alias.__all__) == list(moved.__all__)
    for public in moved.__all__:
        assert getattr(alias, public) is getattr(moved, public)


#: The "may import" column of docs/index.md's package map (besides the core).
ALLOWED = {
    "heartbeat": set(),
    "journal": set(),
    "remoting": {"heartbeat", "journal"},
    "testing": {"remoting"},
    "sim": {"heartbeat", "journal"},
    "pipeline": {"journal"},
    "cli": {"heartbeat", "pipeline", "remoting", "sim", "testing"},
}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_subpackages_import_only_what_the_map_allows(package: str):
    reached = set()
    for name, path in _modules().items():
        if name == f"routing.{package}" or name.startswith(f"routing.{package}."):
            for target in _imports(path):
                parts = target.split(".")
                if len(parts) > 1 and parts[1] in SUBPACKAGES and parts[1] != package:
                    reached.add(parts[1])
    assert reached <= ALLOWED[package], f"routing.{package} imports {sorted(reached)}"
    index = (SRC.parent.parent / "docs" / "index.md").read_text(encoding="utf-8")
    assert f"| `routing.{package}` |" in index


@pytest.mark.parametrize("path", sorted((SRC / "cli").glob("*.py")), ids=lambda p: p.name)
def test_the_command_line_imports_only_public_faces(path: Path) -> None:
    # The CLI assembles the command from each package's face (``routing``,
    # ``routing.pipeline``, ``routing.remoting``, ``routing.testing``...), never from a
    # private module of another package; its own private modules are its business.
    private = sorted(m for m in _imports(path)
                     if not m.startswith("routing.cli")
                     and any(part.startswith("_") for part in m.split(".")))
    assert private == [], f"cli/{path.name} imports private modules {private}"
