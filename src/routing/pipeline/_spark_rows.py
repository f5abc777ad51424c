"""Rows between the JVM and the Python workers: what every Spark stage's steps emit.

The Python steps of the stages (`mapInArrow`: ``_spark_replay.py``, ``_spark_sweep.py``)
stream Arrow batches in and out. Rows travel in one wide schema (`WIDE_DDL`: every table's
columns plus tags, `tag_rows`); a row fills its own columns and leaves the rest null, so
rows travel typed, with no JSON round trip (`to_batches`; `rows_of` reads columns back as
tuples). The read stage with ``partition="ns"`` narrows its route changes to their table's
columns and packs the other rows as Arrow IPC bytes (`packed`, `unpack_step`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ._schema import TABLES, Emitted, Row, arrow_batch, arrow_schema

__all__ = ["CHANGE_COLUMNS", "CONTRIB_COLUMNS", "PIECE_CHANGES", "PIECE_REST", "READ_DDL",
           "WIDE_DDL", "packed", "rows_of", "tag_rows", "to_batches", "unpack_step"]

#: Columns that tag a Python stage's output rows (besides the tables' own columns).
_TAG_COLUMNS = (("kind", "string"), ("tbl", "string"), ("comp", "long"), ("primary", "boolean"),
                ("op", "string"), ("ts", "long"), ("nodes", "array<string>"),
                ("part", "long"), ("payload", "string"))
#: Contributions: one partition's route of a topic after a record (`_topics.Contribution`).
CONTRIB_COLUMNS = (("ns", "string"), ("topic", "string"), ("at_ms", "long"), ("seq", "long"),
                    ("part", "long"), ("route_json", "string"))
#: ``route_changes`` rows as the topic sweep takes them (`_topics.answer_of_change`).
CHANGE_COLUMNS = (("ns", "string"), ("topic", "string"), ("at_ms", "long"), ("seq", "long"),
                  ("present", "boolean"), ("digest", "string"), ("groups", "array<string>"),
                  ("read_queue_count", "long"), ("writable_queue_count", "long"))
_BATCH_ROWS = 2048
#: ... or fewer, once their route and line texts reach this many characters (a route of a
#: topic that every group serves can be 100 kB)
_BATCH_CHARS = 4 << 20
def _wide_columns() -> tuple[tuple[str, str], ...]:
    """Every column a Python stage may emit: the tags, the contributions, the accepted
    lines (``source, line, text``) and every table's columns, each name once with one type.
    A row fills the columns of its table and leaves the rest null, so rows travel typed,
    through Arrow, with no JSON round trip."""
    columns: dict[str, str] = {}
    specs = [*_TAG_COLUMNS, *CONTRIB_COLUMNS, ("source", "string"), ("line", "long"),
             ("text", "string")]
    specs += [(c.name, c.type) for table in TABLES.values() for c in table.columns]
    for name, kind in specs:
        if columns.setdefault(name, kind) != kind:
            raise AssertionError(f"column {name!r} has two types: {columns[name]}, {kind}")
    return tuple(columns.items())


_WIDE = _wide_columns()
_WIDE_KINDS = dict(_WIDE)


def _ddl(names: Iterable[str]) -> str:
    return ", ".join(f"`{name}` {_WIDE_KINDS[name]}" for name in names)


WIDE_DDL = _ddl(_WIDE_KINDS)

# --------------------------------------------------------------------------- packed stages

#: The read stage's output with ``partition="ns"``: the ``route_changes`` rows in the
#: table's own columns (``piece`` = `PIECE_CHANGES`), and every other row packed, a wide
#: batch at a time, as an Arrow IPC stream in the ``ipc`` column of one row (``piece`` =
#: `PIECE_REST`), which the JVM persists as opaque bytes. As wide rows, every route change
#: cost the JVM a 63-column row and 63 columnar builders when persisted (10 M records:
#: 4.8 CPU s and 2.2 s of collection in the read stage; docs/performance.md, issue 12,
#: seventh pass); `unpack_step` turns the rest back into wide rows where the small tables
#: are made.
PIECE_CHANGES, PIECE_REST = "route_changes", "rest"
_READ_COLUMNS = ("piece", *TABLES["route_changes"].names, "ipc")
READ_DDL = ", ".join(["`piece` string", _ddl(TABLES["route_changes"].names), "`ipc` binary"])


def packed(step: Callable[[Iterable[Any]], Iterator[Any]]
           ) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """``step`` with its wide batches cut in two: the ``route_changes`` rows narrowed to
    their table's columns, the rest packed into one row (`READ_DDL`). O(bytes) in Arrow's
    C++ code; no row is visited in Python."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        names = list(TABLES["route_changes"].names)
        for batch in step(batches):
            is_change = pc.fill_null(pc.and_(pc.equal(batch.column("kind"), "row"),
                                             pc.equal(batch.column("tbl"), "route_changes")),
                                     False)
            changes = batch.filter(is_change)
            if changes.num_rows:
                n = changes.num_rows
                yield pa.RecordBatch.from_arrays(
                    [pa.array([PIECE_CHANGES] * n, pa.string()),
                     *(changes.column(name) for name in names), pa.nulls(n, pa.binary())],
                    names=list(_READ_COLUMNS))
            rest = batch.filter(pc.invert(is_change))
            if rest.num_rows:
                yield pa.RecordBatch.from_arrays(
                    [pa.array([PIECE_REST], pa.string()),
                     *(pa.nulls(1, batch.schema.field(name).type) for name in names),
                     pa.array([_ipc(rest)], pa.binary())],
                    names=list(_READ_COLUMNS))

    return run


