"""The package map of docs/index.md, enforced: the core (the root of ``src/routing``) imports
nothing above it, no module imports one that imports it back, no module grows past the
size limit, and the paths that moved in 0.2.0 still work for one release, with a warning."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _imports(path: Path, *, top_level_only: bool) -> set[str]:
    """Absolute names of the routing modules ``path`` imports. ``top_level_only`` leaves
    out imports inside functions and under ``if TYPE_CHECKING`` (they cannot form a loop
    at import time)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes: list[ast.AST] = []
    if top_level_only:
        for node in tree.body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Try):
                nodes.extend(node.body)
            nodes.append(node)
    else:
        nodes = list(ast.walk(tree))
    found: set[str] = set()
    known = _modules()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("routing"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if not target.startswith("routing"):
                continue
            found.add(target)
            for alias in node.names:  # ``from . import x`` may name a module
                if f"{target}.{alias.name}" in known:
                    found.add(f"{target}.{alias.name}")
    return found


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
    reached = {m for m in _imports(_core_modules()[name], top_level_only=False)
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
    # An edge from a module to a package it sits in is left out: a package's __init__
    # re-exporting its submodules is the normal shape. Every other edge counts.
    graph = {name: {m for m in _imports(path, top_level_only=True)
                    if m in _modules() and not name.startswith(m + ".")} - {name}
             for name, path in _modules().items()}
    for name in graph:
        if name in DEPRECATED_ALIASES:
            continue
        stack, seen = list(graph[name]), set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            stack.extend(graph.get(node, ()))
        is_package = _modules()[name].name == "__init__.py"
        if not is_package:
            assert name not in seen, f"{name} imports a module that imports it back"


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
            for target in _imports(path, top_level_only=False):
                parts = target.split(".")
                if len(parts) > 1 and parts[1] in SUBPACKAGES and parts[1] != package:
                    reached.add(parts[1])
    assert reached <= ALLOWED[package], f"routing.{package} imports {sorted(reached)}"
    index = (SRC.parent.parent / "docs" / "index.md").read_text(encoding="utf-8")
    assert f"| `routing.{package}` |" in index
