"""The output tables: names, columns, types, sort keys and meanings, in one place.

Both engines write exactly these columns: the Spark engine builds its ``StructType`` from
`Table.spark_schema`, the reference (``_reference.py``) returns rows with these keys and
writes Parquet with `Table.arrow_schema`. A row is a `Row` (a dict naming the table's
columns) and travels between stages as an `Emitted` pair (table name, row). Every time is
an integer epoch in milliseconds (a ``long``, named ``*_ms``); durations are in ms too.

Also here, as facts of the tables both engines and the summary share: the canonical row
order (`sort_rows`), how rejection reasons are grouped (`reason_key`), and which columns
the summary and the report read (`SUMMARY_COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import attrs

__all__ = ["SUMMARY_COLUMNS", "TABLES", "Column", "Emitted", "Row", "Table", "arrow_batch",
           "arrow_schema", "arrow_type", "reason_key", "rows_equal", "sort_rows", "sort_value"]

#: One output row: column name → value (ints for ``long``, lists for ``array<string>``).
Row: TypeAlias = dict[str, Any]
#: A row on its way out of a stage: (table name, row). A stage may also emit rows of its
#: own kinds between stages (``contrib``, ``line``, ``misrouted``), never written.
Emitted: TypeAlias = tuple[str, Row]

_TYPES = ("string", "long", "double", "boolean", "array<string>")


@attrs.frozen(kw_only=True)
class Column:
    """One column of an output table: ``type`` is a Spark DDL type among ``string``,
    ``long``, ``double``, ``boolean`` and ``array<string>``; ``nullable`` says whether a
    row may hold None there. A frozen value: O(1) to build and to read."""

    name: str
    type: str = attrs.field(validator=attrs.validators.in_(_TYPES))
    doc: str
    nullable: bool = False


@attrs.frozen(kw_only=True)
class Table:
    """An output table: its columns, the key its rows are sorted by, and what a row is.
    A frozen value: `names` and the schemas cost O(columns) a call; see `TABLES`."""

    name: str
    doc: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The column names, in order. O(columns)."""
        return tuple(c.name for c in self.columns)

    def ddl(self) -> str:
        """The schema as a Spark DDL string (``"ns string, seq long, ..."``). O(columns)."""
        return ", ".join(f"`{c.name}` {c.type}" for c in self.columns)

    def spark_schema(self) -> Any:
        """The ``pyspark.sql.types.StructType`` of the table (imports pyspark). O(columns)."""
        from pyspark.sql import types as t

        kinds = {"string": t.StringType(), "long": t.LongType(), "double": t.DoubleType(),
                 "boolean": t.BooleanType(),
                 "array<string>": t.ArrayType(t.StringType(), containsNull=False)}
        return t.StructType([t.StructField(c.name, kinds[c.type], nullable=True)
                             for c in self.columns])

    def arrow_schema(self) -> Any:
        """The ``pyarrow.Schema`` of the table (imports pyarrow). O(columns)."""
        return arrow_schema((c.name, c.type) for c in self.columns)


def arrow_type(kind: str) -> Any:
    """The pyarrow type of a column type of `Column.type` (imports pyarrow). O(1)."""
    import pyarrow as pa

    return {"string": pa.string(), "long": pa.int64(), "double": pa.float64(),
            "boolean": pa.bool_(), "array<string>": pa.list_(pa.string())}[kind]


def arrow_schema(columns: Iterable[tuple[str, str]]) -> Any:
    """A nullable ``pyarrow.Schema`` of (name, `Column.type`) pairs. O(columns)."""
    import pyarrow as pa

    return pa.schema([pa.field(name, arrow_type(kind), nullable=True)
                      for name, kind in columns])


def _table(name: str, *, key: str, doc: str, columns: str) -> Table:
    """A `Table` from its columns written one a line: ``name  type  meaning``, a type
    ending in ``?`` for a nullable column; an indented line continues the meaning above."""
    specs: list[list[str]] = []
    for line in columns.splitlines():
        if not line.strip():
            continue
        if line.startswith(" "):
            specs[-1][2] += " " + line.strip()
        else:
            column, kind, meaning = line.split(maxsplit=2)
            specs.append([column, kind, meaning])
    return Table(name=name, doc=doc, key=tuple(key.split()), columns=tuple(
        Column(name=column, type=kind.rstrip("?"), doc=meaning, nullable=kind.endswith("?"))
        for column, kind, meaning in specs))


