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

import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from operator import itemgetter
from pathlib import Path
from typing import Any, overload

from ._schema import SUMMARY_COLUMNS, TABLES, Row, Table, group_rejected, sort_value
from ._spill import RouteTexts, SortedRuns, SpillFolder

__all__ = ["BATCH_BYTES", "BATCH_ROWS", "LAZY", "POOL_MAX", "SPILL_ROWS", "ParquetRows",
           "TableStore", "sort_tuples", "text_batches", "tuple_batch", "write_local_tables",
           "write_parquet"]

#: A row kept compact: its values in column order (lists stored as tuples).
Values = tuple[Any, ...]

#: Bytes of text per Parquet row group (one Arrow batch built at a time) in
#: `TableStore.write`, and the bounds on its rows: a batch of route changes (≈ 1.6 kB of
#: JSON each) is ≈ 5 000 rows; the writer's buffers grow with the batch, not the table.
BATCH_BYTES = 8 << 20
BATCH_ROWS = (64, 65_536)

#: Rows of one table `TableStore` holds in memory; more go to sorted runs on disk. A
#: ``route_changes`` row without its text is ≈ 0.3 kB: ≈ 20 MB a full table buffer.
SPILL_ROWS = 65_536

#: Distinct values `TableStore` interns before it empties its pool and starts again.
POOL_MAX = 32_768

#: The tables `TableStore.write` returns as `ParquetRows` (read back when iterated): they
#: grow with the journal and the summary only counts them.
LAZY = frozenset({"route_changes", "routes_at"})

#: Columns not interned: mostly distinct values, or (``route_json``) kept on disk once
#: per distinct text by `RouteTexts` instead (interned, every distinct text stayed in memory).
_UNIQUE = frozenset({("rejected", "text"), ("rejected", "line"), ("rejected", "seq"),
                     ("route_changes", "route_json")})


def _full_key(table: Table, text: Callable[[Any], Any] | None = None
              ) -> Callable[[Values], tuple[Any, ...]]:
    """`sort_rows`'s key (the table's key, then every other column) on a tuple row;
    ``text`` turns a ``route_changes`` row's route handle back into its text."""
    names = table.names
    order = [names.index(n) for n in (*table.key, *(n for n in names if n not in table.key))]
    if text is not None and "route_json" in names:
        at = names.index("route_json")
        return lambda r: tuple(sort_value(text(r[i]) if i == at and r[i] is not None
                                          else r[i]) for i in order)
    return lambda r: tuple(sort_value(r[i]) for i in order)


class _Tail:
    """The rest of a row's sort key, computed only when the key columns tie (rarely)."""

    __slots__ = ("full", "row")

    def __init__(self, row: Values, full: Callable[[Values], tuple[Any, ...]]) -> None:
        self.row, self.full = row, full

    def __lt__(self, other: _Tail) -> bool:
        return self.full(self.row) < other.full(other.row)


def _merge_key(table: Table, full: Callable[[Values], tuple[Any, ...]]
               ) -> Callable[[Values], tuple[Any, ...]]:
    """`_full_key`'s order, with the columns after the key compared only on a tie."""
    where = [table.names.index(n) for n in table.key]
    return lambda r: (*(sort_value(r[i]) for i in where), _Tail(r, full))


