"""The replay tasks' own ``route_changes`` files (``_change_files.py``): each task's file
sorted by the table's key, and the merge into the table's one file sorted by the key, equal
to sorting every row at once (any split of the rows over files, empty files, row groups
cut anywhere)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routing.pipeline import _change_files
from routing.pipeline._change_files import ChangeFiles, merge_change_files
from routing.pipeline._schema import TABLES

NAMES = TABLES["route_changes"].names


def _row(ns: str, topic: str, at_ms: int, seq: int, text: str) -> dict[str, Any]:
    return {"ns": ns, "topic": topic, "at_ms": at_ms, "seq": seq, "present": bool(seq % 2),
            "groups": sorted({f"g{seq % 3}", f"g{at_ms % 2}"}), "read_queue_count": seq,
            "writable_queue_count": at_ms, "producer_writable_queue_count": 0,
            "digest": None if seq % 5 == 0 else f"d{seq}", "route_json": text}


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[c] for c in TABLES["route_changes"].key)


rows = st.lists(
    st.builds(_row, st.sampled_from(["ns-0", "ns-1"]), st.sampled_from(["T", "a", "Ω", "b"]),
              st.integers(0, 50), st.integers(0, 10_000),
              st.text(max_size=40)),
    max_size=60, unique_by=_key)


@settings(max_examples=40, deadline=None)
@given(rows=rows, cuts=st.lists(st.integers(0, 60), max_size=6),
       group=st.integers(1, 300), run=st.integers(1, 2_000))
def test_merged_files_hold_every_row_sorted_by_the_key(
        tmp_path_factory: pytest.TempPathFactory, rows: list[dict[str, Any]],
        cuts: list[int], group: int, run: int) -> None:
    folder = tmp_path_factory.mktemp("changes")
    files = ChangeFiles(folder=str(folder))
    bounds = [0, *sorted(min(c, len(rows)) for c in cuts), len(rows)]
    old = (_change_files.ROW_GROUP_BYTES, _change_files.ROW_GROUP_ROWS,
           _change_files.RUN_BYTES)
    # row groups cut after a few characters, or a row or two; runs after a few rows
    (_change_files.ROW_GROUP_BYTES, _change_files.ROW_GROUP_ROWS,
     _change_files.RUN_BYTES) = group, 1 + group % 3, run
    try:
        for task, (lo, hi) in enumerate(itertools.pairwise(bounds)):
            files.write(task, rows[lo:hi])
    finally:
        (_change_files.ROW_GROUP_BYTES, _change_files.ROW_GROUP_ROWS,
         _change_files.RUN_BYTES) = old
    paths = files.files(range(len(bounds) - 1))
    assert len(paths) >= len(bounds) - 1  # a run at least per task, empty or not
    for path in paths:  # each run is sorted by the key
        got = pq.read_table(path).to_pylist()
        assert [_key(r) for r in got] == sorted(_key(r) for r in got)
    out = merge_change_files(paths, folder / "route_changes")
    assert out == folder / "route_changes" / "part-00000.parquet"
    merged = pq.read_table(out)
    assert merged.schema.names == list(NAMES)
    assert merged.to_pylist() == sorted(rows, key=_key)
    assert sorted(os.listdir(folder / "route_changes")) == ["_SUCCESS", "part-00000.parquet"]


def test_a_retried_task_replaces_its_files_whole(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    files = ChangeFiles(folder=str(tmp_path))
    monkeypatch.setattr(_change_files, "RUN_BYTES", 1)  # a run per row
    files.write(3, [_row("ns", "T", 1, 1, "x"), _row("ns", "T", 2, 2, "y")])
    assert len(files.files([3])) == 2
    files.write(3, [_row("ns", "T", 1, 1, "x")])  # the retry's rows win, nothing appended
    assert [r["seq"] for p in files.files([3]) for r in pq.read_table(p).to_pylist()] == [1]
    assert os.listdir(tmp_path) == ["task-00003"]  # nothing left aside
    half = files.runs(4)  # an attempt that died before `finish`: not among the files
    half.add(_row("ns", "T", 1, 1, "x"))
    assert files.files([3]) == [os.path.join(files.path(3), "run-00000.parquet")]


def test_a_task_s_memory_is_one_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_change_files, "RUN_BYTES", 10)
    runs = ChangeFiles(folder=str(tmp_path)).runs(0)
    for seq in range(7):
        runs.add(_row("ns", "T", 100 - seq, seq, "0123456789"))
        assert len(runs._held) == 0  # each row's 10 characters fill a run
    target = runs.finish()
    assert sorted(os.listdir(target)) == [f"run-{k:05d}.parquet" for k in range(7)]


def test_merging_into_an_existing_folder_replaces_it(tmp_path: Path) -> None:
    files = ChangeFiles(folder=str(tmp_path / "t"))
    os.makedirs(files.folder)
    target = tmp_path / "out" / "route_changes"
    target.mkdir(parents=True)
    (target / "part-00007.parquet").write_bytes(b"old")
    files.write(0, [])
    files.write(1, [_row("n", "T", 1, 1, "r")])
    merge_change_files(files.files([0, 1]), target)
    assert sorted(os.listdir(target)) == ["_SUCCESS", "part-00000.parquet"]
    assert pq.read_table(target).num_rows == 1


def test_unpersist_removes_the_folder(tmp_path: Path) -> None:
    files = ChangeFiles(folder=str(tmp_path / "t"))
    os.makedirs(files.folder)
    files.write(0, [_row("n", "T", 1, 1, "r")])
    files.unpersist()
    assert not (tmp_path / "t").exists()
    files.unpersist()  # twice is fine
