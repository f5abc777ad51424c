"""The replay stage on Spark: journal lines read and replayed inside tasks, and what the
driver collects of it (`replay` → `Replayed`).

Every task runs the reference's loop, ``_read_replay.ReadReplay``, on its share of lines:

* **One task per journal file** (``partition="ns"``, when each local file's first line
  names a different name server: the recorder's layout): the Python worker reads its file
  itself, in order (`local_file_step`): the text never crosses into the JVM, no shuffle.
  A line of another name server sends the run to the next way.
* **One task per name server** (other layouts, and few large files read in byte ranges):
  lines are hash-partitioned by name server (a salt spreads the name servers over tasks,
  `_salted_partitions`) and sorted into reading order; a regex (records as the recorder
  writes them) or one ``from_json`` with an explicit schema names a line's name server on
  the JVM (`_jvm_key`). Each task checks the JVM's key against Python's own; if they ever
  disagree the stage is redone with Python's keys (`_python_key`).
* With ``partition="group"`` the read only reads; the accepted lines are replayed per
  (name server, broker-group component) of ``_groups.py`` (entries touching the whole name
  server are copied to every component), sorted by sequence number (`replay_step`).

With ``partition="ns"`` the output is packed (`_spark_rows.packed`): the route changes in
their table's columns, every other row as Arrow IPC bytes. One job then collects what the
driver needs (stats, rejected counts, the sessions' ends for the sweep, the misrouted flag).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from ._files import Line, line_key, raw_lines
from ._groups import component_count, components, replay_components
from ._read_replay import NsStats, ReadReplay
from ._schema import TABLES, Row
from ._spark_lines import Lines
from ._spark_rows import (
    CONTRIB_COLUMNS,
    PIECE_CHANGES,
    PIECE_REST,
    READ_DDL,
    WIDE_DDL,
    packed,
    rows_of,
    tag_rows,
    to_batches,
    unpack_step,
)
from ._spark_run import SparkRun

__all__ = ["SESSION_ENDS", "Replayed", "local_file_step", "read_step", "replay",
           "replay_step"]

#: What the sweep needs of each session (which broker sessions ended when).
SESSION_ENDS = ("ns", "broker_name", "end_ms", "end_reason")
Step = Callable[[Iterable[Any]], Iterator[Any]]


@attrs.frozen(kw_only=True)
class Replayed:
    """The replay stage's output. ``rows``: wide rows (kind ``row``) of ``sessions``,
    ``expiries`` and ``rejected``; ``changes`` (``partition="ns"``): the ``route_changes``
    table; ``contributions`` (``partition="group"``): the route contributions
    (`CONTRIB_COLUMNS`), to be swept into route changes. On the driver: ``stats`` per name
    server, ``sessions`` (`SESSION_ENDS` of each), ``rejected`` lines per name server,
    replay ``partitions`` per name server and how many tasks read the text (``read_tasks``).
    """

    rows: Any
    changes: Any | None
    contributions: Any | None
    stats: tuple[NsStats, ...]
    sessions: tuple[Row, ...]
    rejected: Mapping[str, int]
    partitions: Mapping[str, int]
    read_tasks: int

    @property
    def spans(self) -> dict[str, tuple[int, int]]:
        """Each name server's journal [first, last] ms."""
        return {s.ns: (s.first_ms, s.last_ms) for s in self.stats}


def replay(run: SparkRun, found: Lines, partition: str) -> Replayed:
    """Read and replay ``found``: ``partition="ns"`` replays each name server whole as it is
    read, ``"group"`` reads first and replays each broker-group component apart. Runs the
    read's job (and, for ``"group"``, the replay's): O(lines) over the tasks."""
    from pyspark.sql import functions as F

    stage, side, got, read_tasks = _read(run, found, replay=partition == "ns")
    stats = tuple(NsStats.from_json(json.loads(r["payload"])) for r in got
                  if r["kind"] == "stats")
    rows = side.filter(F.col("kind") == "row")
    if partition == "group":
        return _replay_groups(run, stage, rows, stats, read_tasks)
    rejected: dict[str, int] = {}
    for r in got:
        if r["kind"] == "counts":
            for ns, n in json.loads(r["payload"]).items():
                rejected[ns] = rejected.get(ns, 0) + n
    return Replayed(
        rows=rows, contributions=None,
        changes=stage.filter(F.col("piece") == PIECE_CHANGES).select(
            *TABLES["route_changes"].names),
        stats=stats, sessions=tuple({c: r[c] for c in SESSION_ENDS} for r in got
                                    if r["tbl"] == "sessions"),
        rejected=rejected, partitions={s.ns: 1 for s in stats}, read_tasks=read_tasks)


