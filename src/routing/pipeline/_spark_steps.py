"""The Spark pipeline's Python side: what runs in the Python workers (`mapInArrow` steps).

Each step streams Arrow batches in and out: `_read_rows` reads (and, with
``partition="ns"``, replays) one name server's lines in order, `_replay_rows` replays one
(name server, broker-group set), `_topic_rows` sweeps one topic's route contributions.
Rows travel in one wide schema (`WIDE`, every table's columns plus tags); a row fills its
own columns. The read stage with ``partition="ns"`` narrows its route changes to their
table's columns and packs the other rows as Arrow IPC bytes (`packed`, `unpack_step`).
The driver's side is `_spark`.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any

from ..journal import JournalEntry, JournalReader
from ._lifetime import Removals
from ._outputs import Emitted, ReplayDeriver
from ._plan import nodes_of, replay_entry
from ._read import NsReading, count_rejected, decode_line, line_key, raw_lines
from ._schema import TABLES, arrow_batch
from ._topics import Contribution, answer_of_change, sweep_changes, sweep_topic

__all__ = ["CHANGE_COLUMNS", "CONTRIB_COLUMNS", "KILL_WORKER_ENV", "PIECE_CHANGES", "PIECE_REST",
           "READ_DDL", "WIDE_DDL", "local_file_step", "packed", "read_step", "replay_step",
           "rows_of", "topic_step", "unpack_step"]

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
                  ("read_queue_count", "long"), ("writable_queue_count", "long"),
                  ("producer_writable_queue_count", "long"))
_BATCH_ROWS = 2048
#: ... or fewer, once their route and line texts reach this many characters (a route of a
#: topic that every group serves can be 100 kB)
_BATCH_CHARS = 4 << 20
#: Testing only (fault injection): a file path. The first replay task that runs while it is
#: set creates that file (atomically: one task wins) after handing its first batch to Spark,
#: then kills its own Python worker (``os._exit``); Spark must retry the task and the tables
#: must not change. Read on the driver when `analyze` starts, so it needs no worker setup.
KILL_WORKER_ENV = "ROUTING_TEST_KILL_WORKER_ONCE"


def killing_once(batches: Iterator[Any], marker: str | None) -> Iterator[Any]:
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
    for batch in batches:
        columns = [batch.column(batch.schema.get_field_index(n)).to_pylist() for n in names]
        yield from zip(*columns, strict=True)


def _to_batches(rows: Iterable[dict[str, Any]]) -> Iterator[Any]:
    """Rows (dicts naming some of the `_WIDE` columns) as Arrow batches of the wide schema."""
    schema = _arrow_schema()
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


def _arrow_schema() -> Any:
    import pyarrow as pa

    types = {"string": pa.string(), "long": pa.int64(), "double": pa.float64(),
             "boolean": pa.bool_(), "array<string>": pa.list_(pa.string())}
    return pa.schema([pa.field(name, types[kind]) for name, kind in _WIDE])


def _tag_rows(emitted: Iterable[Emitted], rejected: dict[str, int] | None = None
              ) -> Iterator[dict[str, Any]]:
    """Table rows as wide rows; ``rejected`` (if given) counts the ``rejected`` rows of
    each name server (`_read.count_rejected`)."""
    for table, row in emitted:
        tagged = dict(row)
        tagged["kind"] = "row"
        tagged["tbl"] = table
        if rejected is not None and table == "rejected":
            count_rejected(rejected, row)
        yield tagged


def read_step(replay: bool, paths: Mapping[int, str], kill: str | None = None
               ) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """Stage 2b: one reader per task over lines sorted by (name server, reading order).
    With ``replay`` (``partition="ns"``), also replay and derive each whole name server;
    otherwise emit each accepted line with the nodes it touches."""

    def step(batches: Iterable[Any]) -> Iterator[Any]:
        return killing_once(_to_batches(_read_rows(batches, replay, paths)), kill)

    return step


def local_file_step(paths: Mapping[int, str], names: Mapping[int, str],
                     kill: str | None = None) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """Stage 2 on whole local files, read by the Python worker itself: a task's rows are
    positions (``id``) in the sorted file indexes of ``names``; each file is read in order
    (`_read.raw_lines`, as the reference reads it) and replayed as `_read_rows` does. The
    JVM neither scans the text nor hands it over (the lines never cross into Arrow), so a
    record costs only its Python work."""
    paths, names = dict(paths), dict(names)
    keys = sorted(names)  # task row ``id`` i reads file ``keys[i]``
    # resolved on the driver: an executor's working directory is not the driver's
    opened = {order: os.path.abspath(path) for order, path in paths.items()}

    def lines(batches: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
        for (index,) in rows_of(batches, ("id",)):
            order = keys[index]
            path, ns = paths[order], names[order]
            for number, text, raw in raw_lines(opened[order]):
                yield order, path, number, text, raw, ns

    def step(batches: Iterable[Any]) -> Iterator[Any]:
        return killing_once(_to_batches(_read_rows(lines(batches), True, paths, rows=True)),
                             kill)

    return step


def _read_rows(batches: Iterable[Any], replay: bool, paths: Mapping[int, str], *,
               rows: bool = False) -> Iterator[dict[str, Any]]:
    """Lines arrive grouped by the JVM's guess of their name server (``ns_key``). The
    reader's own key (`line_key`) decides: a line without one is judged by a fresh reader
    (it is rejected without touching state, wherever it is); a line whose key differs from
    the guess is reported as ``misrouted`` and the driver reruns the read stage with
    Python's keys (one ``misrouted`` row per task says so).

    At its end the task sends, besides its table rows, one ``stats`` row per name server
    and one ``counts`` row (the task's rejected rows per name server, JSON): with the
    ``sessions`` rows, all the driver collects, in one job."""
    reading = NsReading()
    derivers: dict[str, ReplayDeriver] = {}
    current: str | None = None
    rejected: dict[str, int] = {}
    misrouted = False

    def finish(ns: str | None) -> Iterator[dict[str, Any]]:
        deriver = derivers.pop(ns, None) if ns is not None else None
        if deriver is not None:
            deriver.end_ms = reading.stats[deriver.ns].last_ms
            yield from _tag_rows(deriver.finish(), rejected)

    remembered, steady = reading.reader.remembered_name, reading.steady
    tuples = batches if rows else rows_of(
        batches, ("order_a", "source", "line", "text", "raw", "ns_key"))
    entry: JournalEntry | None
    for order, source, line, text, raw, ns_key in tuples:
        if source is None:
            source = paths[order]
        if ns_key != current:
            yield from finish(current)
            current = ns_key
        hit = steady(text, ns_key) if replay and raw is None else None
        if hit is not None:  # a remembered re-registration of this name server, in order
            steady_deriver = derivers.get(ns_key)
            if steady_deriver is not None and steady_deriver.steady(hit[3], hit[2]):
                continue
            entry = reading.reader.record_of(hit)
        else:
            if raw is not None:  # not UTF-8: rejected before any state is read
                text, own = decode_line(raw), None
            else:
                own = remembered(text) or line_key(text)[0]
            if own is not None and own != ns_key:
                if not misrouted:  # the driver reruns the stage: one row says so
                    misrouted = True
                    yield {"kind": "misrouted", "ns": own, "source": source, "line": line}
                continue
            entry = reading.feed(text, source, line, keyed=own is not None)
        if reading.rejected:  # hand them on at once: memory stays O(state), not O(lines)
            yield from _tag_rows((("rejected", row) for row in reading.rejected), rejected)
            reading.rejected.clear()
        if entry is None:
            continue
        ns = entry.nameserver_id
        if replay:
            deriver = derivers.get(ns)
            if deriver is None:
                deriver = derivers[ns] = ReplayDeriver(ns, 0, end_ms=0, changes=True)
            yield from _tag_rows(deriver.apply(entry, (source, line, text)), rejected)
        else:
            yield {"kind": "line", "ns": ns, "seq": entry.seq, "ts": entry.at_ms,
                   "op": entry.op, "source": source, "line": line, "text": text,
                   "nodes": list(nodes_of(entry))}
    yield from finish(current)
    for stats in reading.stats.values():
        yield {"kind": "stats", "ns": stats.ns, "payload": json.dumps(stats.to_json())}
    yield {"kind": "counts", "payload": json.dumps(rejected)}


def replay_step(spans: Mapping[str, tuple[int, int]], kill: str | None = None
                 ) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """Stage 3: replay each (name server, component) of the task, lines in seq order."""

    def step(batches: Iterable[Any]) -> Iterator[Any]:
        return killing_once(_to_batches(_tag_rows(_replay_rows(batches, spans))), kill)

    return step


def _replay_rows(batches: Iterable[Any], spans: Mapping[str, tuple[int, int]]
                 ) -> Iterator[Emitted]:
    key: tuple[str, int] | None = None
    reader = JournalReader()
    deriver: ReplayDeriver | None = None
    for ns, comp, primary, seq, ts, op, source, line, text in rows_of(
            batches, ("ns", "comp", "primary", "seq", "ts", "op", "source", "line", "text")):
        if (ns, comp) != key:
            if deriver is not None:
                yield from deriver.finish()
            key = (ns, comp)
            reader = JournalReader()
            deriver = ReplayDeriver(ns, comp, end_ms=spans[ns][1])
        assert deriver is not None
        entry = replay_entry(reader, ns, seq, ts, op, source, line, text)
        yield from deriver.apply(entry, (source, line, text), primary=bool(primary))
    if deriver is not None:
        yield from deriver.finish()


def topic_step(spans: Mapping[str, tuple[int, int]], at: Sequence[int],
               removals: Removals, *, changes: bool = False
               ) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """Stage 4: sweep each topic of the task, its input sorted by (topic, time): route
    contributions (`CONTRIB_COLUMNS`), or with ``changes`` the ``route_changes`` rows of
    whole name servers without their route text (`CHANGE_COLUMNS`)."""

    def step(batches: Iterable[Any]) -> Iterator[Any]:
        rows = (_change_rows if changes else _topic_rows)(batches, spans, at, removals)
        return _to_batches(_tag_rows(rows))

    return step


def _topic_rows(batches: Iterable[Any], spans: Mapping[str, tuple[int, int]],
                at: Sequence[int], removals: Removals) -> Iterator[Emitted]:
    names = ("ns", "topic", "at_ms", "seq", "part", "route_json")
    rows = (Contribution(ns=r[0], topic=r[1], at_ms=r[2], seq=r[3], part=r[4], route_json=r[5])
            for r in rows_of(batches, names))
    for topic, group in itertools.groupby(rows, key=lambda c: c.topic):
        yield from sweep_topic(topic, group, spans, at, removals=removals)


def _change_rows(batches: Iterable[Any], spans: Mapping[str, tuple[int, int]],
                 at: Sequence[int], removals: Removals) -> Iterator[Emitted]:
    names = tuple(c for c, _ in CHANGE_COLUMNS)
    rows = (dict(zip(names, r, strict=True)) for r in rows_of(batches, names))
    for topic, group in itertools.groupby(rows, key=itemgetter("topic")):
        yield from sweep_changes(topic, ((r["at_ms"], r["ns"], r["seq"], answer_of_change(r))
                                         for r in group), spans, at, removals=removals)