#: A broker's columns, first in ``sessions`` and ``expiries``.
_BROKER = """\
ns                    string    the name server whose journal this came from
cluster               string    the broker's cluster
broker_name           string    its broker group
broker_id             long      its id in the group (0 = master)
broker_addr           string    its address, host:port
"""

NAME_SERVERS = _table("name_servers", key="ns", doc=(
    "One row per name server journal: its span and record counts."), columns="""
ns                    string    the name server
first_ms              long      the earliest record time (ms)
last_ms               long      the latest record time (ms); the end of the journal
records               long      accepted records (headers not counted)
restarts              long      restart headers after the first header
gaps                  long      jumps in the accepted sequence numbers (lines missing or
                                rejected)
rejected              long      lines of this name server set aside (read or replay)
""")

SESSIONS = _table("sessions", key="ns cluster broker_addr start_ms", doc=(
    "One row per continuous liveness of a broker address on a name server: from the "
    "registration that created its live entry to the event that removed it."),
    columns=_BROKER + """
start_ms              long      the registration that made the address live (ms)
end_ms                long      the removal (ms), or the end of the journal for 'open'
end_reason            string    expired, unregistered, channel_closed, replaced (re-registered
                                as another group member) or open (still live at the end of
                                the journal)
duration_ms           long      end_ms - start_ms
heartbeats            long      liveness refreshes seen: accepted registrations, heartbeats
                                and data-version queries of the live address (the first
                                registration included)
last_heartbeat_ms     long      the last refresh (ms)
largest_gap_ms        long      the longest time between two refreshes (ms); 0 for one
""")

EXPIRIES = _table("expiries", key="ns detected_ms cluster broker_addr", doc=(
    "One row per broker removed by an expiry scan."), columns=_BROKER + """
last_heartbeat_ms     long      the broker's last refresh (ms)
detected_ms           long      the scan that removed it (ms)
latency_ms            long      detected_ms - last_heartbeat_ms
timeout_ms            long?     its heartbeat timeout (ms)
overdue_ms            long?     detected_ms - (last_heartbeat_ms + timeout_ms): how long the
                                dead broker stayed in routes after its deadline
seq                   long      the journal sequence number of the scan
""")

ROUTE_CHANGES = _table("route_changes", key="ns topic at_ms seq", doc=(
    "For each name server and topic, every instant its route (what pickup_route answers) "
    "changed, with the route after the change."), columns="""
ns                    string    the name server
topic                 string    the topic
at_ms                 long      when the route changed (ms)
seq                   long      the journal sequence number of the record that changed it
present               boolean   False when the topic has no route any more (TOPIC_NOT_EXIST)
groups         array<string>    the broker groups in the route, sorted
read_queue_count      long      total read queues
writable_queue_count  long      total write queues of rows with the write bit
digest                string?   a hash of the whole route (equal routes, equal digests)
route_json            string?   the route as RocketMQ JSON (TopicRouteData)
""")

ROUTES_AT = _table("routes_at", key="at_ms topic ns", doc=(
    "The route of every topic on every name server at each --at time, taken from "
    "route_changes (the last change at or before that time)."), columns="""
at_ms                 long      the time asked for (ms)
ns                    string    the name server
topic                 string    the topic
present               boolean   whether the name server had a route then
since_ms              long?     when that answer began (ms)
groups         array<string>    the broker groups in the route, sorted
writable_queue_count  long      total writable queues
digest                string?   route digest
""")

DISAGREEMENT = _table("disagreement", key="topic start_ms", doc=(
    "Maximal intervals during which the name servers answered differently for a topic "
    "(a missing route counts as an answer), within the span every journal covers."),
    columns="""
topic                 string    the topic
start_ms              long      when the answers started to differ (ms)
end_ms                long      when they agreed again, or the end of the common span (ms)
duration_ms           long      end_ms - start_ms
open_at_end           boolean   still differing at the end of the common span
variants              long      the most distinct answers seen at once
out_of_step    array<string>    name servers that at some instant did not hold the majority
                                answer (all of them when there was no strict majority)
""")

DISAGREEMENT_TOTALS = _table("disagreement_totals", key="topic", doc=(
    "Per topic: how many disagreement intervals and how long in total."), columns="""
topic                 string    the topic
intervals             long      number of disagreement intervals
total_ms              long      their total duration (ms)
longest_ms            long      the longest one (ms)
span_ms               long      the common span compared (ms)
share                 double?   total_ms / span_ms
""")

