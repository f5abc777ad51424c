"""The output tables: names, columns, types, sort keys and meanings, in one place.

Both engines write exactly these columns: the Spark path builds its ``StructType`` from
`Table.spark_schema`, the pure-Python reference (`routing.pipeline.reference`) returns rows
with these keys and writes Parquet with `Table.arrow_schema`. Every time is an integer
epoch in milliseconds (a ``long``, named ``*_ms``); durations are in ms too.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

__all__ = ["TABLES", "Column", "Table", "arrow_batch", "sort_rows", "write_local_tables"]

_TYPES = ("string", "long", "double", "boolean", "array<string>")


@attrs.frozen(kw_only=True)
class Column:
    """One column: ``type`` is a Spark DDL type among ``string``, ``long``, ``double``,
    ``boolean`` and ``array<string>``."""

    name: str
    type: str = attrs.field(validator=attrs.validators.in_(_TYPES))
    doc: str
    nullable: bool = False


@attrs.frozen(kw_only=True)
class Table:
    """An output table: its columns, the key its rows are sorted by, and what a row is."""

    name: str
    doc: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def ddl(self) -> str:
        """The schema as a Spark DDL string (``"ns string, seq long, ..."``)."""
        return ", ".join(f"`{c.name}` {c.type}" for c in self.columns)

    def spark_schema(self) -> Any:
        """The ``pyspark.sql.types.StructType`` of the table (imports pyspark)."""
        from pyspark.sql import types as t

        def spark_type(name: str) -> Any:
            return {"string": t.StringType(), "long": t.LongType(), "double": t.DoubleType(),
                    "boolean": t.BooleanType(),
                    "array<string>": t.ArrayType(t.StringType(), containsNull=False)}[name]

        return t.StructType([t.StructField(c.name, spark_type(c.type), nullable=True)
                             for c in self.columns])

    def arrow_schema(self) -> Any:
        """The ``pyarrow.Schema`` of the table (imports pyarrow)."""
        import pyarrow as pa

        def arrow_type(name: str) -> Any:
            return {"string": pa.string(), "long": pa.int64(), "double": pa.float64(),
                    "boolean": pa.bool_(), "array<string>": pa.list_(pa.string())}[name]

        return pa.schema([pa.field(c.name, arrow_type(c.type), nullable=True)
                          for c in self.columns])


def _c(name: str, type_: str, doc: str, *, nullable: bool = False) -> Column:
    return Column(name=name, type=type_, doc=doc, nullable=nullable)


_BROKER = (
    _c("ns", "string", "the name server whose journal this came from"),
    _c("cluster", "string", "the broker's cluster"),
    _c("broker_name", "string", "its broker group"),
    _c("broker_id", "long", "its id in the group (0 = master)"),
    _c("broker_addr", "string", "its address, host:port"),
)

NAME_SERVERS = Table(
    name="name_servers",
    doc="One row per name server journal: its span and record counts.",
    columns=(
        _c("ns", "string", "the name server"),
        _c("first_ms", "long", "the earliest record time (ms)"),
        _c("last_ms", "long", "the latest record time (ms); the end of the journal"),
        _c("records", "long", "accepted records (headers not counted)"),
        _c("restarts", "long", "restart headers after the first header"),
        _c("gaps", "long", "jumps in the accepted sequence numbers (lines missing or rejected)"),
        _c("rejected", "long", "lines of this name server set aside (read or replay)"),
    ),
    key=("ns",),
)

SESSIONS = Table(
    name="sessions",
    doc=("One row per continuous liveness of a broker address on a name server: from the "
         "registration that created its live entry to the event that removed it."),
    columns=(
        *_BROKER,
        _c("start_ms", "long", "the registration that made the address live (ms)"),
        _c("end_ms", "long", "the removal (ms), or the end of the journal for 'open'"),
        _c("end_reason", "string",
           "expired, unregistered, channel_closed, replaced (re-registered as another group "
           "member) or open (still live at the end of the journal)"),
        _c("duration_ms", "long", "end_ms - start_ms"),
        _c("heartbeats", "long",
           "liveness refreshes seen: accepted registrations, heartbeats and data-version "
           "queries of the live address (the first registration included)"),
        _c("last_heartbeat_ms", "long", "the last refresh (ms)"),
        _c("largest_gap_ms", "long", "the longest time between two refreshes (ms); 0 for one"),
    ),
    key=("ns", "cluster", "broker_addr", "start_ms"),
)

EXPIRIES = Table(
    name="expiries",
    doc="One row per broker removed by an expiry scan.",
    columns=(
        *_BROKER,
        _c("last_heartbeat_ms", "long", "the broker's last refresh (ms)"),
        _c("detected_ms", "long", "the scan that removed it (ms)"),
        _c("latency_ms", "long", "detected_ms - last_heartbeat_ms"),
        _c("timeout_ms", "long", "its heartbeat timeout (ms)", nullable=True),
        _c("overdue_ms", "long",
           "detected_ms - (last_heartbeat_ms + timeout_ms): how long the dead broker stayed "
           "in routes after its deadline", nullable=True),
        _c("seq", "long", "the journal sequence number of the scan"),
    ),
    key=("ns", "detected_ms", "cluster", "broker_addr"),
)

ROUTE_CHANGES = Table(
    name="route_changes",
    doc=("For each name server and topic, every instant its route (what pickup_route "
         "answers) changed, with the route after the change."),
    columns=(
        _c("ns", "string", "the name server"),
        _c("topic", "string", "the topic"),
        _c("at_ms", "long", "when the route changed (ms)"),
        _c("seq", "long", "the journal sequence number of the record that changed it"),
        _c("present", "boolean", "False when the topic has no route any more (TOPIC_NOT_EXIST)"),
        _c("groups", "array<string>", "the broker groups in the route, sorted"),
        _c("read_queue_count", "long", "total read queues"),
        _c("writable_queue_count", "long", "total write queues of rows with the write bit"),
        _c("producer_writable_queue_count", "long",
           "of those, the queues of groups with a master (broker id 0): what a producer can "
           "write to (TopicRouteData.producer_writable_queue_count)"),
        _c("digest", "string", "a hash of the whole route (equal routes, equal digests)",
           nullable=True),
        _c("route_json", "string", "the route as RocketMQ JSON (TopicRouteData)",
           nullable=True),
    ),
    key=("ns", "topic", "at_ms", "seq"),
)

ROUTES_AT = Table(
    name="routes_at",
    doc=("The route of every topic on every name server at each --at time, taken from "
         "route_changes (the last change at or before that time)."),
    columns=(
        _c("at_ms", "long", "the time asked for (ms)"),
        _c("ns", "string", "the name server"),
        _c("topic", "string", "the topic"),
        _c("present", "boolean", "whether the name server had a route then"),
        _c("since_ms", "long", "when that answer began (ms)", nullable=True),
        _c("groups", "array<string>", "the broker groups in the route, sorted"),
        _c("writable_queue_count", "long", "total writable queues"),
        _c("digest", "string", "route digest", nullable=True),
    ),
    key=("at_ms", "topic", "ns"),
)

DISAGREEMENT = Table(
    name="disagreement",
    doc=("Maximal intervals during which the name servers answered differently for a topic "
         "(a missing route counts as an answer), within the span every journal covers."),
    columns=(
        _c("topic", "string", "the topic"),
        _c("start_ms", "long", "when the answers started to differ (ms)"),
        _c("end_ms", "long", "when they agreed again, or the end of the common span (ms)"),
        _c("duration_ms", "long", "end_ms - start_ms"),
        _c("open_at_end", "boolean", "still differing at the end of the common span"),
        _c("variants", "long", "the most distinct answers seen at once"),
        _c("out_of_step", "array<string>",
           "name servers that at some instant did not hold the majority answer (all of them "
           "when there was no strict majority)"),
    ),
    key=("topic", "start_ms"),
)

DISAGREEMENT_TOTALS = Table(
    name="disagreement_totals",
    doc="Per topic: how many disagreement intervals and how long in total.",
    columns=(
        _c("topic", "string", "the topic"),
        _c("intervals", "long", "number of disagreement intervals"),
        _c("total_ms", "long", "their total duration (ms)"),
        _c("longest_ms", "long", "the longest one (ms)"),
        _c("span_ms", "long", "the common span compared (ms)"),
        _c("share", "double", "total_ms / span_ms", nullable=True),
    ),
    key=("topic",),
)

AVAILABILITY = Table(
    name="availability",
    doc=("Per topic and name server, the share of the topic's life with at least one "
         "writable queue: from its first appearance on any name server to the end of that "
         "journal, less the time after each deletion on purpose until it reappeared."),
    columns=(
        _c("ns", "string", "the name server"),
        _c("topic", "string", "the topic"),
        _c("window_start_ms", "long", "max(journal start, first appearance anywhere) (ms)"),
        _c("window_end_ms", "long", "the end of this name server's journal (ms)"),
        _c("window_ms", "long", "window_end_ms - window_start_ms (0 if the window is empty)"),
        _c("life_ms", "long", "the window less the time the topic was deleted on purpose "
           "(from the deletion to its next appearance on any name server) (ms)"),
        _c("writable_ms", "long", "time of the life with at least one writable queue (ms)"),
        _c("share", "double", "writable_ms / life_ms (null for an empty life)",
           nullable=True),
        _c("outages", "long", "maximal intervals of the life without a writable queue"),
        _c("longest_outage_ms", "long", "the longest of them (0 if none) (ms)"),
        _c("deletions", "long", "how often the topic was deleted on purpose here (its route "
           "vanished while no session of its brokers ended then)"),
        _c("deleted_ms", "long", "the last deletion, if the topic did not appear again by "
           "the end of this journal (ms)", nullable=True),
    ),
    key=("topic", "ns"),
)

REJECTED = Table(
    name="rejected",
    doc="Every record that could not be used, with the reason and where it came from.",
    columns=(
        _c("source", "string", "the file it came from"),
        _c("line", "long", "its 1-based line number (the row number for Parquet input)"),
        _c("stage", "string", "read (not a valid record) or replay (the manager refused it)"),
        _c("reason", "string", "why"),
        _c("ns", "string", "its name server, when known", nullable=True),
        _c("seq", "long", "its sequence number, when known", nullable=True),
        _c("text", "string", "the line as read", nullable=True),
    ),
    key=("source", "line", "stage"),
)

#: Every output table, in the order they are written and summarised.
TABLES: Mapping[str, Table] = {t.name: t for t in (
    NAME_SERVERS, SESSIONS, EXPIRIES, ROUTE_CHANGES, ROUTES_AT, DISAGREEMENT,
    DISAGREEMENT_TOTALS, AVAILABILITY, REJECTED)}


def _sort_value(value: Any) -> tuple[int, Any]:
    # None sorts first; lists compare as tuples.
    if value is None:
        return (0, 0)
    if isinstance(value, list):
        return (1, tuple(value))
    return (1, value)


def sort_rows(table: Table, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` as plain dicts in the table's canonical order: its key, then every column,
    so the order is total and both engines' rows compare as lists."""
    order = (*table.key, *(n for n in table.names if n not in table.key))
    return sorted((dict(r) for r in rows),
                  key=lambda r: tuple(_sort_value(r.get(n)) for n in order))


