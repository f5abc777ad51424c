"""The Spark pipeline: the reference's functions, run inside partitions.

Stages (every Python step calls the same code as `routing.pipeline.reference`):

1. **Lines** (`_spark_read`): Spark's text source, files cut into byte ranges, line
   numbers computed on the JVM; a regex (records as the recorder writes them) or one
   ``from_json`` with an explicit schema (other lines) names a line's name server.
2. **Read and replay.** When each local journal file holds one name server (the recorder's
   layout), each file is one task that its Python worker reads itself, in order
   (`_spark_steps.local_file_step`): the text never crosses into the JVM, no shuffle; a line
   of another name server sends the run to the general path below. When those files are
   fewer than the cores and one is larger than `_spark_read.SPLIT_READ_BYTES`, the general
   path is taken at once, so the files are read in byte ranges (at least ``SPLITS_PER_FILE``
   tasks a file) instead of one task each. General path (``partition="ns"``, the default):
   lines are hash-partitioned by name server (a salt spreads the name servers over tasks)
   and sorted into reading order; one `JournalReader` and one `ReplayDeriver` per name
   server stream them (the reader's state is per name server, so this equals reading
   everything in one process). Each task checks the JVM's key against Python's own (O(1) for
   a remembered periodic record, else a parse); if they ever disagree the stage is redone
   with Python's keys.
3. With ``partition="group"``, stage 2 only reads, and the accepted lines are replayed per
   (name server, broker-group component) of ``_plan.py`` (entries touching the whole name
   server are copied to every component), sorted by sequence number.
4. **Per topic.** With ``partition="ns"`` the replay of stage 2 emitted the route changes
   itself; their answers without the route texts (`_spark_steps.CHANGE_COLUMNS`) are
   partitioned by topic, sorted by time and swept by `TopicSweep.feed_changes`, while
   ``route_changes`` is written from the read stage. With ``partition="group"`` route
   contributions are swept by `TopicSweep.feed` into route changes (unions of parts).
   Either way the sweep makes routes at ``--at`` times, disagreement and availability over
   each topic's life (which needs the ends of the broker sessions, collected to the driver
   first: one tuple per session). Its jobs run in their own scheduler pool (`SWEEP_POOL`).

Rows travel between stages typed, through Arrow (`mapInArrow`): one wide schema holds the
columns of every table (`_spark_steps`), a row fills its own; no JSON round trip. The read
stage with ``partition="ns"`` narrows its route changes to their table's columns and packs
every other row into Arrow IPC bytes (`_spark_steps.packed`): the JVM persists the few
packed rows as opaque bytes instead of a 63-column row per value. Intermediate
results are persisted on disk (``DISK_ONLY``: no partition is ever held in the JVM heap) so
every table is computed once. Each Python task streams its sorted partition: it holds one
reader and one manager per name server or component, never the partition's lines. Cost on
2 cores: see ``docs/performance.md`` (pipeline).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import attrs

from ._connect import is_connect
from ._lifetime import session_removals
from ._outputs import Row
from ._plan import component_count, components
from ._read import NsStats, line_key, name_server_rows, rejected_counts
from ._schema import TABLES, sort_rows
from ._spark_read import read, read_lines, task_slots, to_parquet
from ._spark_steps import (
    CHANGE_COLUMNS,
    CONTRIB_COLUMNS,
    KILL_WORKER_ENV,
    PIECE_CHANGES,
    PIECE_REST,
    READ_DDL,
    WIDE_DDL,
    local_file_step,
    packed,
    read_step,
    replay_step,
    topic_step,
    unpack_step,
)
from .reference import RejectedRecords, gap_messages

__all__ = ["KILL_WORKER_ENV", "Analysis", "analyze", "plain_rows", "read_lines", "rows_equal",
           "to_parquet"]

Progress = Callable[[str], None]

#: The tables the topic sweep makes (``route_changes`` only with ``partition="group"``: a
#: whole name server's replay emits its route changes itself).
SWEPT_TABLES = ("route_changes", "routes_at", "disagreement", "disagreement_totals",
                "availability")
#: The scheduler pool of the topic sweep's jobs: under the FAIR scheduling `spark_session`
#: sets, it gets task slots as soon as its stages are ready, whatever else waits (under
#: FIFO, a session's default, pools are ignored).
SWEEP_POOL = "routing-sweep"
#: Partitions of the topic sweep per task slot (`_spark_read.task_slots`).
SWEEP_TASKS_PER_SLOT = 4
#: Tables `Analysis.write` writes at once (Spark jobs submitted from driver threads).
WRITE_JOBS = 4

# --------------------------------------------------------------------------- results


@attrs.frozen(kw_only=True)
class Analysis:
    """The output tables of one `analyze` run, as DataFrames (see ``docs/pipeline.md``).

    They are computed over persisted intermediate results: read them as often as needed,
    then call `unpersist`. ``partitions`` says how many replay partitions each name server
    was split into; ``read_tasks`` how many tasks read the JSON Lines files (one a file
    when read whole, at least ``SPLITS_PER_FILE`` a large file read in byte ranges; gzip is
    one a file; 0 when unknown: byte ranges on Spark Connect).
    """

    tables: Mapping[str, Any]
    partitions: Mapping[str, int]
    read_tasks: int = 0
    _persisted: tuple[Any, ...] = attrs.field(alias="persisted", default=())
    #: the topic sweep, computed in the background from `analyze`'s return on (its job
    #: overlaps the writing of the other tables), and the tables made from it
    _sweeping: Future[Any] | None = attrs.field(alias="sweeping", default=None)
    _swept: frozenset[str] = attrs.field(alias="swept", default=frozenset())

    def __getitem__(self, name: str) -> Any:
        return self.tables[name]

    def ready(self) -> None:
        """Wait until the topic sweep's job has ended (raises its error). `collect`,
        `write` and `unpersist` wait for it themselves; a table read directly before it
        ends is correct too, but may compute the sweep a second time."""
        if self._sweeping is not None:
            self._sweeping.result()

    def collect(self) -> dict[str, list[dict[str, Any]]]:
        """Every table as sorted plain rows, the shape `analyze_local` returns."""
        self.ready()
        return {name: sort_rows(TABLES[name], plain_rows(df)) for name, df in self.tables.items()}

    def write(self, out_dir: str, *, mode: str = "overwrite", jobs: int = WRITE_JOBS) -> None:
        """Write every table as Parquet under ``out_dir/<table>/``: one file per table, sorted
        by its key. One task per table reads the table's persisted blocks, sorts and
        writes: no shuffle, whose map side was one task per block (dozens, for tables of
        a few thousand rows; for ``route_changes`` more CPU in all and no earlier end, at
        10 M records). A global ``orderBy`` would add a sampling job per table. Up to
        ``jobs`` tables are written at once, from driver threads: most tables are small, and
        one at a time their jobs leave the cores idle between them (about 0.1–0.3 s of
        scheduling and commit each). The first error is raised once all have ended."""
        from concurrent.futures import ThreadPoolExecutor

        def one(name: str) -> None:
            if name in self._swept:
                self.ready()
            # every table is a filter of persisted frames (or a small local one): a
            # coalesced task only reads blocks, no upstream stage is pulled into it
            (self.tables[name].coalesce(1).sortWithinPartitions(*TABLES[name].key)
             .write.mode(mode).parquet(f"{out_dir.rstrip('/')}/{name}"))

        # the tables that need no sweep first, written while it runs; then the largest
        # table (its route JSON, one row per route change), the others beside it
        names = sorted(self.tables, key=lambda name: (name in self._swept,
                                                      name != "route_changes"))
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            done = [pool.submit(one, name) for name in names]
        for future in done:
            future.result()

    def unpersist(self) -> None:
        """Release the cached intermediate results (once the sweep has ended)."""
        if self._sweeping is not None:
            self._sweeping.exception()  # waits; its error, if any, was for the readers
        for df in self._persisted:
            df.unpersist()


# --------------------------------------------------------------------------- the pipeline


def _python_key() -> Any:
    """`line_key`'s name server as a Spark UDF (the slow, exact partition key)."""
    from pyspark.sql import functions as F

    return F.udf(lambda text: None if text is None else line_key(text)[0], "string")


