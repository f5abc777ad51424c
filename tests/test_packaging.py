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
