"""A smoke run of ``benchmarks/bench_fake_start.py``: every row it reports is a measured
start (or a skip with its reason), and the table renders. No timing is asserted here: the
published numbers are in docs/performance.md."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the benchmarks package lives beside src/, not in it
    sys.path.insert(0, str(ROOT))

from benchmarks import bench_fake_start as bench  # noqa: E402


def test_the_fixture_and_the_command_are_measured() -> None:
    env = bench.python_env()
    rows = [bench.fixture_starts(3), *bench.command_starts(1, env),
            bench._skipped("Java", "not run in the smoke test")]
    fixture, fake, serve, java = rows
    assert fixture["size"] == 3 and fixture["accepted_median_ms"] > 0
    assert fixture["answered_median_ms"] >= fixture["accepted_median_ms"]
    for row in (fake, serve):
        assert row["size"] == 1 and row["answered_median_ms"] >= row["accepted_median_ms"] > 0
        assert row["rss_mb"] is not None and 5 < row["rss_mb"] < 500
    assert java["skipped"] == "not run in the smoke test"
    table = bench.markdown(rows, "header")
    assert table.count("\n|") == len(rows) + 2 and "skipped: not run in the smoke test" in table