def _read_stage(keyed: Any, count: int, salt: int, replay: bool,
                paths: Mapping[int, str], kill: str | None = None) -> Any:
    """Stage 2: partition by name server, sort into reading order, read (and replay) in
    Python. A text file's ``source`` is sent as its input number (``order_a``), not as its
    path on every row. With ``replay`` the output is packed (`READ_DDL`)."""
    from pyspark.sql import functions as F

    source = F.col("source")
    if paths:
        source = F.when(~F.col("order_a").isin(*paths), source)
    step = read_step(replay, dict(paths), kill)
    return (keyed.repartition(count, F.col("ns_key"), F.lit(salt))
            .sortWithinPartitions("ns_key", "order_a", "order_b", "line")
            .select("order_a", source.alias("source"), "line", "text", "raw", "ns_key")
            .mapInArrow(packed(step) if replay else step, READ_DDL if replay else WIDE_DDL))


def _unpacked(stage: Any, piece: str, ddl: str) -> Any:
    """The rows of one piece of a packed read stage (`_spark_steps.packed`), as a frame of
    ``ddl``: the JVM picks the piece's rows, a Python step reads their IPC streams."""
    from pyspark.sql import functions as F

    return (stage.filter(F.col("piece") == piece).select("ipc")
            .mapInArrow(unpack_step(), ddl))


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

    ends = ("ns", "broker_name", "end_ms", "end_reason")  # of a session: for the sweep

    def facts(stage: Any) -> tuple[Any, list[Any]]:
        """One job: the read stage's rows minus route contributions, persisted (the small
        tables are written from it), and what the driver needs from them (the misrouted
        flag, stats, rejected counts, the sessions' ends). With ``partition="ns"`` the
        stage is packed (`_spark_steps.packed`): its rest piece holds those rows."""
        if partition == "ns":
            stage = _unpacked(stage, PIECE_REST, WIDE_DDL)
        side = keep(stage.filter((F.col("kind") != "line") & (
            F.col("tbl").isNull() | ~F.col("tbl").isin("contrib", "route_changes"))))
        wanted = side.filter(F.col("kind").isin("misrouted", "stats", "counts")
                             | (F.col("tbl") == "sessions"))
        return side, wanted.select("kind", "tbl", "payload", *ends).collect()

    def misrouted(got: list[Any]) -> bool:
        return any(r["kind"] == "misrouted" for r in got)

    def drop(*frames: Any) -> None:
        for df in frames:
            df.unpersist()
            persisted.remove(df)

    stage2 = side = contributions = None
    got: list[Any] = []
    read_tasks = 0
    if found.whole_files is not None and partition == "ns" and not found.split:
        # One local journal file per name server: each file is one task, read in order by
        # its Python worker; no shuffle, no sort, the text never crosses into the JVM.
        say("reading journals (one task per journal file)")
        files = spark.range(0, len(found.whole_files), 1, len(found.whole_files))
        stage2 = keep(files.mapInArrow(
            packed(local_file_step(found.paths, found.whole_files, kill)), READ_DDL))
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
    rejected_by_ns: dict[str, int] | None = None
    if partition == "ns":
        # every table row but the route changes (which stay in the read stage's cache, in
        # their own columns: their route texts are most of its bytes)
        rows = side.filter(F.col("kind") == "row")
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
                        .mapInArrow(replay_step(spans, kill), WIDE_DDL))
        rows = contributions = replayed.unionByName(side.filter(F.col("kind") == "row"))
        sessions = [r.asDict() for r in rows.filter(F.col("tbl") == "sessions")
                    .select(*ends).collect()]

    def table(name: str, tagged: Any) -> Any:
        return tagged.filter(F.col("tbl") == name).select(*TABLES[name].names)

    say("sweeping topics")
    # which broker sessions ended when: tells a topic deleted on purpose from an outage
    removals = session_removals(sessions)
    tables: dict[str, Any] = {}
    # a few topics (served by every group) weigh most: more partitions than task slots
    # let the scheduler fill the cores around them
    sweep_parts = SWEEP_TASKS_PER_SLOT * task_slots(spark)
    if partition == "ns":
        # whole name servers: their replay emitted the route changes itself; the sweep
        # takes their answers without the route texts (digests, groups, queue counts)
        changes = stage2.filter(F.col("piece") == PIECE_CHANGES)
        tables["route_changes"] = changes.select(*TABLES["route_changes"].names)
        swept = keep(changes.select(*(c for c, _ in CHANGE_COLUMNS))
                     .repartition(sweep_parts, F.col("topic"))
                     .sortWithinPartitions("topic", "at_ms", "ns", "seq")
                     .mapInArrow(topic_step(spans, at, removals, changes=True), WIDE_DDL))
    else:
        assert contributions is not None
        contrib = contributions.filter(F.col("tbl") == "contrib").select(
            *(c for c, _ in CONTRIB_COLUMNS))
        swept = keep(contrib.repartition(sweep_parts, F.col("topic"))
                     .sortWithinPartitions("topic", "at_ms", "ns", "seq", "part")
                     .mapInArrow(topic_step(spans, at, removals), WIDE_DDL))
    for name in ("sessions", "expiries", "rejected"):
        tables[name] = table(name, rows)
    if found.notes:  # skipped, empty and cut-short files
        tables["rejected"] = tables["rejected"].unionByName(spark.createDataFrame(
            [tuple(r[c] for c in TABLES["rejected"].names) for r in found.notes],
            TABLES["rejected"].spark_schema()))
    swept_names = frozenset(SWEPT_TABLES) - tables.keys()
    for name in swept_names:
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
    # The sweep is computed once, by one job started here in the background: jobs that
    # read it at the same time would each start it, or wait for each other's partitions;
    # `Analysis.write` writes the other tables meanwhile.
    return Analysis(tables=ordered, partitions=parts, read_tasks=read_tasks,
                    persisted=tuple(persisted),
                    sweeping=_in_background(
                        swept.count, None if is_connect(spark) else spark.sparkContext,
                        SWEEP_POOL),
                    swept=swept_names)