def arrow_batch(rows: Sequence[Mapping[str, Any]], schema: Any) -> Any:
    """``rows`` (dicts naming some of ``schema``'s fields; a missing one is null) as one
    Arrow record batch of ``schema``, built column by column: one ``pa.array`` per field
    some row names, ``pa.nulls`` for the others. Same result as
    ``RecordBatch.from_pylist(rows, schema=schema)`` at about a tenth of its cost on these
    rows (0.7 against 6.5 µs a ``route_changes`` row with its 1.7 kB route text, on the
    63-column schema of the Spark steps; ``from_pylist`` looks every field up in every
    row). A value of the wrong type raises Arrow's error (or `OverflowError`), its message
    prefixed with the field's name. O(rows × named fields + fields)."""
    import pyarrow as pa

    count = len(rows)
    named: set[str] = set()
    for row in rows:
        named.update(row)
    arrays = []
    for field in schema:
        if field.name not in named:
            arrays.append(pa.nulls(count, field.type))
            continue
        try:
            arrays.append(pa.array([row.get(field.name) for row in rows], field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise type(exc)(f"{field.name}: {exc}") from exc
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def write_local_tables(tables: dict[str, list[dict[str, Any]]], out_dir: Path) -> None:
    """Write the reference's tables as Parquet, the layout Spark writes
    (``out_dir/<table>/part-00000.parquet``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for name, rows in tables.items():
        target = out_dir / name
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        schema = TABLES[name].arrow_schema()
        pq.write_table(pa.Table.from_batches([arrow_batch(rows, schema)], schema=schema),
                       target / "part-00000.parquet")
