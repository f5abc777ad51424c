"""The Spark pipeline: the reference's functions, run inside partitions.

Stages (every Python step calls the same code as `routing.pipeline.reference`):

1. **Lines** (`_spark_read`): Spark's text source, files cut into byte ranges, line
   numbers computed on the JVM; a regex (records as the recorder writes them) or one
   ``from_json`` with an explicit schema (other lines) names a line's name server.
2. **Read and replay.** When each local journal file holds one name server (the
   recorder's layout), each file is one task that its Python worker reads itself, in
   order (`_local_file_step`): the text never crosses into the JVM, no shuffle; a line of
   another name server sends the run to the general path below. When those files are
   fewer than the cores and one is larger than `_spark_read.SPLIT_READ_BYTES`, the general
   path is taken at once, so the files are read in byte ranges (at least
   ``SPLITS_PER_FILE`` tasks a file) instead of one task each. General path
   (``partition="ns"``, the default): lines are hash-partitioned by name server (a salt
   spreads the name servers over tasks) and sorted into reading order; one
   `JournalReader` and one `ReplayDeriver` per name server stream them (the reader's
   state is per name server, so this equals reading everything in one process). Each
   task checks the JVM's key against Python's own (O(1) for a remembered periodic record,
   else a parse); if they ever disagree the stage is redone with Python's keys.
3. With ``partition="group"``, stage 2 only reads, and the accepted lines are replayed per
   (name server, broker-group component) of ``_plan.py`` (entries touching the whole name
   server are copied to every component), sorted by sequence number.
4. **Per topic.** Route contributions are partitioned by topic, sorted by time, and swept
   by `TopicSweep` into route changes, routes at ``--at`` times, disagreement and
   availability over each topic's life (which needs the ends of the broker sessions,
   collected to the driver first: one tuple per session).

Rows travel between stages typed, through Arrow (`mapInArrow`): one wide schema holds the
columns of every table (`_WIDE`), a row fills its own; no JSON round trip. Intermediate
results are persisted on disk (``DISK_ONLY``: no partition is ever held in the JVM heap) so
every table is computed once. Each Python task streams its sorted partition: it holds one
reader and one manager per name server or component, never the partition's lines. Cost on
2 cores: see ``docs/performance.md`` (pipeline).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from ..journal import JournalEntry, JournalReader
from ._lifetime import Removals, session_removals
from ._outputs import Emitted, ReplayDeriver, Row
from ._plan import component_count, components, nodes_of, replay_entry
from ._read import (
    NsReading,
    NsStats,
    decode_line,
    line_key,
    name_server_rows,
    raw_lines,
    rejected_counts,
)
from ._schema import TABLES, sort_rows
from ._spark_read import read, read_lines, to_parquet
from ._topics import Contribution, sweep_topic
from .reference import RejectedRecords, gap_messages

__all__ = ["Analysis", "analyze", "read_lines", "rows_equal", "to_parquet"]

Progress = Callable[[str], None]

#: Columns that tag a Python stage's output rows (besides the tables' own columns).
_TAG_COLUMNS = (("kind", "string"), ("tbl", "string"), ("comp", "long"), ("primary", "boolean"),
                ("op", "string"), ("ts", "long"), ("nodes", "array<string>"),
                ("part", "long"), ("payload", "string"))
#: Contributions: one partition's route of a topic after a record (`_topics.Contribution`).
_CONTRIB_COLUMNS = (("ns", "string"), ("topic", "string"), ("at_ms", "long"), ("seq", "long"),
                    ("part", "long"), ("route_json", "string"))
_BATCH_ROWS = 2048
#: ... or fewer, once their route and line texts reach this many characters (a route of a
#: topic that every group serves can be 100 kB)
_BATCH_CHARS = 4 << 20
#: Tables `Analysis.write` writes at once (Spark jobs submitted from driver threads).
WRITE_JOBS = 4

#: Testing only (fault injection): a file path. The first replay task that runs while it is
#: set creates that file (atomically: one task wins) after handing its first batch to Spark,
#: then kills its own Python worker (``os._exit``); Spark must retry the task and the tables
#: must not change. Read on the driver when `analyze` starts, so it needs no worker setup.
KILL_WORKER_ENV = "ROUTING_TEST_KILL_WORKER_ONCE"


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


def _wide_columns() -> tuple[tuple[str, str], ...]:
    """Every column a Python stage may emit: the tags, the contributions, the accepted
    lines (``source, line, text``) and every table's columns, each name once with one type.
    A row fills the columns of its table and leaves the rest null, so rows travel typed,
    through Arrow, with no JSON round trip."""
    columns: dict[str, str] = {}
    specs = [*_TAG_COLUMNS, *_CONTRIB_COLUMNS, ("source", "string"), ("line", "long"),
             ("text", "string")]
    specs += [(c.name, c.type) for table in TABLES.values() for c in table.columns]
    for name, kind in specs:
        if columns.setdefault(name, kind) != kind:
            raise AssertionError(f"column {name!r} has two types: {columns[name]}, {kind}")
    return tuple(columns.items())


_WIDE = _wide_columns()
_WIDE_DDL = ", ".join(f"`{name}` {kind}" for name, kind in _WIDE)


# --------------------------------------------------------------------------- results


@attrs.frozen(kw_only=True)
class Analysis:
    """The output tables of one `analyze` run, as DataFrames (see ``docs/pipeline.md``).

    They are computed over persisted intermediate results: read them as often as needed,
    then call `unpersist`. ``partitions`` says how many replay partitions each name server
    was split into; ``read_tasks`` how many tasks read the JSON Lines files (one a file
    when read whole, at least ``SPLITS_PER_FILE`` a large file read in byte ranges; gzip is
    one a file).
    """

    tables: Mapping[str, Any]
    partitions: Mapping[str, int]
    read_tasks: int = 0
    _persisted: tuple[Any, ...] = attrs.field(alias="persisted", default=())

    def __getitem__(self, name: str) -> Any:
        return self.tables[name]

    def collect(self) -> dict[str, list[dict[str, Any]]]:
        """Every table as sorted plain rows, the shape `analyze_local` returns."""
        return {name: sort_rows(TABLES[name], [r.asDict(recursive=True) for r in df.collect()])
                for name, df in self.tables.items()}

    def write(self, out_dir: str, *, mode: str = "overwrite", jobs: int = WRITE_JOBS) -> None:
        """Write every table as Parquet under ``out_dir/<table>/``: one file per table, sorted
        by its key (one shuffle and one sort per table; a global ``orderBy`` would add a
        sampling job per table, seconds in all for tables of a few thousand rows). Up to
        ``jobs`` tables are written at once, from driver threads: most tables are small, and
        one at a time their jobs leave the cores idle between them (about 0.1–0.3 s of
        scheduling and commit each). The first error is raised once all have ended."""
        from concurrent.futures import ThreadPoolExecutor

        def one(name: str) -> None:
            (self.tables[name].repartition(1).sortWithinPartitions(*TABLES[name].key)
             .write.mode(mode).parquet(f"{out_dir.rstrip('/')}/{name}"))

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            done = [pool.submit(one, name) for name in self.tables]
        for future in done:
            future.result()

    def unpersist(self) -> None:
        """Release the cached intermediate results."""
        for df in self._persisted:
            df.unpersist()


# --------------------------------------------------------------------------- python steps


def _rows_of(batches: Iterable[Any], names: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    for batch in batches:
        columns = [batch.column(batch.schema.get_field_index(n)).to_pylist() for n in names]
        yield from zip(*columns, strict=True)


def _to_batches(rows: Iterable[dict[str, Any]]) -> Iterator[Any]:
    """Rows (dicts naming some of the `_WIDE` columns) as Arrow batches of the wide schema."""
    import pyarrow as pa

    schema = _arrow_schema()
    chunk: list[dict[str, Any]] = []
    held = 0  # characters of the long text columns in ``chunk``
    for row in rows:
        chunk.append(row)
        held += len(row.get("route_json") or "") + len(row.get("text") or "")
        if len(chunk) >= _BATCH_ROWS or held >= _BATCH_CHARS:
            yield pa.RecordBatch.from_pylist(chunk, schema=schema)
            chunk = []
            held = 0
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk, schema=schema)


def _arrow_schema() -> Any:
    import pyarrow as pa

    types = {"string": pa.string(), "long": pa.int64(), "double": pa.float64(),
             "boolean": pa.bool_(), "array<string>": pa.list_(pa.string())}
    return pa.schema([pa.field(name, types[kind]) for name, kind in _WIDE])


def _tag_rows(emitted: Iterable[Emitted], rejected: dict[str, int] | None = None
              ) -> Iterator[dict[str, Any]]:
    """Table rows as wide rows; ``rejected`` (if given) counts the ``rejected`` rows of
    each name server, as `_read.rejected_counts` does."""
    for table, row in emitted:
        tagged = dict(row)
        tagged["kind"] = "row"
        tagged["tbl"] = table
        if rejected is not None and table == "rejected" and row.get("ns") is not None:
            rejected[row["ns"]] = rejected.get(row["ns"], 0) + 1
        yield tagged


def _read_step(replay: bool, paths: Mapping[int, str], kill: str | None = None
               ) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """Stage 2b: one reader per task over lines sorted by (name server, reading order).
    With ``replay`` (``partition="ns"``), also replay and derive each whole name server;
    otherwise emit each accepted line with the nodes it touches."""

    def step(batches: Iterable[Any]) -> Iterator[Any]:
        return _killing_once(_to_batches(_read_rows(batches, replay, paths)), kill)

    return step


def _local_file_step(paths: Mapping[int, str], names: Mapping[int, str],
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
        for (index,) in _rows_of(batches, ("id",)):
            order = keys[index]
            path, ns = paths[order], names[order]
            for number, text, raw in raw_lines(opened[order]):
                yield order, path, number, text, raw, ns

    def step(batches: Iterable[Any]) -> Iterator[Any]:
        return _killing_once(_to_batches(_read_rows(lines(batches), True, paths, rows=True)),
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
    tuples = batches if rows else _rows_of(
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
            if steady_deriver is not None and steady_deriver.renew(hit[3], hit[2]):
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
                deriver = derivers[ns] = ReplayDeriver(ns, 0, end_ms=0)
            yield from _tag_rows(deriver.apply(entry, (source, line, text)), rejected)
        else:
            yield {"kind": "line", "ns": ns, "seq": entry.seq, "ts": entry.at_ms,
                   "op": entry.op, "source": source, "line": line, "text": text,
                   "nodes": list(nodes_of(entry))}
    yield from finish(current)
    for stats in reading.stats.values():
        yield {"kind": "stats", "ns": stats.ns, "payload": json.dumps(stats.to_json())}
    yield {"kind": "counts", "payload": json.dumps(rejected)}


def _replay_step(spans: Mapping[str, tuple[int, int]], kill: str | None = None
                 ) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """Stage 3: replay each (name server, component) of the task, lines in seq order."""

    def step(batches: Iterable[Any]) -> Iterator[Any]:
        return _killing_once(_to_batches(_tag_rows(_replay_rows(batches, spans))), kill)

    return step


def _replay_rows(batches: Iterable[Any], spans: Mapping[str, tuple[int, int]]
                 ) -> Iterator[Emitted]:
    key: tuple[str, int] | None = None
    reader = JournalReader()
    deriver: ReplayDeriver | None = None
    for ns, comp, primary, seq, ts, op, source, line, text in _rows_of(
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


def _topic_step(spans: Mapping[str, tuple[int, int]], at: Sequence[int],
                removals: Removals) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """Stage 4: sweep each topic of the task (contributions sorted by time)."""

    def step(batches: Iterable[Any]) -> Iterator[Any]:
        return _to_batches(_tag_rows(_topic_rows(batches, spans, at, removals)))

    return step


def _topic_rows(batches: Iterable[Any], spans: Mapping[str, tuple[int, int]],
                at: Sequence[int], removals: Removals) -> Iterator[Emitted]:
    names = ("ns", "topic", "at_ms", "seq", "part", "route_json")
    rows = (Contribution(ns=r[0], topic=r[1], at_ms=r[2], seq=r[3], part=r[4], route_json=r[5])
            for r in _rows_of(batches, names))
    for topic, group in itertools.groupby(rows, key=lambda c: c.topic):
        yield from sweep_topic(topic, group, spans, at, removals=removals)


# --------------------------------------------------------------------------- the pipeline


def _python_key() -> Any:
    """`line_key`'s name server as a Spark UDF (the slow, exact partition key)."""
    from pyspark.sql import functions as F

    return F.udf(lambda text: None if text is None else line_key(text)[0], "string")


