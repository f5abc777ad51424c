"""The pipeline benchmark's smoke run (issue 12): ``python -m benchmarks.bench_pipeline
--quick`` generates its own journals (about 17 k records), runs the reference and Spark
(``local[2,2]``, default options) each in a child process, and compares their tables row for
row. No timing is asserted; what is checked is that both engines ran end to end, measured
what the published rows report, and agreed. The 1 M and 10 M runs live in the benchmark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from routing.pipeline._session import SparkUnavailable, check_java, check_pyspark

ROOT = Path(__file__).resolve().parents[2]


def test_quick_pipeline_benchmark_runs_both_engines_and_they_agree(tmp_path: Path) -> None:
    try:
        check_pyspark()
        check_java()
    except SparkUnavailable as exc:
        pytest.skip(f"needs pyspark and Java 17+: {exc}")
    # the benchmark of this checkout, with the routing the tests import (first on the path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_pipeline", "--quick"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    by_engine = {row["operation"].split(" ")[0]: row for row in rows}
    assert set(by_engine) == {"reference", "spark"}, sorted(by_engine)
    for engine, row in by_engine.items():
        assert row["equal"] is True, f"{engine}: tables differ from the reference's"
        assert row["size"] > 10_000, row
        assert row["ops_per_s"] > 0 and row["seconds"] > 0, row
        assert row["peak_rss_mb"] > 0, row
    spark = by_engine["spark"]
    assert spark["master"] == "local[2,2]"
    assert spark["replay_partitions"] >= 3  # at least one per name server
    assert spark["read_tasks"] == spark["files"] >= 3  # small files: one task each
