"""`_spark_rows.packed` and `unpack_step`: the read stage's output with ``partition="ns"``
(route changes narrowed to their table's columns, every other row packed as Arrow IPC) must
carry exactly the rows the wide step gave, nothing lost, nothing moved between pieces.
Without Spark: the steps are plain functions of Arrow batches."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

from routing.pipeline._schema import TABLES  # noqa: E402
from routing.pipeline._spark_rows import (  # noqa: E402
    PIECE_CHANGES,
    PIECE_REST,
    READ_DDL,
    packed,
    to_batches,
    unpack_step,
    wide_schema,
)

CHANGE_NAMES = list(TABLES["route_changes"].names)


def change(i: int) -> dict[str, Any]:
    return {"kind": "row", "tbl": "route_changes", "ns": "ns-a", "topic": f"T{i % 3}",
            "at_ms": 1_000 + i, "seq": i, "present": i % 2 == 0, "groups": ["g1", "g2"],
            "read_queue_count": 8, "writable_queue_count": 4, "digest": f"d{i}",
            "route_json": "{" + "x" * (i % 50) + "}"}


OTHERS = [
    {"kind": "row", "tbl": "sessions", "ns": "ns-a", "cluster": "c", "broker_addr": "h:1"},
    {"kind": "row", "tbl": "expiries", "ns": "ns-a", "detected_ms": 5},
    {"kind": "stats", "payload": '{"ns": "ns-a"}'},  # tbl null: not a route change
    {"kind": "counts", "payload": "{}"},
    {"kind": "misrouted", "tbl": "route_changes"},  # the table's name, but not a row
]


def run_packed(rows: list[dict[str, Any]]) -> list[Any]:
    step = packed(lambda _batches: to_batches(iter(rows)))
    return list(step(iter(())))


@given(st.lists(st.one_of(st.integers(0, 500).map(change), st.sampled_from(OTHERS)),
                max_size=60))
def test_every_row_lands_in_its_piece_once(rows: list[dict[str, Any]]) -> None:
    out = run_packed(rows)
    changes: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for batch in out:
        assert batch.schema.names == ["piece", *CHANGE_NAMES, "ipc"]
        for row in batch.to_pylist():
            if row["piece"] == PIECE_CHANGES:
                assert row["ipc"] is None
                changes.append({n: row[n] for n in CHANGE_NAMES})
            else:
                assert row["piece"] == PIECE_REST and row["ipc"] is not None
                assert all(row[n] is None for n in CHANGE_NAMES)
                rest_batch = pa.RecordBatch.from_arrays([pa.array([row["ipc"]], pa.binary())],
                                                        names=["ipc"])
                for unpacked in unpack_step()([rest_batch]):
                    assert unpacked.schema == wide_schema()
                    rest += unpacked.to_pylist()
    wide = [r for b in to_batches(iter(rows)) for r in b.to_pylist()]
    is_change = [r["kind"] == "row" and r["tbl"] == "route_changes" for r in wide]
    pairs = list(zip(wide, is_change, strict=True))
    assert changes == [{n: r[n] for n in CHANGE_NAMES} for r, c in pairs if c]
    assert rest == [r for r, c in pairs if not c]


def test_no_rows_no_batches_and_the_ddl_names_the_columns() -> None:
    assert run_packed([]) == []
    assert READ_DDL.startswith("`piece` string, `ns` string")
    assert READ_DDL.endswith("`ipc` binary")
    assert [c.split("`")[1] for c in READ_DDL.split(", ")] == ["piece", *CHANGE_NAMES, "ipc"]


def test_route_texts_of_several_megabytes_survive_the_round_trip() -> None:
    big = dict(change(1), route_json="[" + "r" * 3_000_000 + "]")
    rows = [big, OTHERS[0]]
    out = run_packed(rows)
    got = [r for b in out for r in b.to_pylist()]
    assert [r["piece"] for r in got] == [PIECE_CHANGES, PIECE_REST]
    assert got[0]["route_json"] == big["route_json"]