def _read_stage(keyed: Any, count: int, salt: int, replay: bool,
                paths: Mapping[int, str], kill: str | None = None) -> Any:
    """Stage 2: partition by name server, sort into reading order, read (and replay) in
    Python. A text file's ``source`` is sent as its input number (``order_a``), not as its
    path on every row."""
    from pyspark.sql import functions as F

    source = F.col("source")
    if paths:
        source = F.when(~F.col("order_a").isin(*paths), source)
    return (keyed.repartition(count, F.col("ns_key"), F.lit(salt))
            .sortWithinPartitions("ns_key", "order_a", "order_b", "line")
            .select("order_a", source.alias("source"), "line", "text", "raw", "ns_key")
            .mapInArrow(_read_step(replay, dict(paths), kill), _WIDE_DDL))


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


def analyze(spark: Any, sources: Any, *, at: Sequence[int] = (), strict: bool = False,
            partition: str = "ns", progress: Progress | None = None) -> Analysis:
    """Analyze journals on ``spark``; the tables equal `analyze_local`'s.

    ``sources``: journal paths (files or folders: JSON Lines, ``.gz``, or Parquet copies
    from `to_parquet`; local or any URI Spark reads) or ``{name: lines}``. ``at``: times
    (ms) for ``routes_at``. ``strict``: raise `RejectedRecords` if any line was set aside.
    ``partition``: ``"ns"`` (read and replay each name server in one task, the default:
    no line is shuffled twice) or ``"group"`` (replay each name server's independent
    broker-group sets apart, after reading it whole). ``progress`` is told the
    name of each step as it starts.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if partition not in ("group", "ns"):
        raise ValueError(f"partition must be 'group' or 'ns', got {partition!r}")
    say = progress or (lambda _step: None)
    kill = os.environ.get(KILL_WORKER_ENV) or None
    at = sorted({int(t) for t in at})
    persisted: list[Any] = []

    def keep(df: Any) -> Any:
        df = df.persist(StorageLevel.DISK_ONLY)
        persisted.append(df)
        return df

    say("listing inputs")
    found = read(spark, sources)
    # One parse per line on the JVM, with an explicit schema, names the partition key.
    # A record as the recorder writes it starts with {"ns":"<name>", (a regex, no parse);
    # other lines (headers, hand-made ones) take one from_json with an explicit schema.
    keys = F.from_json("text", "journal string, nameserver string, ns string")
    parsed = F.when(keys["journal"].isNotNull(), keys["nameserver"]).otherwise(keys["ns"])
    prefix = F.regexp_extract("text", r'^\{"ns":"([^"\\]*)",', 1)
    jvm_key = F.when(prefix != "", prefix).otherwise(parsed)
    names: list[str] | None = None
    if found.first_names is not None:  # local files: their first lines name the servers
        names = sorted(found.first_names)

    def name_servers() -> list[str]:
        """Only headers name new name servers: a cheap substring filter, then parse those."""
        if names is not None:
            return names
        say("finding name servers")
        headers = found.texts.filter(F.col("text").contains('"journal"'))
        return sorted(r[0] for r in headers.select(parsed.alias("k")).distinct().collect()
                      if r[0] is not None)

    def facts(stage: Any) -> tuple[Any, list[Any]]:
        """One job: the read stage's rows minus route contributions, persisted (the small
        tables are written from it), and what the driver needs from them (the misrouted
        flag, stats, rejected counts, the sessions' ends)."""
        side = keep(stage.filter((F.col("kind") != "line")
                                 & (F.col("tbl").isNull() | (F.col("tbl") != "contrib"))))
        wanted = side.filter(F.col("kind").isin("misrouted", "stats", "counts")
                             | (F.col("tbl") == "sessions"))
        return side, wanted.select("kind", "tbl", "payload", "ns", "broker_name", "end_ms",
                                   "end_reason").collect()

    def misrouted(got: list[Any]) -> bool:
        return any(r["kind"] == "misrouted" for r in got)

    def drop(*frames: Any) -> None:
        for df in frames:
            df.unpersist()
            persisted.remove(df)

    stage2 = side = None
    got: list[Any] = []
    read_tasks = 0
    if found.whole_files is not None and partition == "ns" and not found.split:
        # One local journal file per name server: each file is one task, read in order by
        # its Python worker; no shuffle, no sort, the text never crosses into the JVM.
        say("reading journals (one task per journal file)")
        files = spark.range(0, len(found.whole_files), 1, len(found.whole_files))
        stage2 = keep(files.mapInArrow(
            _local_file_step(found.paths, found.whole_files, kill), _WIDE_DDL))
        read_tasks = len(found.whole_files)
        side, got = facts(stage2)
        if misrouted(got):  # some file holds another name server's lines
            drop(stage2, side)
            stage2 = None
    if stage2 is None:
        read_tasks = found.scan_tasks()
        count, salt = _salted_partitions(spark, name_servers())
        if found.split:  # few large files: byte ranges, then one replay task per name server
            say("reading journals (byte ranges, then one task per name server)")
        else:
            say("reading journals (one task per name server)")
        stage2 = keep(_read_stage(found.lines.withColumn("ns_key", jvm_key), count, salt,
                                  partition == "ns", found.paths, kill))
        side, got = facts(stage2)
        if misrouted(got):
            # Spark's JSON path and Python's json disagree on some line's name server (for
            # example duplicate keys): partition by the reader's own key instead.
            say("re-reading with Python's keys")
            drop(stage2, side)
            keyed = found.lines.withColumn("ns_key", _python_key()("text"))
            stage2 = keep(_read_stage(keyed, count, salt, partition == "ns", found.paths,
                                      kill))
            side, got = facts(stage2)
    stats = [NsStats.from_json(json.loads(r["payload"])) for r in got if r["kind"] == "stats"]
    spans = {s.ns: (s.first_ms, s.last_ms) for s in stats}

    assert side is not None
    ends = ("ns", "broker_name", "end_ms", "end_reason")
    rejected_by_ns: dict[str, int] | None = None
    if partition == "ns":
        rows = side.filter(F.col("kind") == "row")  # every table row but the contributions
        contributions = stage2
        parts = dict.fromkeys(spans, 1)
        sessions = [{c: r[c] for c in ends} for r in got if r["tbl"] == "sessions"]
        rejected_by_ns = rejected_counts(found.notes)
        for r in got:
            if r["kind"] == "counts":
                for ns, n in json.loads(r["payload"]).items():
                    rejected_by_ns[ns] = rejected_by_ns.get(ns, 0) + n
    else:
        say("planning broker-group partitions")
        accepted = stage2.filter(F.col("kind") == "line").select(
            "ns", "seq", "ts", "op", "source", "line", "text", "nodes")
        node_sets = [(r["ns"], tuple(r["nodes"])) for r in
                     accepted.select("ns", "nodes").distinct().collect()]
        node_sets += [(ns, ()) for ns in spans]
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
        say("replaying (one task per name server and broker-group set)")
        replayed = keep(routed.repartition(F.col("ns"), F.col("comp"))
                        .sortWithinPartitions("ns", "comp", "seq")
                        .select("ns", "comp", "primary", "seq", "ts", "op", "source", "line",
                                "text")
                        .mapInArrow(_replay_step(spans, kill), _WIDE_DDL))
        rows = contributions = replayed.unionByName(side.filter(F.col("kind") == "row"))
        sessions = [r.asDict() for r in rows.filter(F.col("tbl") == "sessions")
                    .select(*ends).collect()]

    def table(name: str, tagged: Any) -> Any:
        return tagged.filter(F.col("tbl") == name).select(*TABLES[name].names)

    say("sweeping topics")
    # which broker sessions ended when: tells a topic deleted on purpose from an outage
    removals = session_removals(sessions)
    contrib = contributions.filter(F.col("tbl") == "contrib").select(
        *(c for c, _ in _CONTRIB_COLUMNS))
    swept = keep(contrib.repartition(F.col("topic"))
                 .sortWithinPartitions("topic", "at_ms", "ns", "seq", "part")
                 .mapInArrow(_topic_step(spans, at, removals), _WIDE_DDL))
    # computed here, once: jobs that read it at the same time (`Analysis.write`) would
    # otherwise each start the sweep, or wait for each other's partitions
    swept.count()
    tables: dict[str, Any] = {}
    for name in ("sessions", "expiries", "rejected"):
        tables[name] = table(name, rows)
    if found.notes:  # skipped, empty and cut-short files
        tables["rejected"] = tables["rejected"].unionByName(spark.createDataFrame(
            [tuple(r[c] for c in TABLES["rejected"].names) for r in found.notes],
            TABLES["rejected"].spark_schema()))
    for name in ("route_changes", "routes_at", "disagreement", "disagreement_totals",
                 "availability"):
        tables[name] = table(name, swept)

    if rejected_by_ns is None:  # partition="group": the replay stage rejects lines too
        say("counting rejected lines")
        rejected_by_ns = {r["ns"]: int(r["count"]) for r in
                          tables["rejected"].filter(F.col("ns").isNotNull()).groupBy("ns")
                          .count().collect()}
    ns_rows = name_server_rows(stats, rejected_by_ns)
    tables["name_servers"] = spark.createDataFrame(
        [tuple(r[c] for c in TABLES["name_servers"].names) for r in ns_rows],
        TABLES["name_servers"].spark_schema())
    ordered = {name: tables[name] for name in TABLES}
    if strict:
        failing = tables["rejected"].filter(F.col("stage") != "skipped")
        total = sum(rejected_by_ns.values()) + failing.filter(F.col("ns").isNull()).count()
        gaps = gap_messages(stats)
        if total or gaps:
            first = failing.orderBy(*TABLES["rejected"].key).limit(5).collect()
            raise RejectedRecords([r.asDict(recursive=True) for r in first], total=total,
                                  gaps=gaps)
    return Analysis(tables=ordered, partitions=parts, read_tasks=read_tasks,
                    persisted=tuple(persisted))


def rows_equal(left: Mapping[str, list[Row]], right: Mapping[str, list[Row]]) -> list[str]:
    """Names of the tables whose rows differ (for tests and the benchmark's check)."""
    return [name for name in TABLES if list(left.get(name, [])) != list(right.get(name, []))]