AVAILABILITY = _table("availability", key="topic ns", doc=(
    "Per topic and name server, the share of the topic's life with at least one writable "
    "queue: from its first appearance on any name server to the end of that journal, less "
    "the time after each deletion on purpose until it reappeared."), columns="""
ns                    string    the name server
topic                 string    the topic
window_start_ms       long      max(journal start, first appearance anywhere) (ms)
window_end_ms         long      the end of this name server's journal (ms)
window_ms             long      window_end_ms - window_start_ms (0 if the window is empty)
life_ms               long      the window less the time the topic was deleted on purpose
                                (from the deletion to its next appearance on any name
                                server) (ms)
writable_ms           long      time of the life with at least one writable queue (ms)
share                 double?   writable_ms / life_ms (null for an empty life)
outages               long      maximal intervals of the life without a writable queue
longest_outage_ms     long      the longest of them (0 if none) (ms)
deletions             long      how often the topic was deleted on purpose here (its route
                                vanished while no session of its brokers ended then)
deleted_ms            long?     the last deletion, if the topic did not appear again by the
                                end of this journal (ms)
""")

REJECTED = _table("rejected", key="source line stage", doc=(
    "Every record that could not be used, with the reason and where it came from."),
    columns="""
source                string    the file it came from
line                  long      its 1-based line number (the row number for Parquet input)
stage                 string    read (not a valid record) or replay (the manager refused it)
reason                string    why
ns                    string?   its name server, when known
seq                   long?     its sequence number, when known
text                  string?   the line as read
""")

#: Every output table by name, in the order they are written and summarised. A constant:
#: reading it costs nothing (O(1) a lookup).
TABLES: Mapping[str, Table] = {t.name: t for t in (
    NAME_SERVERS, SESSIONS, EXPIRIES, ROUTE_CHANGES, ROUTES_AT, DISAGREEMENT,
    DISAGREEMENT_TOTALS, AVAILABILITY, REJECTED)}


def sort_value(value: Any) -> tuple[int, Any]:
    """A value as the canonical order compares it: None first, lists as tuples. O(1)."""
    if value is None:
        return (0, 0)
    if isinstance(value, list):
        return (1, tuple(value))
    return (1, value)


def sort_rows(table: Table, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` as plain dicts in the table's canonical order: its key, then every column,
    so the order is total and both engines' rows compare as lists. O(n log n)."""
    order = (*table.key, *(n for n in table.names if n not in table.key))
    return sorted((dict(r) for r in rows),
                  key=lambda r: tuple(sort_value(r.get(n)) for n in order))


def arrow_batch(rows: Sequence[Mapping[str, Any]], schema: Any) -> Any:
    """``rows`` (dicts naming some of ``schema``'s fields; a missing one is null) as one
    Arrow record batch of ``schema``, built column by column: one ``pa.array`` per field
    some row names, ``pa.nulls`` for the others. Same result as
    ``RecordBatch.from_pylist(rows, schema=schema)`` at about a tenth of its cost on these
    rows (0.7 against 6.5 µs a ``route_changes`` row with its 1.7 kB route text, on the
    63-column schema of the Spark steps; ``from_pylist`` looks every field up in every
    row). A value of the wrong type raises Arrow's error (or `OverflowError`) again, its
    message prefixed with the field's name. O(rows × named fields + fields)."""
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
            exc.args = (f"{field.name}: {exc}", *exc.args[1:])  # Arrow's error, named
            raise
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def reason_key(reason: str) -> str:
    """The group of a rejection reason in the summary: its first clause, at most 80
    characters (numbers and names vary after it). Spark computes the same in SQL
    (``_spark_tables``). O(len(reason))."""
    return reason.split(":")[0][:80]


#: The columns of each table that the summary and the report read (None: all of them);
#: ``route_json`` is left out, it is large. Both engines return these rows, and the
#: ``rejected`` lines counted by file and `reason_key` as ``rejected_groups``.
SUMMARY_COLUMNS: Mapping[str, tuple[str, ...] | None] = {
    "name_servers": None, "sessions": None, "expiries": None, "disagreement": None,
    "availability": None,
    "route_changes": ("ns", "topic", "at_ms", "seq", "present", "groups",
                      "writable_queue_count"),
    "routes_at": ("at_ms", "topic", "ns", "present", "groups", "writable_queue_count",
                  "digest"),
}


def rows_equal(left: Mapping[str, list[Row]], right: Mapping[str, list[Row]]) -> list[str]:
    """Names of the tables whose rows differ between two sets of sorted tables (the
    differential tests and the benchmark's check). O(rows)."""
    return [name for name in TABLES if list(left.get(name, [])) != list(right.get(name, []))]
