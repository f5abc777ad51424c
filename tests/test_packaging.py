"""The core imports only attrs; extras stay behind their modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_core_import_pulls_in_no_extra():
    code = (
        "import sys, routing, routing.heartbeat, routing.pipeline\n"
        "heavy = {'hypothesis', 'pytest', 'pyspark', 'click', 'rich', 'matplotlib', 'pandas',\n"
        "         'sortedcontainers', 'grpc', 'pyarrow'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_public_names_are_exported_and_documented():
    import routing

    assert len(routing.__all__) == len(set(routing.__all__))
    api = (Path(__file__).parent.parent / "docs" / "api.md").read_text(encoding="utf-8")
    for name in routing.__all__:
        assert hasattr(routing, name), name
        if not name.startswith("__"):
            assert f"`{name}" in api, f"{name} is not documented in docs/api.md"


def test_one_version_everywhere():
    """pip's metadata (setuptools reads the version from ``routing._version``),
    ``routing.__version__`` and ``routing --version`` are one value (issue 27: they said
    0.1.0 and 0.2.0.dev0). The installed wheel is checked by tests/package/check_wheel.py."""
    import tomllib

    from click.testing import CliRunner

    import routing
    from routing import _version
    from routing.cli import main

    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "routing._version.__version__"}
    assert routing.__version__ == _version.__version__
    shown = CliRunner().invoke(main, ["--version"], prog_name="routing").output
    assert shown == f"routing, version {routing.__version__}\n"
    # the same value setuptools computes when it builds the distribution
    from setuptools.config.expand import read_attr

    src = str(Path(__file__).parent.parent / "src")
    assert read_attr("routing._version.__version__", package_dir={"": src},
                     root_dir=src) == routing.__version__
