"""The Spark pipeline reads a name server's journal across its restarts as the reference
does: journals whose runs number their lines from 0 again (written before 0.2) and journals
whose runs go on with the numbers, in one folder, split by broker group and by name
server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from routing.pipeline import analyze, analyze_local
from routing.pipeline._schema import rows_equal
from routing.pipeline._summary import summarize_analysis, summarize_rows
from test_journal_restarts import KILLS, _restarted_journals

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("partition", ["group", "ns"])
def test_restarted_name_servers_equal_the_reference(spark: Any, tmp_path: Path,
                                                    partition: str) -> None:
    _restarted_journals(tmp_path, KILLS, resume=False, ns_id="ns-old")
    _restarted_journals(tmp_path, KILLS[::-1], resume=True, ns_id="ns-new")
    expected = analyze_local(tmp_path, at=(1_700_000_100_000,))
    assert [(r["ns"], r["restarts"], r["gaps"]) for r in expected["name_servers"]] == [
        ("ns-new", 10, 0), ("ns-old", 10, 0)]
    assert len(expected["rejected"]) == 2 * sum(KILLS)  # the lines each kill cut short
    assert {r["end_reason"] for r in expected["sessions"]} >= {"restart", "unregistered"}
    analysis = analyze(spark, [str(tmp_path)], at=(1_700_000_100_000,), partition=partition)
    got = analysis.collect()
    partitions = dict(analysis.partitions)
    summary = summarize_analysis(analysis)
    analysis.unpersist()
    assert not rows_equal(expected, got), rows_equal(expected, got)
    # the rejected lines by kind, first and last line included, agree too
    assert summary == summarize_rows(expected)
    assert [(k["reason"].split(":")[0], k["lines"]) for k in summary.rejected_kinds] == [
        ("malformed JSON", 2 * sum(KILLS))]
    if partition == "group":  # the renumbered runs were replayed in several components
        assert partitions["ns-old"] > 1
