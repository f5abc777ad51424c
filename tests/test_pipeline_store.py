"""The reference's compact rows (`routing.pipeline._store`) and ``routing analyze --local``'s
streaming path (`analyze_local_to`): the Parquet tables it writes equal, row for row, what
`write_local_tables` writes from `analyze_local`'s dicts, and its rows give the same
summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_scenarios import bad_folder, damage, operations, play
from routing.pipeline import _store, analyze_local, analyze_local_to
from routing.pipeline._schema import TABLES, Table, sort_rows
from routing.pipeline._store import TableStore, sort_tuples, write_local_tables
from routing.pipeline._summary import summarize_rows
from routing.sim import SimConfig, simulate

Tables = dict[str, list[dict[str, Any]]]


def _parquet(folder: Path) -> Tables:
    return {name: pq.read_table(folder / name).to_pylist() for name in TABLES}


def _same_as_analyze_local(sources: Any, tmp: Path, at: tuple[int, ...] = ()) -> Tables:
    """Run both paths on ``sources``; assert equal Parquet tables and summaries."""
    expected = analyze_local(sources, at=at)
    write_local_tables(expected, tmp / "dicts")
    collected = analyze_local_to(tmp / "stream", sources, at=at)
    written = _parquet(tmp / "stream")
    assert written == _parquet(tmp / "dicts")
    assert written == expected  # sorted as analyze_local sorts
    assert summarize_rows(collected) == summarize_rows(expected)
    assert [{k: r[k] for k in ("ns", "topic", "at_ms", "seq", "present", "groups",
                               "writable_queue_count")} for r in expected["route_changes"]
            ] == collected["route_changes"]
    return expected


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(operations(min_size=20, max_size=120), st.integers(0, 2), st.integers(0, 5))
def test_the_streaming_path_writes_analyze_locals_tables(
        tmp_path_factory: pytest.TempPathFactory, ops: list[Any], config: int, seed: int
) -> None:
    journals = play(ops, nameservers=3, config=config)
    if seed:
        journals = damage(journals, seed)
    _same_as_analyze_local(journals, tmp_path_factory.mktemp("ops"), at=(20_000, 150_000))


def test_bad_inputs_and_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_store, "BATCH_ROWS", (7, 7))  # many row groups per table
    folder = bad_folder(tmp_path)
    tables = _same_as_analyze_local(folder, tmp_path, at=(1_000,))
    assert {r["stage"] for r in tables["rejected"]} >= {"skipped", "read"}
    assert pq.ParquetFile(next((tmp_path / "stream" / "rejected").iterdir())
                          ).num_row_groups == -(-len(tables["rejected"]) // 7)


def test_simulated_journals_with_faults(tmp_path: Path) -> None:
    journals = tmp_path / "journals"
    simulate(SimConfig(groups=4, slaves=1, nameservers=3, duration_ms=1_800_000, seed=5,
                       faults="heavy"), out_dir=journals)
    tables = _same_as_analyze_local(journals, tmp_path, at=(600_000,))
    assert tables["route_changes"] and tables["disagreement"] and tables["routes_at"]


def test_repeated_values_are_stored_once() -> None:
    store = TableStore()
    for at in range(3):
        store.add("route_changes", {
            "ns": "ns-0", "topic": "T", "at_ms": at, "seq": at, "present": True,
            "groups": ["a", "b"], "read_queue_count": 4, "writable_queue_count": 4,
            "digest": "d" * 16, "route_json": "".join(['{"brokerDatas"', ":[]}"])})
    rows = store.rows["route_changes"]
    for column in (0, 1, 5, 8, 9):
        assert len({id(r[column]) for r in rows}) == 1, TABLES["route_changes"].names[column]
    assert store.tables()["route_changes"][0]["groups"] == ["a", "b"]  # lists again


def _values(column_type: str) -> Any:
    base: Any = {"string": st.sampled_from(["a", "b", "c"]), "long": st.integers(-2, 2),
                 "double": st.sampled_from([0.0, 0.5, 1.0]), "boolean": st.booleans(),
                 "array<string>": st.lists(st.sampled_from(["a", "b"]), max_size=2)
                 }[column_type]
    return st.none() | base


@st.composite
def _table_rows(draw: Any) -> tuple[Table, list[dict[str, Any]]]:
    table = draw(st.sampled_from(list(TABLES.values())))
    row = st.fixed_dictionaries({c.name: _values(c.type) for c in table.columns})
    return table, draw(st.lists(row, max_size=30))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(_table_rows())
def test_tuples_sort_exactly_as_sort_rows(case: tuple[Table, list[dict[str, Any]]]) -> None:
    table, rows = case
    store = TableStore()
    for row in rows:
        store.add(table.name, row)
    assert store.tables()[table.name] == sort_rows(table, rows)
    plain = [tuple(r[n] for n in table.names) for r in rows]
    sort_tuples(table, plain)  # lists stay lists here: compared as sort_rows compares them
    assert [dict(zip(table.names, r, strict=True)) for r in plain] == sort_rows(table, rows)
