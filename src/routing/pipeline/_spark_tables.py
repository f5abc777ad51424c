"""The tables of a Spark run (`tables` → `Analysis`): picked from the stages' persisted
rows, written as Parquet (`Analysis.write`) and collected for the summary
(`Analysis.summary_rows`).

Every table is a filter of persisted frames (or a small local one): the replay's rows
(``sessions``, ``expiries``, ``rejected``, with the rows about whole files added), its
route changes with ``partition="ns"``, the sweep's rows, and ``name_servers`` from the
stats the driver collected. The sweep is computed once, by one job started in the
background as `analyze` returns (`SWEEP_POOL`); `Analysis.write` writes the other tables
meanwhile.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs

from ._change_files import merge_change_files
from ._errors import RejectedRecords
from ._files import has_scheme
from ._schema import (
    REASON_KIND_CHARS,
    REASON_NUMBER,
    REASON_QUOTED,
    SUMMARY_COLUMNS,
    TABLES,
    Row,
    sort_rows,
)
from ._session import in_background, is_connect
from ._spark_lines import Lines
from ._spark_rows import Replayed
from ._store import ParquetRows

__all__ = ["READ_BACK", "SWEEP_POOL", "SWEPT_TABLES", "WRITE_JOBS", "Analysis", "plain_rows",
           "tables"]

#: The tables the topic sweep makes (``route_changes`` only with ``partition="group"``: a
#: whole name server's replay emits its route changes itself).
SWEPT_TABLES = ("route_changes", "routes_at", "disagreement", "disagreement_totals",
                "availability")
#: The scheduler pool of the topic sweep's jobs: under the FAIR scheduling `spark_session`
#: sets, it gets task slots as soon as its stages are ready, whatever else waits (under
#: FIFO, a session's default, pools are ignored).
SWEEP_POOL = "routing-sweep"
#: The summary's tables that grow with a journal's length (a row per route change or per
#: route and ``--at`` time): `Analysis.summary_rows` reads them back from the written files.
READ_BACK = ("route_changes", "routes_at")
#: Tables `Analysis.write` writes at once (Spark jobs submitted from driver threads).
WRITE_JOBS = 4


@attrs.frozen(kw_only=True)
class Analysis:
    """The output tables of one `analyze` run, as DataFrames (see ``docs/pipeline.md``).

    They are computed over persisted intermediate results: read them as often as needed,
    then call `unpersist`. ``partitions`` says how many replay partitions each name server
    was split into; ``read_tasks`` how many tasks read the JSON Lines files (one a file
    when read whole, at least ``SPLITS_PER_FILE`` a large file read in byte ranges; gzip is
    one a file; 0 when unknown: byte ranges on Spark Connect). Holding one costs nothing
    on the driver but the persisted frames on the executors' disks; `collect` and
    `summary_rows` cost O(rows fetched), `write` O(rows) on the cluster.
    """

    tables: Mapping[str, Any]
    partitions: Mapping[str, int]
    read_tasks: int = 0
    _persisted: tuple[Any, ...] = attrs.field(alias="persisted", default=())
    #: the topic sweep, computed in the background from `analyze`'s return on (its job
    #: overlaps the writing of the other tables), and the tables made from it
    _sweeping: Future[Any] | None = attrs.field(alias="sweeping", default=None)
    _swept: frozenset[str] = attrs.field(alias="swept", default=frozenset())
    #: the ``route_changes`` files the replay tasks wrote (each sorted by the key), which
    #: `write` merges into the table's file itself
    _change_files: tuple[str, ...] = attrs.field(alias="change_files", default=())

    def __getitem__(self, name: str) -> Any:
        return self.tables[name]

    def ready(self) -> None:
        """Wait until the topic sweep's job has ended (raises its error). `collect`,
        `write` and `unpersist` wait for it themselves; a table read directly before it
        ends is correct too, but may compute the sweep a second time."""
        if self._sweeping is not None:
            self._sweeping.result()

    def collect(self) -> dict[str, list[dict[str, Any]]]:
        """Every table as sorted plain rows, the shape `analyze_local` returns. O(rows)
        fetched to the driver, O(rows log rows) to sort."""
        self.ready()
        return {name: sort_rows(TABLES[name], plain_rows(df)) for name, df in self.tables.items()}

    def summary_rows(self, written: str | os.PathLike[str] | None = None
                     ) -> dict[str, Sequence[Row]]:
        """The rows `summarize_rows` and the report use (`SUMMARY_COLUMNS`): one row per
        name server, session, expiry, disagreement window, route change (without its
        JSON), (topic, name server) availability and route at an ``--at`` time; rejected
        lines counted by file and reason kind with their first and last line
        (``rejected_groups``, `group_rejected` in SQL). Their number grows with what
        happened, not with the number of journal lines (heartbeats add none): O(those
        rows) fetched, one job per table.

        ``written``: the folder `write` wrote these tables to. When it is a local folder,
        the tables that grow with the journal's length (`READ_BACK`: one row per route
        change) are read back from their Parquet files whenever they are iterated
        (`ParquetRows`: memory one batch, as the reference returns them) instead of being
        fetched whole to the driver (at 23.7 M records of the fleet shape, about a GB of
        Python dicts)."""
        from pyspark.sql import functions as F

        self.ready()
        out: dict[str, Sequence[Row]] = {}
        for name, columns in SUMMARY_COLUMNS.items():
            back = _written_file(written, name) if name in READ_BACK else None
            if back is not None:
                out[name] = ParquetRows(back, columns or TABLES[name].names)
                continue
            df = self.tables[name]
            out[name] = plain_rows(df if columns is None else df.select(*columns))
        reason = F.substring(F.regexp_replace(F.regexp_replace("reason", REASON_QUOTED, "'*'"),
                                              REASON_NUMBER, "#"), 1, REASON_KIND_CHARS)
        out["rejected_groups"] = [
            {"source": r["source"], "reason": r["reason"], "lines": int(r["lines"]),
             "first_line": int(r["first_line"]), "last_line": int(r["last_line"])}
            for r in self.tables["rejected"].groupBy("source", reason.alias("reason"))
            .agg(F.count("*").alias("lines"), F.min("line").alias("first_line"),
                 F.max("line").alias("last_line")).collect()]
        return out

    def write(self, out_dir: str, *, mode: str = "overwrite", jobs: int = WRITE_JOBS) -> None:
        """Write every table as Parquet under ``out_dir/<table>/``: one file per table, sorted
        by its key. One task per table reads the table's persisted blocks, sorts and
        writes: no shuffle, whose map side was one task per block (dozens, for tables of
        a few thousand rows; for ``route_changes`` more CPU in all and no earlier end, at
        10 M records). A global ``orderBy`` would add a sampling job per table. Up to
        ``jobs`` tables are written at once, from driver threads: most tables are small, and
        one at a time their jobs leave the cores idle between them (about 0.1–0.3 s of
        scheduling and commit each). When the replay tasks wrote ``route_changes``
        themselves (a split replay on a local master) and ``out_dir`` is a local folder
        written with ``mode="overwrite"``, that table's files are merged by key on the
        driver instead (`merge_change_files`: the file the reference writes,
        ``part-00000.parquet``). The first error is raised once all have ended.
        O(rows log rows) on the cluster."""

        def one(name: str) -> None:
            if name in self._swept:
                self.ready()
            if (name == "route_changes" and self._change_files and mode == "overwrite"
                    and not has_scheme(out_dir)):
                # the replay tasks wrote the rows sorted, file by file: merged by key
                # here, the route texts never pass through the JVM
                merge_change_files(self._change_files, Path(out_dir) / name)
                return
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


def tables(spark: Any, found: Lines, replayed: Replayed, swept: Any, *,
           strict: bool) -> Analysis:
    """The `Analysis` of a run: every table picked from the stages' rows; with ``strict``,
    `RejectedRecords` if a line was set aside (files skipped by name aside) or a sequence
    number is missing (one count job, and one for the first rows when failing); the
    sweep's job started in the background."""
    from pyspark.sql import functions as F

    def table(name: str, tagged: Any) -> Any:
        return tagged.filter(F.col("tbl") == name).select(*TABLES[name].names)

    def local(name: str, rows: Sequence[Row]) -> Any:
        return spark.createDataFrame([tuple(r[c] for c in TABLES[name].names) for r in rows],
                                     TABLES[name].spark_schema())

    out = {name: table(name, replayed.rows) for name in ("sessions", "expiries", "rejected")}
    if found.notes:  # skipped, empty and cut-short files
        out["rejected"] = out["rejected"].unionByName(local("rejected", found.notes))
    if replayed.changes is not None:
        out["route_changes"] = replayed.changes
    swept_names = frozenset(SWEPT_TABLES) - out.keys()
    for name in swept_names:
        out[name] = table(name, swept)
    out["name_servers"] = local("name_servers", replayed.name_servers)
    if strict:
        failing = out["rejected"].filter(F.col("stage") != "skipped")
        total = (sum(replayed.rejected.values())
                 + failing.filter(F.col("ns").isNull()).count())
        if total or replayed.gaps:
            first = failing.orderBy(*TABLES["rejected"].key).limit(5).collect()
            raise RejectedRecords([r.asDict(recursive=True) for r in first], total=total,
                                  gaps=replayed.gaps)
    return Analysis(tables={name: out[name] for name in TABLES},
                    partitions=replayed.partitions, read_tasks=replayed.read_tasks,
                    persisted=(*replayed.persisted, swept),
                    sweeping=in_background(
                        swept.count, None if is_connect(spark) else spark.sparkContext,
                        SWEEP_POOL),
                    swept=swept_names, change_files=replayed.change_files)


def _written_file(written: str | os.PathLike[str] | None, name: str) -> Path | None:
    """The one Parquet file `Analysis.write` wrote for table ``name`` under ``written``, if
    that is a folder on this machine (not a URI another file system serves); else None."""
    if written is None:
        return None
    folder = Path(written) / name
    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    return files[0] if len(files) == 1 else None


def plain_rows(df: Any) -> list[dict[str, Any]]:
    """A DataFrame's rows as plain dicts (``Row.asDict(recursive=True)``'s values: ints,
    floats, strings, booleans, None, lists), fetched as Arrow (`DataFrame.toArrow`) rather
    than as pickled rows: about 0.3 µs a value against 2–3 µs for ``collect()`` and
    ``asDict`` (the driver's share of a 10 M-record run went from 5.3 to about 1 CPU s).
    The tables hold no map or struct columns, whose Arrow form would differ. O(rows)."""
    table = df.toArrow()
    return table.to_pylist()  # type: ignore[no-any-return]
