"""The doctests of ``src/`` are part of the suite (``--doctest-modules``, ``src/conftest.py``):
every module with examples is collected, and a module whose optional extra is missing is
skipped with the extra's name instead of failing the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

BLOCKER = '''
import sys

class _Block:
    """Acts as if the cli and spark extras were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {"click", "rich", "pyspark", "pandas", "pyarrow"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Block())
'''


def _pytest(*args: str, pythonpath: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:randomly",
                           *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)


def _modules_with_examples() -> set[str]:
    return {str(p.relative_to(ROOT)) for p in SRC.rglob("*.py")
            if ">>> " in p.read_text(encoding="utf-8")}


def test_every_module_with_examples_is_collected() -> None:
    run = _pytest("--collect-only", "src", pythonpath=str(SRC))
    assert run.returncode == 0, run.stdout + run.stderr
    collected = {line.split("::")[0] for line in run.stdout.splitlines() if "::" in line}
    assert collected == _modules_with_examples()


def test_a_missing_extra_skips_its_modules_and_nothing_fails(tmp_path: Path) -> None:
    (tmp_path / "block_extras.py").write_text(BLOCKER, encoding="utf-8")
    run = _pytest("-p", "block_extras", "src", pythonpath=f"{SRC}{os.pathsep}{tmp_path}")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "click is not installed: pip install 'rocketmq-routing[cli]'" in run.stdout
    assert " failed" not in run.stdout and " error" not in run.stdout
    # the command line's modules are the ones skipped; the rest still ran
    assert "passed" in run.stdout