def _read(run: SparkRun, found: Lines, *, replay: bool) -> tuple[Any, Any, list[Any], int]:
    """The read stage, persisted: (its frame, its rows but the route changes and
    contributions, persisted too, what the driver collected of them, read tasks)."""
    if replay and found.whole_files is not None and not found.split:
        # One local journal file per name server: each file is one task, read in order by
        # its Python worker; no shuffle, no sort, the text never crosses into the JVM.
        run.say("reading journals (one task per journal file)")
        files = run.spark.range(0, len(found.whole_files), 1, len(found.whole_files))
        stage = run.keep(files.mapInArrow(
            packed(local_file_step(found.paths, found.whole_files, run.kill)), READ_DDL))
        side, got = _facts(run, stage, packed_rows=True)
        if not _misrouted(got):
            return stage, side, got, len(found.whole_files)
        run.drop(stage, side)  # some file holds another name server's lines
    read_tasks = found.scan_tasks()
    count, salt = _salted_partitions(run.spark, _name_servers(run, found))
    run.say("reading journals (byte ranges, then one task per name server)" if found.split
            else "reading journals (one task per name server)")
    stage = run.keep(_by_name_server(run, found, _jvm_key(), count, salt, replay))
    side, got = _facts(run, stage, packed_rows=replay)
    if _misrouted(got):
        # Spark's JSON path and Python's json disagree on some line's name server (for
        # example duplicate keys): partition by the reader's own key instead.
        run.say("re-reading with Python's keys")
        run.drop(stage, side)
        stage = run.keep(_by_name_server(run, found, _python_key(), count, salt, replay))
        side, got = _facts(run, stage, packed_rows=replay)
    return stage, side, got, read_tasks


def _facts(run: SparkRun, stage: Any, *, packed_rows: bool) -> tuple[Any, list[Any]]:
    """One job: the read stage's rows minus route contributions, persisted (the small
    tables are written from it), and what the driver needs from them (the misrouted
    flag, stats, rejected counts, the sessions' ends). A packed stage
    (`_spark_rows.packed`) keeps those rows in its rest piece."""
    from pyspark.sql import functions as F

    if packed_rows:
        stage = (stage.filter(F.col("piece") == PIECE_REST).select("ipc")
                 .mapInArrow(unpack_step(), WIDE_DDL))
    side = run.keep(stage.filter((F.col("kind") != "line") & (
        F.col("tbl").isNull() | ~F.col("tbl").isin("contrib", "route_changes"))))
    wanted = side.filter(F.col("kind").isin("misrouted", "stats", "counts")
                         | (F.col("tbl") == "sessions"))
    return side, wanted.select("kind", "tbl", "payload", *SESSION_ENDS).collect()


def _misrouted(got: list[Any]) -> bool:
    return any(r["kind"] == "misrouted" for r in got)


def _header_key() -> Any:
    """A line's name server as a header (``nameserver``) or a record (``ns``) names it,
    parsed on the JVM with an explicit schema."""
    from pyspark.sql import functions as F

    keys = F.from_json("text", "journal string, nameserver string, ns string")
    return F.when(keys["journal"].isNotNull(), keys["nameserver"]).otherwise(keys["ns"])


def _jvm_key() -> Any:
    """One parse per line on the JVM names the partition key: a record as the recorder
    writes it starts with ``{"ns":"<name>",`` (a regex, no parse); other lines (headers,
    hand-made ones) take `_header_key`."""
    from pyspark.sql import functions as F

    prefix = F.regexp_extract("text", r'^\{"ns":"([^"\\]*)",', 1)
    return F.when(prefix != "", prefix).otherwise(_header_key())


def _python_key() -> Any:
    """`line_key`'s name server as a Spark UDF (the slow, exact partition key)."""
    from pyspark.sql import functions as F

    return F.udf(lambda text: None if text is None else line_key(text)[0], "string")("text")


def _name_servers(run: SparkRun, found: Lines) -> list[str]:
    """The name servers: those the local files' first lines name, else those the headers
    name (a cheap substring filter, then a parse of those)."""
    if found.first_names is not None:
        return sorted(found.first_names)
    from pyspark.sql import functions as F

    run.say("finding name servers")
    headers = found.texts.filter(F.col("text").contains('"journal"'))
    return sorted(r[0] for r in headers.select(_header_key().alias("k")).distinct().collect()
                  if r[0] is not None)


