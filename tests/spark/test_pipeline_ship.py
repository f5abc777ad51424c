"""What a cluster's executors receive (`routing.pipeline._session.package_zip`, shipped by
``routing analyze`` through Spark's py-files for non-local masters): the zip alone must let
a Python without any site-packages import everything the replay runs. No Spark needed."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from routing.pipeline._session import package_zip


def test_the_shipped_zip_holds_routing_and_its_pure_python_dependencies(
        tmp_path: Path) -> None:
    target = package_zip(tmp_path)
    names = zipfile.ZipFile(target).namelist()
    for package in ("routing", "attr", "attrs"):
        assert f"{package}/__init__.py" in names, package
    assert not any(n.startswith("sortedcontainers/") for n in names)  # no longer needed
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    # -I -S: no site-packages, no user paths; only the standard library and the zip
    code = ("import sys; sys.path[:0] = [sys.argv[1]]\n"
            "import routing.pipeline._spark, routing.pipeline._deriver, routing.journal\n"
            "assert routing.__file__.startswith(sys.argv[1]), routing.__file__\n"
            "import attrs\n"
            "assert attrs.__file__.startswith(sys.argv[1])\n")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(target)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
