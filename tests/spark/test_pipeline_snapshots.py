"""Journals with snapshot records through the Spark pipeline as it is (one task per name
server): every table equals the reference's, snapshots and all (the reader accepts them,
the replay checks them and derives no row from them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline_scenarios import damage
from routing.pipeline import analyze, analyze_local
from routing.pipeline._schema import rows_equal
from routing.sim import SimConfig, simulate

AT = (600_000, 1_800_000)


def test_journals_with_snapshots_equal_the_reference(spark: Any, tmp_path: Path) -> None:
    result = simulate(SimConfig(groups=4, slaves=1, nameservers=3, duration_ms=2_100_000,
                                seed=4, faults="heavy", snapshot_every_ms=300_000))
    for ns in result.nameserver_ids:
        lines = result.journal_lines(ns)
        if ns == "ns-1":
            lines = damage({"x": lines}, 4)["x"]
        (tmp_path / f"{ns}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert sum('"op":"snapshot"' in line for ns in result.nameserver_ids
               for line in result.journal_lines(ns)) >= 18
    expected = analyze_local(tmp_path, at=AT)
    analysis = analyze(spark, str(tmp_path), at=AT, partition="ns")
    got = analysis.collect()
    analysis.unpersist()
    assert not rows_equal(expected, got)
    assert expected["sessions"] and expected["route_changes"]
