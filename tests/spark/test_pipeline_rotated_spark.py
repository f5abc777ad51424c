"""Spark reads a folder of rotated journals as the reference reads the unrotated run
(docs/journal.md, "Rotation"): one name server's files, in name order, are one journal,
across a name-server restart and snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from routing.pipeline import analyze, analyze_local
from routing.pipeline._schema import rows_equal
from routing.sim import NameServerRestart, SimConfig, simulate

pytestmark = pytest.mark.spark

CONFIG = SimConfig(groups=2, slaves=1, nameservers=2, duration_ms=1_200_000, clients=1,
                   snapshot_every_ms=300_000, seed=5,
                   faults=[NameServerRestart(at_ms=500_000, nameserver=1, down_ms=40_000)])
AT = (400_000, 1_000_000)


@pytest.mark.parametrize("partition", ["group", "ns"])
def test_spark_on_rotated_files_equals_the_reference_on_the_unrotated_run(
        spark: Any, tmp_path: Path, partition: str) -> None:
    simulate(CONFIG, out_dir=tmp_path / "plain")
    rotated = simulate(CONFIG, out_dir=tmp_path / "rotated", rotate_every_ms=180_000)
    assert all(len(files) >= 7 for files in rotated.journal_files.values())
    # a file still being written (hidden) is not read
    (tmp_path / "rotated" / ".ns-0.9999999999999999.jsonl").write_text('{"ns":"ns-0"')
    expected = analyze_local(tmp_path / "plain", at=AT)
    assert [(r["ns"], r["restarts"], r["gaps"], r["rejected"])
            for r in expected["name_servers"]] == [("ns-0", 0, 0, 0), ("ns-1", 1, 0, 0)]
    analysis = analyze(spark, [str(tmp_path / "rotated")], at=AT, partition=partition)
    got = analysis.collect()
    analysis.unpersist()
    assert not rows_equal(expected, got), rows_equal(expected, got)
