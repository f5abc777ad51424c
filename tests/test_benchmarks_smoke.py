"""`python -m benchmarks --quick` as the CI smoke run of the benchmark harness (issue #6).

No timing is asserted: the quick run uses toy sizes. What is checked is that the harness
runs end to end, measures every spec §5 operation on both sides, and writes the report
(JSON with rows, targets, memory and concurrency; the PNG plot) where it was told to,
without touching the published numbers in ``docs/``. The pipeline suite is left out here
(it starts its own Spark session; its quick run is tests/spark/test_bench_pipeline_smoke.py),
the remoting and simulator suites run in their quick form.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the benchmarks package lives beside src/, not in it
    sys.path.insert(0, str(ROOT))

from benchmarks import __main__ as bench_main  # noqa: E402
from benchmarks import bench_core  # noqa: E402

SPEC_OPERATIONS = {
    "register unchanged (same object)",
    "scan_expired (none expired)",
    "remove group: unregister its only member",
    "remove group: scan_expired with it expired",
    "pickup_route (hot topic, 4 groups)",
    "topics_by_cluster (10 topics)",
    "wipe_write_perm (10 topics)",
    "add_write_perm (10 topics)",
}


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    out = tmp_path_factory.mktemp("bench-quick")
    published = (ROOT / "docs" / "benchmarks.json").read_bytes()
    status = bench_main.main(["--quick", "--core-only", "--out", str(out)])
    assert (ROOT / "docs" / "benchmarks.json").read_bytes() == published, \
        "a quick run must not overwrite the published numbers"
    return status, out


def test_quick_run_exits_cleanly_and_writes_the_report(quick_report):
    status, out = quick_report
    assert status == 0
    document = json.loads((out / "benchmarks.json").read_text())
    assert document["quick"] is True and document["errors"] == {}
    assert (out / "benchmarks.png").stat().st_size > 10_000


def test_every_spec_operation_is_measured_on_both_sides(quick_report):
    _, out = quick_report
    rows = json.loads((out / "benchmarks.json").read_text())["rows"]
    measured = {r["operation"] for r in rows if r["suite"] == "core"}
    assert measured >= SPEC_OPERATIONS
    for row in rows:
        if row["operation"] in SPEC_OPERATIONS:
            assert row["routing_median_ns"] > 0 and row["baseline_median_ns"] > 0, row
            assert row["ratio"] == pytest.approx(
                row["routing_ops_per_s"] / row["baseline_ops_per_s"], rel=1e-6)


def test_targets_memory_and_concurrency_are_reported(quick_report):
    _, out = quick_report
    document = json.loads((out / "benchmarks.json").read_text())
    assert len(document["targets"]) >= 9
    assert all({"target", "requirement", "measured", "met"} <= set(t)
               for t in document["targets"])
    for side in ("routing", "baseline"):
        assert document["memory"][side]["bytes_per_broker"] > 0
        assert document["concurrency"][side]["reader_pickups_per_s"] > 0


@pytest.mark.parametrize("module", ["bench_remoting", "bench_sim", "bench_hotpath"])
def test_optional_suites_run_quick(module):
    rows, error = bench_main.run_optional(module, quick=True)
    assert error is None, error
    assert rows and all(r["suite"] == module.removeprefix("bench_") for r in rows)


def test_complexity_table_names_every_spec_operation():
    assert {op for op, _, _ in bench_core.COMPLEXITY} >= SPEC_OPERATIONS


def test_core_only_keeps_the_other_suites_rows_of_the_report(tmp_path):
    """Publishing the core suite alone must not drop rows other runs published (the
    pipeline's 10 M rows come from `bench_pipeline --publish`)."""
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps({"rows": [{"suite": "core", "operation": "old"},
                                         {"suite": "pipeline", "operation": "10 M"}],
                                "modules": ["bench_core", "bench_pipeline"]}))
    document = {"rows": [{"suite": "core", "operation": "new"}], "modules": ["bench_core"],
                "command": "python -m benchmarks"}
    bench_main.keep_other_suites(path, document)
    assert document["rows"] == [{"suite": "core", "operation": "new"},
                                {"suite": "pipeline", "operation": "10 M"}]
    assert document["modules"] == ["bench_core", "bench_pipeline"]
    assert "--core-only" in document["command"]
    fresh = {"rows": [{"suite": "core"}], "modules": ["bench_core"], "command": "c"}
    bench_main.keep_other_suites(tmp_path / "absent.json", fresh)
    assert fresh == {"rows": [{"suite": "core"}], "modules": ["bench_core"], "command": "c"}


def test_heartbeat_path_benchmark_times_both_trees_and_both_dialects(capsys):
    from benchmarks import bench_heartbeat_path

    assert bench_heartbeat_path.main(["--seconds", "0.05", "--repeat", "1",
                                      "--before", str(ROOT / "src"),
                                      "--request", "both"]) == 0
    out = capsys.readouterr().out
    for request in ("heartbeat", "route"):
        for dialect in ("json", "rocketmq"):
            line = next(x for x in out.splitlines()
                        if x.startswith(f"{request} {dialect} median:"))
            assert "before" in line and "after" in line and "after/before" in line
