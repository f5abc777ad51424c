"""``routing.pipeline``'s face: every public name resolves and states its cost, the package
imports cheaply (no pyspark, no drawing or console library), and the command line uses the
face only (no private pipeline module)."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import routing.pipeline as pipeline

CLI = Path(pipeline.__file__).parent.parent / "cli"
#: A docstring states its cost: an O(...) bound or a sentence about the cost.
COST = re.compile(r"O\(|[Cc]ost")


@pytest.mark.parametrize("name", pipeline.__all__)
def test_every_public_name_states_its_cost(name: str) -> None:
    obj = getattr(pipeline, name)
    if inspect.isfunction(obj) or inspect.isclass(obj):
        doc = inspect.getdoc(obj) or ""
    else:  # a constant: its ``#:`` comment where it is defined
        defined = [Path(inspect.getfile(m)) for m in _modules()
                   if re.search(rf"^{name}\b.*=", Path(inspect.getfile(m)).read_text(),
                                re.MULTILINE)]
        assert defined, name
        text = defined[0].read_text()
        doc = text[:text.index(f"\n{name}")].rsplit("\n\n", 1)[-1]
        assert doc.lstrip().startswith("#:"), (name, doc)
        assert COST.search(doc) or "A constant" in doc, f"{name}: {doc[:200]}"
        return
    assert COST.search(doc), f"{name}: {doc[:200]}"


def _modules() -> list[object]:
    import importlib

    folder = Path(pipeline.__file__).parent
    return [importlib.import_module(f"routing.pipeline.{p.stem}")
            for p in sorted(folder.glob("_*.py")) if p.stem != "__init__"]


def test_importing_the_pipeline_loads_no_spark_and_no_drawing() -> None:
    code = ("import sys, routing.pipeline as p\n"
            "heavy = ('pyspark', 'pyarrow', 'pandas', 'rich', 'click', 'plotly', 'matplotlib')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
            "print(sorted(m for m in sys.modules if m.startswith('routing.pipeline._spark')))\n"
            "p.analyze, p.Analysis, p.to_parquet\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["[]", "[]", "[]"]


def test_the_command_line_uses_the_face_only() -> None:
    private = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level:
                parts = node.module.split(".")
                if parts[0] == "pipeline" and len(parts) > 1:
                    private.append(f"{path.name}: from ..{node.module}")
            if isinstance(node, ast.ImportFrom) and node.module == "pipeline" and node.level:
                private += [f"{path.name}: {a.name}" for a in node.names
                            if a.name.startswith("_")]
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [
                    a.name for a in node.names]
                private += [f"{path.name}: {n}" for n in names
                            if n.startswith("routing.pipeline._")]
    assert private == []