def _ipc(batch: Any) -> Any:
    """``batch`` as the bytes of an Arrow IPC stream."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def unpack_step() -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The rows of packed pieces (`packed`): every IPC stream of the ``ipc`` column, read
    without copying its buffers. The caller filters the pieces and names their schema."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            for blob in batch.column(batch.schema.get_field_index("ipc")):
                with pa.ipc.open_stream(blob.as_buffer()) as reader:
                    yield from reader

    return run


# --------------------------------------------------------------------------- python steps


def rows_of(batches: Iterable[Any], names: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    """The ``names`` columns of Arrow ``batches`` as tuples, a batch's columns converted at
    once. O(rows × names)."""
    for batch in batches:
        columns = [batch.column(batch.schema.get_field_index(n)).to_pylist() for n in names]
        yield from zip(*columns, strict=True)


def to_batches(rows: Iterable[Row]) -> Iterator[Any]:
    """Rows (dicts naming some of the `WIDE_DDL` columns) as Arrow batches of the wide
    schema, `_BATCH_ROWS` rows or `_BATCH_CHARS` characters of text at most. O(rows)."""
    schema = wide_schema()
    chunk: list[dict[str, Any]] = []
    held = 0  # characters of the long text columns in ``chunk``
    for row in rows:
        chunk.append(row)
        held += len(row.get("route_json") or "") + len(row.get("text") or "")
        if len(chunk) >= _BATCH_ROWS or held >= _BATCH_CHARS:
            yield arrow_batch(chunk, schema)
            chunk = []
            held = 0
    if chunk:
        yield arrow_batch(chunk, schema)


def wide_schema() -> Any:
    """The pyarrow schema of `WIDE_DDL` (imports pyarrow). O(columns)."""
    return arrow_schema(_WIDE)


#: Kinds of row that are not table rows (``_read_replay.LINE``, ``MISROUTED``): their kind
#: is their own, with no ``tbl``.
_KINDS = frozenset({"line", "misrouted"})


def tag_rows(emitted: Iterable[Emitted]) -> Iterator[Row]:
    """Emitted rows as wide rows: a table row (or a contribution) is of kind ``row`` with
    its table in ``tbl``; a read's ``line`` and ``misrouted`` rows are of their own kind.
    O(rows)."""
    for table, row in emitted:
        tagged = dict(row)
        if table in _KINDS:
            tagged["kind"] = table
        else:
            tagged["kind"] = "row"
            tagged["tbl"] = table
        yield tagged