def _in_background(job: Callable[[], Any], context: Any, pool: str) -> Future[Any]:
    """``job()`` run in a daemon thread (a Spark action: the session runs jobs from
    several threads at once), its jobs in scheduler ``pool`` (a thread's own property:
    PySpark pins each Python thread to a JVM thread; no ``context``, as on Spark Connect:
    the default pool); its result or error in the future."""
    future: Future[Any] = Future()

    def run() -> None:
        if future.set_running_or_notify_cancel():
            try:
                if context is not None:
                    context.setLocalProperty("spark.scheduler.pool", pool)
                future.set_result(job())
            except BaseException as exc:  # handed to whoever waits
                future.set_exception(exc)

    threading.Thread(target=run, name="routing-sweep", daemon=True).start()
    return future


def plain_rows(df: Any) -> list[dict[str, Any]]:
    """A DataFrame's rows as plain dicts (``Row.asDict(recursive=True)``'s values: ints,
    floats, strings, booleans, None, lists), fetched as Arrow (`DataFrame.toArrow`) rather
    than as pickled rows: about 0.3 µs a value against 2–3 µs for ``collect()`` and
    ``asDict`` (the driver's share of a 10 M-record run went from 5.3 to about 1 CPU s).
    The tables hold no map or struct columns, whose Arrow form would differ. O(rows)."""
    table = df.toArrow()
    return table.to_pylist()  # type: ignore[no-any-return]


def rows_equal(left: Mapping[str, list[Row]], right: Mapping[str, list[Row]]) -> list[str]:
    """Names of the tables whose rows differ (for tests and the benchmark's check)."""
    return [name for name in TABLES if list(left.get(name, [])) != list(right.get(name, []))]
