"""Compact output rows for the reference, and the tables written from them.

`analyze_local` used to keep every output row as a dict and every route contribution as a
`Contribution` with its own ``route_json`` string until the end, then build the Arrow
tables in one go: at 10 M records that was about 2 GB, most of it the same few thousand
routes serialised again for every change (a topic's route JSON is ≈ 1.6 kB, and 229 k
route changes at 10 M records have about 3 000 distinct ones). `TableStore` keeps a row as
a tuple in column order, with its repeated values (name servers, brokers, topics,
reasons, route JSON, digests, group lists) interned: one object per distinct value.
`TableStore.write` sorts each table by its key (exactly `sort_rows`'s order) and writes it
as Parquet a batch of rows at a time, releasing each table once written: `write_parquet`,
the pipeline's one Parquet writer in this process (`write_local_tables` writes dict rows
through it; Spark's tables are written by Spark).
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

from ._schema import SUMMARY_COLUMNS, TABLES, Row, Table, reason_key, sort_value

__all__ = ["BATCH_BYTES", "BATCH_ROWS", "TableStore", "sort_tuples", "write_local_tables",
           "write_parquet"]

#: A row kept compact: its values in column order (lists stored as tuples).
Values = tuple[Any, ...]

#: Bytes of text per Parquet row group (one Arrow batch built at a time) in
#: `TableStore.write`, and the bounds on its rows: a batch of route changes (≈ 1.6 kB of
#: JSON each) is ≈ 5 000 rows; the writer's buffers grow with the batch, not the table.
BATCH_BYTES = 8 << 20
BATCH_ROWS = (1_024, 65_536)

#: Columns whose values are mostly distinct: not worth interning.
_UNIQUE = frozenset({("rejected", "text"), ("rejected", "line"), ("rejected", "seq")})


def _full_key(table: Table) -> Callable[[Values], tuple[Any, ...]]:
    """`sort_rows`'s key (the table's key, then every other column) on a tuple row."""
    names = table.names
    order = [names.index(n) for n in (*table.key, *(n for n in names if n not in table.key))]
    return lambda r: tuple(sort_value(r[i]) for i in order)


def sort_tuples(table: Table, rows: list[Values]) -> None:
    """Sort tuple rows (in column order) in place, in exactly `sort_rows`'s order.

    Sorts on the key columns' plain values (no per-row key of pairs: less memory), falls
    back to `sort_rows`'s None-first values if a None is met, then orders each run of
    equal keys by every column."""
    names = table.names
    where = [names.index(n) for n in table.key]
    plain: Callable[[Values], Any] = itemgetter(*where)
    key: Callable[[Values], Any] = plain
    try:
        rows.sort(key=plain)
    except TypeError:  # a None among the key values
        def key(r: Values) -> tuple[tuple[int, Any], ...]:
            return tuple(sort_value(r[i]) for i in where)
        rows.sort(key=key)
    full = _full_key(table)
    start = 0
    while start < len(rows):
        end = start + 1
        first = key(rows[start])
        while end < len(rows) and key(rows[end]) == first:
            end += 1
        if end - start > 1:
            rows[start:end] = sorted(rows[start:end], key=full)
        start = end


class TableStore:
    """Every output table's rows as tuples in column order (lists stored as tuples),
    repeated strings and group lists interned."""

    def __init__(self) -> None:
        self.rows: dict[str, list[Values]] = {name: [] for name in TABLES}
        self._names = {name: t.names for name, t in TABLES.items()}
        self._arrays = {name: frozenset(i for i, c in enumerate(t.columns)
                                        if c.type == "array<string>")
                        for name, t in TABLES.items()}
        self._interned = {name: tuple(
            c.type in ("string", "array<string>") and (name, c.name) not in _UNIQUE
            for c in t.columns) for name, t in TABLES.items()}
        self._pool: dict[Any, Any] = {}

    def intern(self, value: Any) -> Any:
        """The one stored object equal to ``value`` (lists become tuples)."""
        if value is None:
            return None
        if isinstance(value, list | set):
            value = tuple(value)
        return self._pool.setdefault(value, value)

    def add(self, table: str, row: Mapping[str, Any]) -> None:
        """Store one row (a dict with the table's columns; a missing column is None)."""
        pool = self._pool.setdefault
        values: list[Any] = []
        for name, shared in zip(self._names[table], self._interned[table], strict=True):
            value = row.get(name)
            if shared and value is not None:
                if isinstance(value, list):
                    value = tuple(value)
                value = pool(value, value)
            values.append(value)
        self.rows[table].append(tuple(values))

    def extend(self, table: str, rows: Iterator[Row] | list[Row]) -> None:
        for row in rows:
            self.add(table, row)

    def dicts(self, table: str) -> Iterator[Row]:
        """The stored rows of ``table`` as dicts, in the order they were added."""
        yield from self._dicts(table, self.rows[table])

    def _dicts(self, table: str, rows: list[Values],
               columns: tuple[str, ...] | None = None) -> list[Row]:
        names = self._names[table]
        arrays = self._arrays[table]
        keep = range(len(names)) if columns is None else [names.index(c) for c in columns]
        return [{names[i]: (list(r[i]) if i in arrays and r[i] is not None else r[i])
                 for i in keep} for r in rows]

    def tables(self) -> dict[str, list[Row]]:
        """Every table as sorted dict rows (`analyze_local`'s return value); empties the
        store table by table."""
        out: dict[str, list[Row]] = {}
        for name in TABLES:
            rows = self.rows[name]
            sort_tuples(TABLES[name], rows)
            out[name] = self._dicts(name, rows)
            self.rows[name] = []
        return out

    def write(self, out_dir: Path,
              collected: Mapping[str, tuple[str, ...] | None] = SUMMARY_COLUMNS
              ) -> dict[str, list[Row]]:
        """Write every table as ``out_dir/<table>/part-00000.parquet`` (the layout of
        `write_local_tables`), sorted, `BATCH_ROWS` rows at a time; return the rows the
        summary and the report use: for each table of ``collected``, its rows with those
        columns (None: all), and ``rejected_groups`` (rejected lines counted by file and
        reason, as `Analysis.summary_rows` returns them). Empties the store. O(rows log
        rows) for the sorts, O(rows) to write."""
        out: dict[str, list[Row]] = {}
        for name, table in TABLES.items():
            rows = self.rows[name]
            sort_tuples(table, rows)
            write_parquet(table, rows, out_dir / name)
            if name in collected:
                out[name] = self._dicts(name, rows, collected[name])
            if name == "rejected":
                source, reason = table.names.index("source"), table.names.index("reason")
                counted = Counter((r[source], reason_key(r[reason])) for r in rows)
                out["rejected_groups"] = [{"source": f, "reason": k, "lines": n}
                                          for (f, k), n in counted.items()]
            self.rows[name] = []
            del rows
        return out


def write_local_tables(tables: Mapping[str, list[Row]], out_dir: Path) -> None:
    """Write dict rows (`analyze_local`'s tables, already sorted) as Parquet, the layout
    Spark writes (``out_dir/<table>/part-00000.parquet``), through `write_parquet`.
    O(rows)."""
    for name, rows in tables.items():
        names = TABLES[name].names
        write_parquet(TABLES[name], [tuple(row.get(c) for c in names) for row in rows],
                      out_dir / name)


def write_parquet(table: Table, rows: Sequence[Values], target: Path) -> None:
    """Write tuple rows of ``table`` (values in column order; lists or tuples for
    ``array<string>``) into ``target/part-00000.parquet``, replacing ``target``, one row
    group of `_batch_rows` rows at a time: the writer's buffers grow with a batch, not with
    the table. O(rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    schema = table.arrow_schema()
    batch = _batch_rows(rows)
    with pq.ParquetWriter(target / "part-00000.parquet", schema) as writer:
        for start in range(0, len(rows), batch):
            chunk = rows[start:start + batch]
            arrays = [pa.array([r[i] for r in chunk], type=field.type)
                      for i, field in enumerate(schema)]
            writer.write_batch(pa.record_batch(arrays, schema=schema))


def _batch_rows(rows: Sequence[Values]) -> int:
    """Rows per batch: `BATCH_BYTES` over the text width of the first rows, within
    `BATCH_ROWS`."""
    low, high = BATCH_ROWS
    sample = rows[:1_000]
    if not sample:
        return high
    width = sum(len(v) for r in sample for v in r if isinstance(v, str)) / len(sample)
    return max(low, min(high, int(BATCH_BYTES / max(width, 1.0))))
