"""Rows between the JVM and the Python workers: the one way a Spark stage runs Python.

Every stage's Python step (`mapInArrow`: ``_spark_replay.py``, ``_spark_sweep.py``) is a
`python_step`: Arrow batches in, a function of the stage turns them into `Emitted` rows,
and the rows go out in one wide schema (`WIDE_DDL`: every table's columns plus tags,
`tag_rows`); a row fills its own columns and leaves the rest null, so rows travel typed,
with no JSON round trip (`to_batches`; `rows_of` reads columns back as tuples). The read
stage with ``partition="ns"`` narrows its route changes to their table's columns and packs
the other rows as Arrow IPC bytes (`packed`; the driver reads them back with `side_rows`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import attrs

from .._errors import InvariantViolation
from ._schema import TABLES, Emitted, Row, arrow_batch, arrow_schema

__all__ = ["CHANGE_COLUMNS", "CONTRIB_COLUMNS", "KILL_WORKER_ENV", "PIECE_CHANGES",
           "PIECE_REST", "READ_DDL", "REPLAY_JOB", "SESSION_ENDS", "WIDE_DDL", "Replayed",
           "Step", "local_frame", "packed", "python_step", "replay_job", "rows_of",
           "side_rows", "tag_rows", "to_batches", "unpack_step", "wide_schema"]

#: A `mapInArrow` function: Arrow batches in, Arrow batches out.
Step = Callable[[Iterable[Any]], Iterator[Any]]

#: Testing only (fault injection): a file path. The first replay task that runs while it is
#: set creates that file (atomically: one task wins) after handing its first batch to Spark,
#: then kills its own Python worker (``os._exit``); Spark must retry the task and the tables
#: must not change. Read on the driver when `analyze` starts, so it needs no worker setup.
KILL_WORKER_ENV = "ROUTING_TEST_KILL_WORKER_ONCE"

#: Columns that tag a Python stage's output rows (besides the tables' own columns).
_TAG_COLUMNS = (("kind", "string"), ("tbl", "string"), ("comp", "long"), ("primary", "boolean"),
                ("op", "string"), ("ts", "long"), ("nodes", "array<string>"),
                ("part", "long"), ("payload", "string"))
#: Contributions: one partition's route of a topic after a record (`_answers.Contribution`).
CONTRIB_COLUMNS = (("ns", "string"), ("topic", "string"), ("at_ms", "long"), ("seq", "long"),
                    ("part", "long"), ("route_json", "string"))
#: ``route_changes`` rows as the topic sweep takes them (`_answers.answer_of_change`).
CHANGE_COLUMNS = (("ns", "string"), ("topic", "string"), ("at_ms", "long"), ("seq", "long"),
                  ("present", "boolean"), ("digest", "string"), ("groups", "array<string>"),
                  ("read_queue_count", "long"), ("writable_queue_count", "long"),
                  ("producer_writable_queue_count", "long"))
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
            raise InvariantViolation([f"column {name!r} has two types: {columns[name]}, {kind}"])
    return tuple(columns.items())


_WIDE = _wide_columns()
_WIDE_KINDS = dict(_WIDE)


def _ddl(names: Iterable[str]) -> str:
    return ", ".join(f"`{name}` {_WIDE_KINDS[name]}" for name in names)


WIDE_DDL = _ddl(_WIDE_KINDS)


def wide_schema() -> Any:
    """The pyarrow schema of `WIDE_DDL` (imports pyarrow). O(columns)."""
    return arrow_schema(_WIDE)


# --------------------------------------------------------------------------- python steps

def python_step(rows: Callable[[Iterable[Any]], Iterable[Emitted]], *,
                kill: str | None = None) -> Step:
    """A stage's Python step: the ``rows`` its input batches make, as wide rows in Arrow
    batches (`tag_rows`, `to_batches`); ``kill``: the marker of `KILL_WORKER_ENV`. The
    read stage with ``partition="ns"`` cuts its output in two pieces (`packed`). O(rows)."""

    def step(batches: Iterable[Any]) -> Iterator[Any]:
        return _killing_once(to_batches(tag_rows(rows(batches))), kill)

    return step


def _killing_once(batches: Iterator[Any], marker: str | None) -> Iterator[Any]:
    """``batches``; with a ``marker`` path (`KILL_WORKER_ENV`), the first task to create
    it exits its Python worker right after its first batch went out."""
    if not marker:
        yield from batches
        return
    for n, batch in enumerate(batches):
        yield batch
        if n == 0:
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            except FileExistsError:
                continue
            os._exit(17)  # the worker dies mid-task, its partial output already sent


#: Kinds of row that are not table rows: a read's accepted lines and misrouted line
#: (``_read_replay.LINE``, ``MISROUTED``), a read task's ``stats`` and ``counts``. Their
#: kind is their own, with no ``tbl``.
_KINDS = frozenset({"line", "misrouted", "stats", "counts"})


def tag_rows(emitted: Iterable[Emitted]) -> Iterator[Row]:
    """Emitted rows as wide rows: a table row (or a contribution) is of kind ``row`` with
    its table in ``tbl``; the other kinds (`_KINDS`) are their own. O(rows)."""
    for table, row in emitted:
        tagged = dict(row)
        if table in _KINDS:
            tagged["kind"] = table
        else:
            tagged["kind"] = "row"
            tagged["tbl"] = table
        yield tagged


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


def rows_of(batches: Iterable[Any], names: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    """The ``names`` columns of Arrow ``batches`` as tuples, a batch's columns converted at
    once. O(rows × names)."""
    for batch in batches:
        columns = [batch.column(batch.schema.get_field_index(n)).to_pylist() for n in names]
        yield from zip(*columns, strict=True)


def local_frame(spark: Any, emitted: Iterable[Emitted]) -> Any:
    """A small frame of wide rows (`WIDE_DDL`) made on the driver, handed to Spark as one
    Arrow table: about 0.75 s for the fleet shape's 26 609 sessions, where a list of tuples
    took 1.4 s to make and 2.2 s more in every job that read it (pickled rows, a Python
    worker's decode; docs/performance.md). O(rows × columns)."""
    import pyarrow as pa

    schema = wide_schema()
    rows = list(tag_rows(emitted))
    if not rows:
        return spark.createDataFrame([], WIDE_DDL)
    return spark.createDataFrame(pa.Table.from_batches([arrow_batch(rows, schema)]), WIDE_DDL)


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


def packed(step: Step) -> Step:
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


#: What the driver collects of a read stage: the kinds and tables it needs.
_FACTS = ("misrouted", "stats", "counts")


def side_rows(stage: Any, *, pack: bool, columns: Sequence[str]) -> tuple[Any, list[Any]]:
    """The driver's side of a read stage: its rows but the accepted lines, the route
    changes and the contributions (unpacked from the rest piece of a ``pack``ed stage),
    persisted on disk (the small tables are written from them), and, in one job, the
    ``columns`` of the rows the driver needs (`_FACTS` kinds and ``sessions``)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if pack:
        stage = (stage.filter(F.col("piece") == PIECE_REST).select("ipc")
                 .mapInArrow(unpack_step(), WIDE_DDL))
    side = stage.filter((F.col("kind") != "line") & (
        F.col("tbl").isNull() | ~F.col("tbl").isin("contrib", "route_changes")))
    side = side.persist(StorageLevel.DISK_ONLY)
    wanted = side.filter(F.col("kind").isin(*_FACTS) | (F.col("tbl") == "sessions"))
    return side, wanted.select(*columns).collect()


# --------------------------------------------------------------------------- between stages

#: What the sweep needs of each session (which broker sessions ended when).
SESSION_ENDS = ("ns", "broker_name", "end_ms", "end_reason")
Say = Any


@attrs.frozen(kw_only=True)
class Replayed:
    """The replay stage's output. ``rows``: wide rows (kind ``row``) of ``sessions``,
    ``expiries`` and ``rejected``; ``changes`` (``partition="ns"``): the ``route_changes``
    table; ``contributions`` (``partition="group"``): the route contributions
    (`CONTRIB_COLUMNS`), to be swept into route changes; ``persisted``: the frames kept on
    disk. On the driver: ``spans`` (each name server's journal [first, last] ms),
    ``sessions`` (`SESSION_ENDS` of each), ``rejected`` lines per name server, the
    ``name_servers`` rows, ``gaps`` (`gap_messages`), replay ``partitions`` per name
    server, and how many tasks read the text (``read_tasks``); ``change_files``: where the
    tasks wrote ``changes`` themselves, if they did."""

    rows: Any
    changes: Any | None
    contributions: Any | None
    persisted: tuple[Any, ...]
    spans: Mapping[str, tuple[int, int]]
    sessions: tuple[Row, ...]
    rejected: Mapping[str, int]
    name_servers: tuple[Row, ...]
    gaps: tuple[str, ...]
    partitions: Mapping[str, int]
    read_tasks: int
    #: the files of the ``route_changes`` table, each sorted by its key, when the replay
    #: tasks wrote them (``_change_files.py``; ``changes`` reads them)
    change_files: tuple[str, ...] = ()


#: The description of the jobs whose tasks read and replay journals (Spark's event log and
#: UI show it; ``benchmarks/task_metrics.py`` finds the replay tasks by it).
REPLAY_JOB = "routing: read and replay"


@contextmanager
def replay_job(spark: Any) -> Iterator[None]:
    """Jobs started inside are described as `REPLAY_JOB` (a property of this thread; on
    Spark Connect, which has no SparkContext here, nothing). O(1)."""
    from ._session import is_connect

    if is_connect(spark):
        yield
        return
    context = spark.sparkContext
    context.setJobDescription(REPLAY_JOB)
    try:
        yield
    finally:
        context.setJobDescription(None)
