"""The whole-file step reads each file in its Python worker: paths must not depend on the
worker's working directory (a cluster's executors run elsewhere than the driver)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")

from routing.pipeline._spark_replay import local_file_step  # noqa: E402
from routing.pipeline._spark_rows import rows_of  # noqa: E402


def test_a_relative_path_is_resolved_where_the_step_is_built(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    journal = tmp_path / "in" / "ns-0.jsonl"
    journal.parent.mkdir()
    journal.write_text('not json\n')
    monkeypatch.chdir(tmp_path)
    step = local_file_step({0: "in/ns-0.jsonl"}, {0: "ns-0"})
    elsewhere = tmp_path / "executor"
    elsewhere.mkdir()
    os.chdir(elsewhere)  # the worker's directory: the relative path means nothing here
    batches = list(step([pa.RecordBatch.from_pylist([{"id": 0}])]))
    rows = [dict(zip(("kind", "tbl", "source", "line"), r, strict=True))
            for b in batches for r in rows_of([b], ("kind", "tbl", "source", "line"))]
    rejected = [r for r in rows if r["tbl"] == "rejected"]
    # the line was read (and rejected with the name the user gave), not a missing file
    assert [(r["source"], r["line"]) for r in rejected] == [("in/ns-0.jsonl", 1)]