def sort_tuples(table: Table, rows: list[Values],
                full: Callable[[Values], tuple[Any, ...]] | None = None) -> None:
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
    full = full or _full_key(table)
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
    repeated strings and group lists interned; at most ``limit`` rows of a table in
    memory (``rows``), the rest in sorted runs on disk (`SortedRuns`); route texts on disk
    once per digest (`RouteTexts`), a row holding its text's handle. ``spill_dir``: where
    the temporary folder goes (default: the system's). Memory: O(``limit`` × tables +
    distinct routes), whatever the number of rows."""

    def __init__(self, *, limit: int = SPILL_ROWS,
                 spill_dir: str | os.PathLike[str] | None = None) -> None:
        self.folder = SpillFolder(spill_dir)
        self.texts = RouteTexts(self.folder)
        fulls = {name: _full_key(t, self._text) for name, t in TABLES.items()}
        self._runs = {name: SortedRuns(_merge_key(t, fulls[name]), self.folder, limit=limit,
                                       name=name, sort=partial(sort_tuples, t, full=fulls[name]))
                      for name, t in TABLES.items()}
        self._names = {name: t.names for name, t in TABLES.items()}
        self._arrays = {name: frozenset(i for i, c in enumerate(t.columns)
                                        if c.type == "array<string>")
                        for name, t in TABLES.items()}
        self._interned = {name: tuple(
            c.type in ("string", "array<string>") and (name, c.name) not in _UNIQUE
            for c in t.columns) for name, t in TABLES.items()}
        self._pool: dict[Any, Any] = {}
        names = TABLES["route_changes"].names
        self._text_at, self._digest_at = names.index("route_json"), names.index("digest")

    @property
    def rows(self) -> dict[str, list[Values]]:
        """The rows of each table held in memory (not yet spilled), in the order added."""
        return {name: runs.buffer for name, runs in self._runs.items()}

    def _text(self, handle: Any) -> str:
        return self.texts.get(handle)

    def count(self, table: str) -> int:
        """Rows of ``table`` stored (in memory or spilled)."""
        return self._runs[table].count

    def intern(self, value: Any) -> Any:
        """The one stored object equal to ``value`` (lists become tuples); the pool is
        emptied past `POOL_MAX` values (interning saves memory, it is never needed)."""
        if value is None:
            return None
        if isinstance(value, list | set):
            value = tuple(value)
        if len(self._pool) >= POOL_MAX:
            self._pool.clear()
        return self._pool.setdefault(value, value)

    def add(self, table: str, row: Mapping[str, Any]) -> None:
        """Store one row (a dict with the table's columns; a missing column is None)."""
        if len(self._pool) >= POOL_MAX:
            self._pool.clear()
        pool = self._pool.setdefault
        values: list[Any] = []
        for name, shared in zip(self._names[table], self._interned[table], strict=True):
            value = row.get(name)
            if shared and value is not None:
                if isinstance(value, list):
                    value = tuple(value)
                value = pool(value, value)
            values.append(value)
        if table == "route_changes" and values[self._text_at] is not None:
            text = values[self._text_at]  # kept on disk once, by digest and text's hash
            values[self._text_at] = self.texts.put(
                (values[self._digest_at], len(text), hash(text)), text)
        self._runs[table].add(tuple(values))

    def extend(self, table: str, rows: Iterator[Row] | list[Row]) -> None:
        for row in rows:
            self.add(table, row)

    def dicts(self, table: str) -> Iterator[Row]:
        """Every stored row of ``table`` as a dict, kept (spilled runs first, each sorted,
        then the rows in memory in the order added; route texts as handles). O(rows),
        memory a block."""
        for row in self._runs[table]:
            yield from self._dicts(table, (row,))

    def sorted_rows(self, table: str) -> Iterator[Values]:
        """The rows of ``table`` in `sort_rows`'s order, route texts in place of their
        handles; empties the table. O(rows log rows); memory: a block per run."""
        rows = self._runs[table].sorted()
        if table != "route_changes":
            return rows
        at, text = self._text_at, self.texts.get
        return (r if r[at] is None else (*r[:at], text(r[at]), *r[at + 1:]) for r in rows)

    def _dicts(self, table: str, rows: Iterable[Values],
               columns: tuple[str, ...] | None = None) -> list[Row]:
        names = self._names[table]
        arrays = self._arrays[table]
        keep = range(len(names)) if columns is None else [names.index(c) for c in columns]
        return [{names[i]: (list(r[i]) if i in arrays and r[i] is not None else r[i])
                 for i in keep} for r in rows]

    def tables(self) -> dict[str, list[Row]]:
        """Every table as sorted dict rows (`analyze_local`'s return value); empties the
        store table by table."""
        out = {name: self._dicts(name, self.sorted_rows(name)) for name in TABLES}
        self.close()
        return out

    def write(self, out_dir: Path,
              collected: Mapping[str, tuple[str, ...] | None] = SUMMARY_COLUMNS
              ) -> dict[str, Sequence[Row]]:
        """Write every table as ``out_dir/<table>/part-00000.parquet`` (the layout of
        `write_local_tables`), sorted, a batch of rows at a time (`write_parquet`); return
        the rows the summary and the report use: for each table of ``collected``, its rows
        with those columns (None: all), and ``rejected_groups`` (rejected lines counted by
        file and reason, as `Analysis.summary_rows` returns them). Tables of `LAZY` are
        returned as `ParquetRows`, read back from their file when iterated. Empties the
        store. O(rows log rows) for the sorts, O(rows) to write."""
        out: dict[str, Sequence[Row]] = {}
        for name, table in TABLES.items():
            rows: Iterable[Values] = self.sorted_rows(name)
            if name not in LAZY and (name in collected or name == "rejected"):
                rows = list(rows)  # returned as dicts below
            path = write_parquet(table, rows, out_dir / name)
            if name in LAZY and name in collected:
                out[name] = ParquetRows(path, collected[name] or table.names)
            elif name in collected:
                assert isinstance(rows, list)
                out[name] = self._dicts(name, rows, collected[name])
            if name == "rejected":
                source, line, reason = (table.names.index(c)
                                        for c in ("source", "line", "reason"))
                out["rejected_groups"] = group_rejected((r[source], r[line], r[reason])
                                                        for r in rows)
        self.close()
        return out

    def close(self) -> None:
        """Drop every row and remove the spill folder."""
        self.texts.close()
        self.folder.close()
        self._pool.clear()


class ParquetRows(Sequence[Row]):
    """The rows of one written Parquet file as a read-only sequence of dicts with
    ``columns``, read back a batch at a time whenever it is iterated (memory: one batch),
    so that returning a large table (``route_changes``) to the summary costs no memory.
    Equal to a list of the same dicts. O(rows) an iteration; ``len`` from the metadata."""

    def __init__(self, path: Path, columns: Sequence[str]) -> None:
        self.path = path
        self.columns = tuple(columns)

    def __len__(self) -> int:
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(self.path).metadata.num_rows)

    def __iter__(self) -> Iterator[Row]:
        import pyarrow.parquet as pq

        with pq.ParquetFile(self.path) as f:
            for batch in f.iter_batches(batch_size=8_192, columns=list(self.columns)):
                yield from batch.to_pylist()

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...
    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        return self.materialize()[index]

    def materialize(self) -> list[Row]:
        """Every row, as a list."""
        return list(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ParquetRows | list | tuple):
            return self.materialize() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def write_local_tables(tables: Mapping[str, list[Row]], out_dir: Path) -> None:
    """Write dict rows (`analyze_local`'s tables, already sorted) as Parquet, the layout
    Spark writes (``out_dir/<table>/part-00000.parquet``), through `write_parquet`.
    O(rows)."""
    for name, rows in tables.items():
        names = TABLES[name].names
        write_parquet(TABLES[name], [tuple(row.get(c) for c in names) for row in rows],
                      out_dir / name)


