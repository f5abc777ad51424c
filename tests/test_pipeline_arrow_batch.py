"""`_schema.arrow_batch`: the column-wise Arrow builder both engines write through must give
what ``RecordBatch.from_pylist`` gives, for any mix of rows naming any of the fields."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

from routing.pipeline._schema import TABLES, arrow_batch  # noqa: E402

SCHEMA = pa.schema([pa.field("name", pa.string()), pa.field("count", pa.int64()),
                    pa.field("flag", pa.bool_()), pa.field("share", pa.float64()),
                    pa.field("groups", pa.list_(pa.string()))])
VALUES: dict[str, Any] = {
    "name": st.none() | st.text(max_size=20),
    "count": st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1),
    "flag": st.none() | st.booleans(),
    "share": st.none() | st.floats(allow_nan=False),
    "groups": st.none() | st.lists(st.text(max_size=5), max_size=3),
}
ROWS = st.lists(st.fixed_dictionaries({}, optional=VALUES), max_size=30)


@given(ROWS)
def test_equals_from_pylist(rows: list[dict[str, Any]]) -> None:
    expected = pa.RecordBatch.from_pylist(rows, schema=SCHEMA)
    got = arrow_batch(rows, SCHEMA)
    assert got.schema == SCHEMA
    assert got.equals(expected), (got.to_pylist(), expected.to_pylist())


def test_a_field_no_row_names_is_null_and_extra_keys_are_ignored() -> None:
    got = arrow_batch([{"name": "a", "other": 1}, {"count": 2}], SCHEMA)
    assert got.to_pylist() == [
        {"name": "a", "count": None, "flag": None, "share": None, "groups": None},
        {"name": None, "count": 2, "flag": None, "share": None, "groups": None}]


def test_a_wrong_type_is_refused_as_from_pylist_refuses_it_naming_the_field() -> None:
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)) as caught:
        arrow_batch([{"name": "a"}, {"count": "seven"}], SCHEMA)
    assert str(caught.value).startswith("count: ")
    with pytest.raises(OverflowError, match=r"^count: "):
        arrow_batch([{"count": 2**64}], SCHEMA)


def test_a_table_schema_round_trips() -> None:
    schema = TABLES["expiries"].arrow_schema()
    row: dict[str, Any] = dict.fromkeys(TABLES["expiries"].names)
    row.update(ns="ns-a", broker_addr="10.0.0.1:10911", seq=3)
    assert arrow_batch([row], schema).to_pylist() == [row]