def _salted_partitions(spark: Any, names: Sequence[str]) -> tuple[int, int]:
    """(partitions, salt) such that hash(ns, salt) mod partitions differs for every name
    server (or collides least): one task per name server in the read stage."""
    from pyspark.sql import functions as F

    count = max(1, len(names))
    if count == 1:
        return 1, 0
    df = spark.createDataFrame([(n,) for n in names], "ns string").crossJoin(
        spark.range(0, 256).withColumnRenamed("id", "salt"))
    spread: dict[int, set[int]] = {}
    for r in df.select("salt", F.expr(f"pmod(hash(ns, salt), {count})").alias("p")).collect():
        spread.setdefault(int(r["salt"]), set()).add(int(r["p"]))
    return count, max(sorted(spread), key=lambda salt: len(spread[salt]))


def _by_name_server(run: SparkRun, found: Lines, key: Any, count: int, salt: int,
                    replay: bool) -> Any:
    """Lines partitioned by name server (``key``), sorted into reading order, read (and
    replayed) in Python. A text file's ``source`` is sent as its input number
    (``order_a``), not as its path on every row. With ``replay`` the output is packed
    (`READ_DDL`)."""
    from pyspark.sql import functions as F

    source = F.col("source")
    if found.paths:
        source = F.when(~F.col("order_a").isin(*found.paths), source)
    step = read_step(replay, dict(found.paths), run.kill)
    return (found.lines.withColumn("ns_key", key)
            .repartition(count, F.col("ns_key"), F.lit(salt))
            .sortWithinPartitions("ns_key", "order_a", "order_b", "line")
            .select("order_a", source.alias("source"), "line", "text", "raw", "ns_key")
            .mapInArrow(packed(step) if replay else step, READ_DDL if replay else WIDE_DDL))


def _replay_groups(run: SparkRun, stage: Any, rows: Any, stats: tuple[NsStats, ...],
                   read_tasks: int) -> Replayed:
    """``partition="group"``: plan the broker-group components of the accepted lines (one
    small job), replay each (name server, component) in a task of its own, collect the
    sessions' ends and count the rejected lines per name server (two more jobs over the
    persisted replay)."""
    from pyspark.sql import functions as F

    spark = run.spark
    run.say("planning broker-group partitions")
    accepted = stage.filter(F.col("kind") == "line").select(
        "ns", "seq", "ts", "op", "source", "line", "text", "nodes")
    node_sets = [(r["ns"], tuple(r["nodes"])) for r in
                 accepted.select("ns", "nodes").distinct().collect()]
    node_sets += [(s.ns, ()) for s in stats]
    comps = components(node_sets)
    parts = {ns: component_count(c) for ns, c in comps.items()}
    mapping = spark.createDataFrame(
        [(ns, node, comp) for ns, c in comps.items() for node, comp in c.items()],
        "ns string, first_node string, comp long")
    fanout = spark.createDataFrame(
        [(ns, list(range(parts[ns]))) for ns in comps], "ns string, comps array<long>")
    routed = (accepted
              .withColumn("first_node", F.when(F.size("nodes") > 0, F.col("nodes")[0]))
              .join(F.broadcast(mapping), ["ns", "first_node"], "left")
              .join(F.broadcast(fanout), ["ns"], "left")
              .select("ns", "seq", "ts", "op", "source", "line", "text",
                      F.posexplode(F.when(F.col("comp").isNull(), F.col("comps"))
                                   .otherwise(F.array(F.col("comp")))).alias("pos", "comp"))
              .withColumn("primary", F.col("pos") == 0))
    run.say("replaying (one task per name server and broker-group set)")
    spans = {s.ns: (s.first_ms, s.last_ms) for s in stats}
    replayed = run.keep(routed.repartition(F.col("ns"), F.col("comp"))
                        .sortWithinPartitions("ns", "comp", "seq")
                        .select("ns", "comp", "primary", "seq", "ts", "op", "source", "line",
                                "text")
                        .mapInArrow(replay_step(spans, run.kill), WIDE_DDL))
    rows = replayed.unionByName(rows)
    sessions = tuple(r.asDict() for r in rows.filter(F.col("tbl") == "sessions")
                     .select(*SESSION_ENDS).collect())
    run.say("counting rejected lines")  # the replay rejects lines too
    rejected = {r["ns"]: int(r["count"]) for r in
                rows.filter((F.col("tbl") == "rejected") & F.col("ns").isNotNull())
                .groupBy("ns").count().collect()}
    return Replayed(rows=rows, changes=None,
                    contributions=rows.filter(F.col("tbl") == "contrib").select(
                        *(c for c, _ in CONTRIB_COLUMNS)),
                    stats=stats, sessions=sessions, rejected=rejected, partitions=parts,
                    read_tasks=read_tasks)