def write_parquet(table: Table, rows: Iterable[Values], target: Path) -> Path:
    """Write tuple rows of ``table`` (values in column order; lists or tuples for
    ``array<string>``) into ``target/part-00000.parquet``, replacing ``target``, one row
    group per batch: `BATCH_ROWS` rows at most, and fewer once they hold `BATCH_BYTES` of
    text (but `BATCH_ROWS`' lower bound at least), so the writer's buffers grow with a
    batch, not with the table; ``rows`` may be an iterator, read once. Returns the file.
    O(rows)."""
    import pyarrow.parquet as pq

    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    schema = table.arrow_schema()
    path = target / "part-00000.parquet"
    with pq.ParquetWriter(path, schema) as writer:
        for chunk in text_batches(rows):
            writer.write_batch(tuple_batch(schema, chunk))
    return path


def tuple_batch(schema: Any, chunk: Sequence[Values]) -> Any:
    """Tuple rows (values in ``schema``'s order) as one Arrow record batch of ``schema``,
    built column by column. O(rows × columns)."""
    import pyarrow as pa

    arrays = [pa.array([r[i] for r in chunk], type=field.type)
              for i, field in enumerate(schema)]
    return pa.record_batch(arrays, schema=schema)


def text_batches(rows: Iterable[Values], *, text: int | None = None,
                 bounds: tuple[int, int] | None = None) -> Iterator[list[Values]]:
    """``rows`` in lists of at most ``bounds[1]`` rows, each ending as soon as it holds
    at least ``bounds[0]`` rows and ``text`` characters of text (by default `BATCH_ROWS`
    and `BATCH_BYTES`: the bound of `write_parquet`'s batches). O(rows × columns)."""
    low, high = BATCH_ROWS if bounds is None else bounds
    limit = BATCH_BYTES if text is None else text
    chunk: list[Values] = []
    held = 0
    for row in rows:
        chunk.append(row)
        held += sum(len(v) for v in row if isinstance(v, str))
        if len(chunk) >= high or (held >= limit and len(chunk) >= low):
            yield chunk
            chunk, held = [], 0
    if chunk:
        yield chunk
