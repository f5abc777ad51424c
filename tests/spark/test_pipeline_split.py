"""``partition="ns"`` splits each name server's replay at its snapshots (one task per
segment, ``_spark_segments.py``): every table equals the reference's, row for row, on
simulator journals with faults and name-server restarts, behind dirty boundaries (a
damaged snapshot, a line lost before one: continuations), on a journal rotated into
several files, and where the split does not apply and the whole-name-server path runs
instead (no snapshot, gzip, a line of another name server, a file of no name server)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest

from pipeline_scenarios import damage
from routing.pipeline import _spark_segments, analyze, analyze_local, analyze_local_to
from routing.pipeline._schema import TABLES, rows_equal, sort_rows
from routing.pipeline._spark_rows import KILL_WORKER_ENV
from routing.sim import SimConfig, simulate

AT = (600_000, 1_800_000)


def _journals(seed: int, *, every_ms: int | None = 300_000, duration_ms: int = 2_700_000,
              faults: str = "heavy") -> dict[str, list[str]]:
    result = simulate(SimConfig(groups=4, slaves=1, nameservers=3, duration_ms=duration_ms,
                                seed=seed, faults=faults, snapshot_every_ms=every_ms))
    return {ns: result.journal_lines(ns) for ns in result.nameserver_ids}


def _write(folder: Path, files: dict[str, list[str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, lines in files.items():
        data = ("\n".join(lines) + "\n").encode("utf-8")
        path = folder / name
        path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return folder


def _equal(spark: Any, folder: Path, partition: str = "ns") -> dict[str, int]:
    expected = analyze_local(folder, at=AT)
    analysis = analyze(spark, str(folder), at=AT, partition=partition)
    try:
        got = analysis.collect()
    finally:
        analysis.unpersist()
    assert not rows_equal(expected, got)
    assert expected["sessions"] and expected["route_changes"] and expected["expiries"]
    return dict(analysis.partitions)


def _snapshots(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if '"op":"snapshot"' in line]


def test_journals_with_snapshots_and_restarts_replay_as_one_task_per_segment(
        spark: Any, tmp_path: Path) -> None:
    journals = _journals(5)
    assert any('"op":"header"' in line for lines in journals.values() for line in lines[1:])
    folder = _write(tmp_path, {f"{ns}.jsonl": lines for ns, lines in journals.items()})
    parts = _equal(spark, folder)
    assert parts == {ns: len(_snapshots(lines)) + 1 for ns, lines in journals.items()}
    assert all(n >= 9 for n in parts.values())
    assert set(_equal(spark, folder, "ns-whole").values()) == {1}  # the switch: whole


def _damage(journals: dict[str, list[str]]) -> None:
    """Dirty boundaries in every name server's journal: ns-0 two damaged snapshot lines,
    ns-1 a table definition lost, ns-2 bad lines (`damage`)."""
    lines = journals["ns-0"]
    cut = _snapshots(lines)[3]
    lines[cut] = lines[cut][:200]  # not JSON: not a snapshot line any more
    at = _snapshots(lines)[5]
    doc = json.loads(lines[at])
    doc["args"]["format"] = 9  # still a snapshot line, rejected by the reader
    lines[at] = json.dumps(doc, separators=(",", ":"))
    lines = journals["ns-1"]
    cut = _snapshots(lines)[4]
    del lines[next(i for i in range(cut - 1, 0, -1) if '"table"' in lines[i])]
    journals["ns-2"] = damage({"x": journals["ns-2"]}, 6)["x"]


def test_dirty_boundaries_are_replayed_again_as_continuations(spark: Any,
                                                              tmp_path: Path) -> None:
    journals = _journals(6)
    segments = {ns: len(_snapshots(lines)) + 1 for ns, lines in journals.items()}
    _damage(journals)
    parts = _equal(spark, _write(tmp_path, {f"{ns}.jsonl": lines
                                            for ns, lines in journals.items()}))
    # each damaged snapshot line makes its boundary dirty: the segment before goes on
    assert 2 <= parts["ns-0"] <= segments["ns-0"] - 2
    # a lost table definition: every later use of it is rejected, no snapshot agrees again
    assert parts["ns-1"] < segments["ns-1"]
    # bad lines (one of a name server without a header among them) split as before
    assert parts["ns-2"] >= segments["ns-2"] - 1


@pytest.mark.parametrize("damaged", [False, True])
def test_few_task_slots_replay_runs_of_neighbouring_segments_equal(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damaged: bool) -> None:
    # 9 tasks for 3 name servers of about 10 segments: 3 runs of neighbouring segments
    # each; behind a dirty boundary a continuation goes on from the run before
    monkeypatch.setattr(_spark_segments, "MIN_TASKS", 9)
    monkeypatch.setattr(_spark_segments, "TASKS_PER_SLOT", 1)
    journals = _journals(6)
    assert all(len(_snapshots(lines)) + 1 >= 9 for lines in journals.values())
    if damaged:
        _damage(journals)
    parts = _equal(spark, _write(tmp_path, {f"{ns}.jsonl": lines
                                            for ns, lines in journals.items()}))
    if damaged:
        assert all(1 <= n <= 3 for n in parts.values()) and parts["ns-1"] < 3
    else:
        assert parts == dict.fromkeys(journals, 3)


def test_journals_without_snapshots_replay_each_name_server_whole(spark: Any,
                                                                  tmp_path: Path) -> None:
    journals = _journals(7, every_ms=None)
    assert not any(_snapshots(lines) for lines in journals.values())
    parts = _equal(spark, _write(tmp_path, {f"{ns}.jsonl": lines
                                            for ns, lines in journals.items()}))
    assert set(parts.values()) == {1}


@pytest.mark.parametrize("cut", ["at a snapshot", "inside a segment"])
def test_a_journal_in_several_files_splits_across_them(spark: Any, tmp_path: Path,
                                                       cut: str) -> None:
    journals = _journals(8, duration_ms=1_800_000)
    files = {f"{ns}.jsonl": lines for ns, lines in journals.items()}
    lines = files.pop("ns-0.jsonl")  # rotated into three files that sort in order
    first, second = _snapshots(lines)[1], _snapshots(lines)[3]
    if cut == "inside a segment":
        first, second = first + 7, second + 3
    files["ns-0.1.jsonl"], files["ns-0.2.jsonl"], files["ns-0.3.jsonl"] = (
        lines[:first], lines[first:second], lines[second:])
    parts = _equal(spark, _write(tmp_path, files))
    assert parts == {ns: len(_snapshots(lines)) + 1 for ns, lines in journals.items()}


@pytest.mark.parametrize("layout", ["gzip", "misrouted line", "no name server first"])
def test_inputs_the_split_does_not_take_are_replayed_whole_and_equal(
        spark: Any, tmp_path: Path, layout: str) -> None:
    journals = _journals(8, duration_ms=1_800_000)
    files = {f"{ns}.jsonl": lines for ns, lines in journals.items()}
    if layout == "gzip":
        files["ns-1.jsonl.gz"] = files.pop("ns-1.jsonl")
    elif layout == "misrouted line":  # a line of ns-2 in ns-1's file
        files["ns-1.jsonl"].insert(_snapshots(files["ns-1.jsonl"])[2] + 5,
                                   journals["ns-2"][40])
    else:  # a file that starts with a line of no name server
        files["ns-2.jsonl"].insert(0, "not json")
    parts = _equal(spark, _write(tmp_path, files))
    assert set(parts.values()) == {1}


def _written(folder: Path) -> dict[str, list[dict[str, Any]]]:
    import pyarrow.parquet as pq

    return {name: sort_rows(table, pq.read_table(folder / name).to_pylist())
            for name, table in TABLES.items()}


def test_the_tasks_write_route_changes_themselves_and_the_written_tables_equal(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a local master the split's tasks write their route changes as files of their own
    (``_change_files.py``), and `Analysis.write` merges the used tasks' files: every
    written table equals the reference's files behind dirty boundaries (continuations
    replace some tasks' files; healthy boundaries between the others), also when the
    first task's Python worker dies and the task runs again; the files are gone after
    `unpersist`."""
    monkeypatch.setattr(_spark_segments, "MIN_TASKS", 9)
    monkeypatch.setattr(_spark_segments, "TASKS_PER_SLOT", 1)
    journals = _journals(6)
    _damage(journals)
    folder = _write(tmp_path / "in", {f"{ns}.jsonl": lines for ns, lines in journals.items()})
    analyze_local_to(tmp_path / "expected", folder, at=AT)
    marker = tmp_path / "killed"
    monkeypatch.setenv(KILL_WORKER_ENV, str(marker))
    analysis = analyze(spark, str(folder), at=AT)
    files = analysis._change_files
    try:
        assert files and all(os.path.exists(f) for f in files)
        chosen = sum(analysis.partitions.values())
        assert len(files) == chosen  # one run file per task whose rows are used
        analysis.write(str(tmp_path / "got"))
    finally:
        analysis.unpersist()
    assert marker.exists()  # a worker did die
    assert not any(os.path.exists(f) for f in files)  # the tasks' folder is removed
    assert not os.path.exists(os.path.dirname(os.path.dirname(files[0])))
    assert sorted(os.listdir(tmp_path / "got" / "route_changes")) == [
        "_SUCCESS", "part-00000.parquet"]
    expected, got = _written(tmp_path / "expected"), _written(tmp_path / "got")
    assert expected["route_changes"]
    assert not rows_equal(expected, got)


def test_whole_files_tasks_write_route_changes_themselves_too(
        spark: Any, tmp_path: Path) -> None:
    """One task per journal file (no snapshots): each task writes its route changes as a
    file of its own, and the written tables equal the reference's; written again with
    ``mode="append"`` (Spark's own writer: the frame read from the tasks' files is written
    like any other table) they equal it too."""
    journals = _journals(7, every_ms=None)
    folder = _write(tmp_path / "in", {f"{ns}.jsonl": lines for ns, lines in journals.items()})
    analyze_local_to(tmp_path / "expected", folder, at=AT)
    analysis = analyze(spark, str(folder), at=AT)
    try:
        assert analysis.partitions == dict.fromkeys(journals, 1)
        assert len(analysis._change_files) == len(journals)  # one file per task
        analysis.write(str(tmp_path / "got"))
        analysis.write(str(tmp_path / "appended"), mode="append")
    finally:
        analysis.unpersist()
    expected = _written(tmp_path / "expected")
    assert expected["route_changes"]
    assert not rows_equal(expected, _written(tmp_path / "got"))
    assert "part-00000.parquet" not in os.listdir(tmp_path / "appended" / "route_changes")
    assert not rows_equal(expected, _written(tmp_path / "appended"))
