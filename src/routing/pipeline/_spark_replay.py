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
* With ``partition="group"`` the read only reads; the accepted lines are then replayed
  per (name server, broker-group component): ``_spark_groups.py``.

With ``partition="ns"`` the output is packed (`_spark_rows.packed`): the route changes in
their table's columns, every other row as Arrow IPC bytes. One job then collects what the
driver needs (stats, rejected counts, the sessions' ends for the sweep, the misrouted flag).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from ._change_files import ChangeFiles, open_change_files
from ._files import Line, line_key, raw_lines
from ._read_replay import NsStats, ReadReplay, gap_messages, name_server_rows
from ._schema import TABLES, Emitted
from ._spark_groups import replay_groups
from ._spark_lines import Lines
from ._spark_rows import (
    KILL_WORKER_ENV,
    PIECE_CHANGES,
    READ_DDL,
    SESSION_ENDS,
    WIDE_DDL,
    Replayed,
    Step,
    packed,
    python_step,
    replay_job,
    rows_of,
    side_rows,
)
from ._spark_segments import replay_segments

__all__ = ["local_file_step", "read_step", "replay"]

Say = Callable[[str], object]


def replay(spark: Any, found: Lines, partition: str, say: Say) -> Replayed:
    """Read and replay ``found``: ``partition="ns"`` replays each name server's segments
    between snapshots as tasks of their own where it can (``_spark_segments.py``), else
    like ``"ns-whole"``, which replays each name server whole as it is read; ``"group"``
    reads first and replays each broker-group component apart. Runs the read's job (and,
    for ``"group"``, the replay's): O(lines) over the tasks."""
    from pyspark.sql import functions as F

    whole = partition != "group"
    if partition == "ns":  # split at the journals' snapshots where it can be
        split = replay_segments(spark, found, say, os.environ.get(KILL_WORKER_ENV) or None)
        if split is not None:
            return split
    stage, side, got, read_tasks, sink = _read(spark, found, whole, say)
    stats = [NsStats.from_json(json.loads(r["payload"])) for r in got if r["kind"] == "stats"]
    rows = side.filter(F.col("kind") == "row")
    if not whole:
        return replay_groups(spark, stage, side, rows, stats, read_tasks, say)
    rejected: dict[str, int] = {}
    for r in got:
        if r["kind"] == "counts":
            for ns, n in json.loads(r["payload"]).items():
                rejected[ns] = rejected.get(ns, 0) + n
    if sink is None:
        changes = stage.filter(F.col("piece") == PIECE_CHANGES).select(
            *TABLES["route_changes"].names)
        written: tuple[str, ...] = ()
    else:  # the tasks wrote them, a file each
        tasks = [t for t in range(read_tasks) if os.path.exists(sink.path(t))]
        written = tuple(sink.files(tasks))
        changes = sink.frame(spark, written)
    return Replayed(
        rows=rows, contributions=None,
        persisted=(stage, side) if sink is None else (stage, side, sink),
        changes=changes, change_files=written,
        spans={s.ns: (s.first_ms, s.last_ms) for s in stats},
        sessions=tuple({c: r[c] for c in SESSION_ENDS} for r in got if r["tbl"] == "sessions"),
        rejected=rejected, name_servers=tuple(name_server_rows(stats, rejected)),
        gaps=tuple(gap_messages(stats)), partitions={s.ns: 1 for s in stats},
        read_tasks=read_tasks)


def _read(spark: Any, found: Lines, replay: bool, say: Say
          ) -> tuple[Any, Any, list[Any], int, ChangeFiles | None]:
    """The read stage, persisted: (its frame, its side rows (`side_rows`), what the driver
    collected of them, read tasks, the files the tasks wrote their route changes to, one
    per task, if they did: whole local files on a local master). One job, two when a line
    turns out to be in another name server's group than the JVM's key put it, three when
    whole files held such a line."""
    from pyspark import StorageLevel

    kill = os.environ.get(KILL_WORKER_ENV) or None
    facts = ("kind", "tbl", "payload", *SESSION_ENDS)
    if replay and found.whole_files is not None and not found.split:
        # One local journal file per name server: each file is one task, read in order by
        # its Python worker; no shuffle, no sort, the text never crosses into the JVM.
        say("reading journals (one task per journal file)")
        files = spark.range(0, len(found.whole_files), 1, len(found.whole_files))
        sink = open_change_files(spark)
        step = local_file_step(found.paths, found.whole_files, kill, sink)
        stage = files.mapInArrow(packed(step), READ_DDL).persist(StorageLevel.DISK_ONLY)
        try:
            with replay_job(spark):
                side, got = side_rows(stage, pack=True, columns=facts)
        except BaseException:
            stage.unpersist()
            if sink is not None:
                sink.unpersist()
            raise
        if not any(r["kind"] == "misrouted" for r in got):
            return stage, side, got, len(found.whole_files), sink
        for df in (stage, side, *(() if sink is None else (sink,))):
            df.unpersist()  # some file holds another name server's lines
    count, salt = _salted_partitions(spark, _name_servers(found, say))
    say("reading journals (byte ranges, then one task per name server)" if found.split
        else "reading journals (one task per name server)")
    for key in (_jvm_key, _python_key):
        stage = _by_name_server(found, key(), count, salt, replay, kill).persist(
            StorageLevel.DISK_ONLY)
        with replay_job(spark):
            side, got = side_rows(stage, pack=replay, columns=facts)
        if key is _python_key or not any(r["kind"] == "misrouted" for r in got):
            break
        # Spark's JSON path and Python's json disagree on some line's name server (for
        # example duplicate keys): partition by the reader's own key instead.
        say("re-reading with Python's keys")
        for df in (stage, side):
            df.unpersist()
    return stage, side, got, found.read_tasks, None


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


def _name_servers(found: Lines, say: Say) -> list[str]:
    """The name servers: those the local files' first lines name, else those the headers
    name (a cheap substring filter, then a parse of those: one job)."""
    if found.first_names is not None:
        return sorted(found.first_names)
    from pyspark.sql import functions as F

    say("finding name servers")
    headers = found.texts.filter(F.col("text").contains('"journal"'))
    return sorted(r[0] for r in headers.select(_header_key().alias("k")).distinct().collect()
                  if r[0] is not None)


def _salted_partitions(spark: Any, names: Sequence[str]) -> tuple[int, int]:
    """(partitions, salt) such that hash(ns, salt) mod partitions differs for every name
    server (or collides least): one task per name server in the read stage. One small
    job."""
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


def _by_name_server(found: Lines, key: Any, count: int, salt: int, replay: bool,
                    kill: str | None) -> Any:
    """Lines partitioned by name server (``key``), sorted into reading order, read (and
    replayed) in Python. A text file's ``source`` is sent as its input number
    (``order_a``), not as its path on every row. With ``replay`` the output is packed
    (`READ_DDL`). Planning only, no job."""
    from pyspark.sql import functions as F

    source = F.col("source")
    if found.paths:
        source = F.when(~F.col("order_a").isin(*found.paths), source)
    step = read_step(replay, dict(found.paths), kill)
    return (found.lines.withColumn("ns_key", key)
            .repartition(count, F.col("ns_key"), F.lit(salt))
            .sortWithinPartitions("ns_key", "order_a", "order_b", "line")
            .select("order_a", source.alias("source"), "line", "text", "raw", "ns_key")
            .mapInArrow(packed(step) if replay else step, READ_DDL if replay else WIDE_DDL))


# --------------------------------------------------------------------------- in the tasks

#: The columns of the lines a read task takes (`_by_name_server`).
_LINE_COLUMNS = ("order_a", "source", "line", "text", "raw", "ns_key")


def read_step(replay: bool, paths: Mapping[int, str], kill: str | None = None) -> Step:
    """A read task over lines sorted by (name server, reading order): `ReadReplay` keyed by
    name server, replaying each whole name server with ``replay`` (``partition="ns"``),
    else emitting each accepted line with the nodes it touches."""
    return python_step(partial(_line_rows, paths=dict(paths), replay=replay), kill=kill)


def local_file_step(paths: Mapping[int, str], names: Mapping[int, str],
                    kill: str | None = None, sink: ChangeFiles | None = None) -> Step:
    """A read task on whole local files, read by the Python worker itself: a task's rows
    are positions (``id``) in the sorted file indexes of ``names``; each file is read in
    order (`_files.raw_lines`, as the reference reads it) and replayed by `ReadReplay`,
    keyed by the name server of its first line. The JVM neither scans the text nor hands
    it over (the lines never cross into Arrow), so a record costs only its Python work.
    Relative paths are resolved here, on the driver: an executor's working directory is
    not the driver's. With a ``sink``, a task's route changes go to its file there
    (`ChangeFiles.runs`, named by its first row's ``id``: one task per file), not among
    its rows."""
    opened = {order: (path, os.path.abspath(path), names[order])
              for order, path in paths.items() if order in names}
    return python_step(partial(_file_rows, files=[opened[i] for i in sorted(names)],
                               sink=sink), kill=kill)


def _line_rows(batches: Iterable[Any], *, paths: Mapping[int, str],
               replay: bool) -> Iterator[Emitted]:
    """A read task's rows: its lines as `Line` tuples (a text file's ``source`` from its
    input number, ``order_a``; the JVM's name server as the key)."""

    def lines() -> Iterator[Line]:
        for batch in batches:
            order, source, line, text, raw, key = (
                batch.column(batch.schema.get_field_index(n)).to_pylist()
                for n in _LINE_COLUMNS)
            yield from zip([paths[o] if s is None else s
                            for o, s in zip(order, source, strict=True)],
                           line, text, raw, key, strict=True)

    return _read_task(lines(), replay)


def _file_rows(batches: Iterable[Any], *, files: Sequence[tuple[str, str, str]],
               sink: ChangeFiles | None = None) -> Iterator[Emitted]:
    """A whole-file read task's rows: row ``id`` i of its input reads ``files[i]``
    (path as given, path to open, the name server of its first line); with a ``sink``,
    its route changes are written there instead, as the file of its first ``id``."""
    ids = [index for (index,) in rows_of(batches, ("id",))]

    def lines() -> Iterator[Line]:
        for index in ids:
            path, opened, ns = files[index]
            for number, text, raw in raw_lines(opened):
                yield path, number, text, raw, ns

    rows = _read_task(lines(), True)
    if sink is None or not ids:
        yield from rows
        return
    yield from sink.runs(ids[0]).divert(rows)


def _read_task(lines: Iterable[Line], replay: bool) -> Iterator[Emitted]:
    """The rows of one read task (`ReadReplay.run`, keyed) and, at its end, one ``stats``
    row per name server and one ``counts`` row (the task's rejected rows per name server,
    JSON): with the ``sessions`` rows, all the driver collects, in one job."""
    loop = ReadReplay(replay=replay)
    yield from loop.run(lines, keyed=True)
    for stats in loop.reading.stats.values():
        yield "stats", {"ns": stats.ns, "payload": json.dumps(stats.to_json())}
    yield "counts", {"payload": json.dumps(loop.rejected)}