# --------------------------------------------------------------------------- in the tasks

#: The columns of the lines a read task takes (`_by_name_server`).
_LINE_COLUMNS = ("order_a", "source", "line", "text", "raw", "ns_key")
#: The columns of the lines a component's replay task takes (`_groups.ComponentLine`).
_COMPONENT_COLUMNS = ("ns", "comp", "primary", "seq", "ts", "op", "source", "line", "text")


def read_step(replay: bool, paths: Mapping[int, str], kill: str | None = None) -> Step:
    """A read task over lines sorted by (name server, reading order): `ReadReplay` keyed by
    name server, replaying each whole name server with ``replay`` (``partition="ns"``),
    else emitting each accepted line with the nodes it touches."""

    def step(batches: Iterable[Any]) -> Iterator[Any]:
        return _killing_once(to_batches(_read_task(_keyed_lines(batches, paths), replay)),
                             kill)

    return step


def local_file_step(paths: Mapping[int, str], names: Mapping[int, str],
                    kill: str | None = None) -> Step:
    """A read task on whole local files, read by the Python worker itself: a task's rows are
    positions (``id``) in the sorted file indexes of ``names``; each file is read in order
    (`_files.raw_lines`, as the reference reads it) and replayed by `ReadReplay`, keyed by
    the name server of its first line. The JVM neither scans the text nor hands it over
    (the lines never cross into Arrow), so a record costs only its Python work."""
    paths, names = dict(paths), dict(names)
    keys = sorted(names)  # task row ``id`` i reads file ``keys[i]``
    # resolved on the driver: an executor's working directory is not the driver's
    opened = {order: os.path.abspath(path) for order, path in paths.items()}

    def lines(batches: Iterable[Any]) -> Iterator[Line]:
        for (index,) in rows_of(batches, ("id",)):
            order = keys[index]
            path, ns = paths[order], names[order]
            for number, text, raw in raw_lines(opened[order]):
                yield path, number, text, raw, ns

    def step(batches: Iterable[Any]) -> Iterator[Any]:
        return _killing_once(to_batches(_read_task(lines(batches), True)), kill)

    return step


def _keyed_lines(batches: Iterable[Any], paths: Mapping[int, str]) -> Iterator[Line]:
    """A read task's input as `Line` tuples: a text file's ``source`` from its input
    number (``order_a``), the JVM's name server as the key."""
    for batch in batches:
        order, source, line, text, raw, key = (
            batch.column(batch.schema.get_field_index(n)).to_pylist() for n in _LINE_COLUMNS)
        yield from zip([paths[o] if s is None else s for o, s in zip(order, source,
                                                                    strict=True)],
                       line, text, raw, key, strict=True)


def _read_task(lines: Iterable[Line], replay: bool) -> Iterator[Row]:
    """The rows of one read task (`ReadReplay.run`, keyed) and, at its end, one ``stats``
    row per name server and one ``counts`` row (the task's rejected rows per name server,
    JSON): with the ``sessions`` rows, all the driver collects, in one job."""
    loop = ReadReplay(replay=replay)
    yield from tag_rows(loop.run(lines, keyed=True))
    for stats in loop.reading.stats.values():
        yield {"kind": "stats", "ns": stats.ns, "payload": json.dumps(stats.to_json())}
    yield {"kind": "counts", "payload": json.dumps(loop.rejected)}


def replay_step(spans: Mapping[str, tuple[int, int]], kill: str | None = None) -> Step:
    """A replay task of ``partition="group"``: each (name server, component) of the task,
    lines in seq order (`_groups.replay_components`)."""

    def step(batches: Iterable[Any]) -> Iterator[Any]:
        lines = rows_of(batches, _COMPONENT_COLUMNS)
        return _killing_once(to_batches(tag_rows(replay_components(lines, spans))), kill)

    return step


def _killing_once(batches: Iterator[Any], marker: str | None) -> Iterator[Any]:
    """``batches``; with a ``marker`` path (`_spark_run.KILL_WORKER_ENV`), the first task
    to create it exits its Python worker right after its first batch went out."""
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
