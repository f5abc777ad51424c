"""Collecting the doctests of ``src/`` (``--doctest-modules``, see ``pyproject.toml``).

Not part of the package (setuptools ships the ``routing`` package only). A module whose
optional extra is not installed (``pyspark`` for the pipeline, ``click`` for the command line,
…) is reported as skipped, naming the extra, instead of failing to import; any other import
error still fails. Every module is imported once, under its package name, so the one that is
also the pytest plugin (``routing.testing.pytest_plugin``, loaded through its entry point) is
the same module object, not a second copy.
"""

from __future__ import annotations

import importlib
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parent

#: The deprecated aliases only re-export (and warn when imported): no doctests to collect.
collect_ignore = ["routing/strategies.py", "routing/pytest_plugin.py"]

#: The optional extras (``pyproject.toml``) by the import name of their packages.
EXTRA_OF = {
    "pyspark": "spark", "pandas": "spark", "pyarrow": "spark", "py4j": "spark",
    "grpc": "connect", "google": "connect", "zstandard": "connect",
    "click": "cli", "rich": "cli", "matplotlib": "cli", "plotly": "cli",
    "hypothesis": "testing", "prometheus_client": "metrics", "uvloop": "uvloop",
    "playwright": "browser",
}


class MissingExtra(pytest.File):
    """A module of ``src/`` that needs an extra which is not installed: skipped."""

    def __init__(self, *, extra: str, missing: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reason = (f"{missing} is not installed: pip install 'rocketmq-routing[{extra}]' "
                       f"to run the doctests of this module")

    def collect(self) -> list[pytest.Item]:
        pytest.skip(self.reason)


def _missing_extra(name: str) -> tuple[str, str] | None:
    """(extra, missing package) when importing module ``name`` fails for want of an
    optional extra; None when it imports. Other import errors propagate."""
    try:
        importlib.import_module(name)
    except (ImportError, SystemExit) as exc:  # the CLI exits naming its extra
        cause = exc if isinstance(exc, ModuleNotFoundError) else exc.__cause__
        missing = (getattr(cause, "name", None) or "").partition(".")[0]
        if not isinstance(cause, ModuleNotFoundError) or missing not in EXTRA_OF:
            raise
        return EXTRA_OF[missing], missing
    return None


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path: Path, parent: pytest.Collector
                        ) -> Generator[None, list[pytest.Collector], list[pytest.Collector]]:
    collected = yield
    if file_path.suffix != ".py" or SRC not in file_path.parents \
            or file_path.name == "conftest.py":
        return collected
    parts = list(file_path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    found = _missing_extra(".".join(parts))
    if found is None:
        return collected
    extra, missing = found
    return [MissingExtra.from_parent(parent, path=file_path, extra=extra, missing=missing)]
