"""Route changes written by the replay tasks themselves (`ChangeFiles`), and merged into
the table's one file by key on the driver (`merge_change_files`).

A ``route_changes`` row carries its route as RocketMQ JSON: on the fleet shape (8.5 M
records) 201 260 rows, 1.38 GB of text, 93 % of what the replay tasks returned to the JVM.
There the JVM turned it into rows, persisted them on disk, read them back for the sweep (the
whole rows, though the sweep takes none of the text) and sorted and wrote them in one
serial task (about 13 s on these 2 cores). On a master whose executors share this machine's
file system (``local``, ``local-cluster``), a replay task instead writes its route changes,
sorted by the table's key, as Parquet files of its own (`ChangeRuns`: sorted runs of at
most `RUN_BYTES` of text, pyarrow, the table's schema); Spark reads them back as the table
(`ChangeFiles.frame`: the sweep's read skips the text column), and `Analysis.write` merges
the chosen tasks' files into the table's one sorted file (`merge_change_files`, O(rows)
streamed, memory a row group per file). The files live in a temporary folder under
``spark.local.dir`` until `ChangeFiles.unpersist` (or the interpreter's exit).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from ._schema import TABLES, Emitted, Row
from ._store import BATCH_ROWS, text_batches, tuple_batch

__all__ = ["ROW_GROUP_BYTES", "ROW_GROUP_ROWS", "RUN_BYTES", "ChangeFiles", "ChangeRuns",
           "merge_change_files", "open_change_files"]

_TABLE = TABLES["route_changes"]
#: A task file's row groups hold about this many bytes of route text (`ROW_GROUP_ROWS`):
#: the merge holds one row group of every file at once, so with 60 tasks about 60 MB.
ROW_GROUP_BYTES = 256 << 10
#: ... and at least this many rows.
ROW_GROUP_ROWS = 16
#: A task writes its route changes in sorted runs of about this many bytes of route text
#: (a task's memory; the merge takes every run as a file).
RUN_BYTES = 64 << 20
#: The merged file's row groups: about this many bytes of route text, or this many rows.
_MERGED_GROUP_BYTES = 4 << 20
_MERGED_GROUP_ROWS = 65_536


@attrs.frozen(kw_only=True)
class ChangeFiles:
    """A folder of the replay tasks' ``route_changes`` files: a folder per task number
    holding its sorted runs (read by the driver and the executors alike: a local
    master's). Pickled into the tasks."""

    folder: str

    def path(self, task: int) -> str:
        """Task ``task``'s folder. O(1)."""
        return os.path.join(self.folder, f"task-{task:05d}")

    def runs(self, task: int) -> ChangeRuns:
        """In a task: the writer of its route changes (`ChangeRuns`). O(1)."""
        return ChangeRuns(self.path(task))

    def write(self, task: int, rows: Iterable[Row]) -> str:
        """In a task: all of ``rows`` through `runs` (``add`` each, then ``finish``).
        Returns the task's folder."""
        runs = self.runs(task)
        for row in rows:
            runs.add(row)
        return runs.finish()

    def files(self, tasks: Iterable[int]) -> list[str]:
        """The run files of tasks ``tasks``, in task and run order (on the driver, after
        the tasks ended). O(files)."""
        return [os.path.join(self.path(t), name) for t in tasks
                for name in sorted(os.listdir(self.path(t))) if name.endswith(".parquet")]

    @staticmethod
    def frame(spark: Any, paths: Sequence[str]) -> Any:
        """The ``route_changes`` table of the run files ``paths`` (`files`), read by
        Spark (planning only; a read of some columns reads only those). O(files)."""
        schema = _TABLE.spark_schema()
        if not paths:
            return spark.createDataFrame([], schema)
        return spark.read.schema(schema).parquet(*paths)

    def unpersist(self) -> None:
        """Remove the folder (as a persisted frame is released). O(files)."""
        shutil.rmtree(self.folder, ignore_errors=True)


class ChangeRuns:
    """One task's route changes as they come (`add`), written as sorted runs of about
    `RUN_BYTES` of route text each (``run-00000.parquet``, ...: memory one run, however
    long the task's journal), uncompressed, in a folder aside that `finish` renames into
    place (a retried task's folder replaces the earlier attempt's whole)."""

    def __init__(self, target: str) -> None:
        #: the folder `finish` moves the runs to
        self.path = target
        self._aside = f"{target}.{os.getpid()}.part"
        if os.path.exists(self._aside):
            shutil.rmtree(self._aside)
        os.makedirs(self._aside)
        self._held: list[tuple[Any, ...]] = []
        self._text = 0
        self._count = 0
        names = _TABLE.names
        self._at = [names.index(c) for c in _TABLE.key]
        self._json = names.index("route_json")

    def add(self, row: Row) -> None:
        """One ``route_changes`` row (a dict). O(1), a run's sort and write when full."""
        values = tuple(row.get(c) for c in _TABLE.names)
        self._held.append(values)
        self._text += len(values[self._json] or "")
        if self._text >= RUN_BYTES:
            self._flush()

    def divert(self, rows: Iterable[Emitted]) -> Iterator[Emitted]:
        """``rows`` but the ``route_changes`` ones, which are `add`ed here; `finish` once
        ``rows`` end. O(rows)."""
        for table, row in rows:
            if table == "route_changes":
                self.add(row)
            else:
                yield table, row
        self.finish()

    def finish(self) -> str:
        """Write the last run (an empty one if the task had none) and move the folder into
        place. Returns it. O(held rows log held rows)."""
        if self._held or not self._count:
            self._flush()
        if os.path.exists(self.path):
            shutil.rmtree(self.path)
        os.replace(self._aside, self.path)
        return self.path

    def _flush(self) -> None:
        import pyarrow.parquet as pq

        at = self._at
        values = sorted(self._held, key=lambda v: tuple(v[i] for i in at))
        schema = _TABLE.arrow_schema()
        path = os.path.join(self._aside, f"run-{self._count:05d}.parquet")
        # not compressed, no dictionaries: the file lives until `merge_change_files`
        # reads it once
        with pq.ParquetWriter(path, schema, compression="none",
                              use_dictionary=False) as writer:
            for chunk in text_batches(values, text=ROW_GROUP_BYTES,
                                      bounds=(ROW_GROUP_ROWS, BATCH_ROWS[1])):
                writer.write_batch(tuple_batch(schema, chunk))
        self._held, self._text = [], 0
        self._count += 1


def open_change_files(spark: Any) -> ChangeFiles | None:
    """A new, empty `ChangeFiles` folder under the session's first ``spark.local.dir`` (the
    system's temporary folder when unset), when the session's executors share this
    machine's file system (a local or local-cluster master, not Spark Connect); else None
    (the route changes then travel through the JVM). Removed at the interpreter's exit at
    the latest. O(1)."""
    from ._connect import session_master
    from ._session import is_connect, is_local_master

    if is_connect(spark) or not is_local_master(session_master(spark)):
        return None
    local = spark.sparkContext.getConf().get("spark.local.dir", None)
    base = local.split(",")[0].strip() if local else None
    if base:
        os.makedirs(base, exist_ok=True)
    files = ChangeFiles(folder=tempfile.mkdtemp(prefix="routing-changes-", dir=base or None))
    weakref.finalize(files, shutil.rmtree, files.folder, True)
    return files


def merge_change_files(files: Sequence[str], target: Path) -> Path:
    """Write the rows of ``files`` (each sorted by the table's key) as one file,
    ``target/part-00000.parquet`` (the reference's name; ``target`` replaced), sorted by the
    key (ties in the files' order): the key columns of every file read and sorted (Arrow's
    sort), then the rows copied in that order, a row group of each file held at a time.
    O(rows log rows) on the keys, O(bytes) streamed; memory O(files × row group)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    key = list(_TABLE.key)
    opened = [pq.ParquetFile(f) for f in files]
    parts = []
    for index, handle in enumerate(opened):
        keys = handle.read(columns=key)
        n = keys.num_rows
        parts.append(keys.append_column("_file", pa.array([index] * n, pa.int32()))
                     .append_column("_row", pa.array(range(n), pa.int64())))
    schema = _TABLE.arrow_schema()
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    out = target / "part-00000.parquet"
    rows = sum(h.metadata.num_rows for h in opened)
    # the route texts are all different: no dictionary tried for them (the writer
    # would hash every text before giving up on it)
    plain = [c for c in _TABLE.names if c != "route_json"]
    with pq.ParquetWriter(out, schema, use_dictionary=plain) as writer:
        if rows:
            order = pa.concat_tables(parts).sort_by(
                [(c, "ascending") for c in (*key, "_file", "_row")])
            cursors = [_Cursor(h) for h in opened]
            held: list[Any] = []
            count = size = 0
            for index, run in itertools.groupby(order.column("_file").to_pylist()):
                for piece, text in cursors[index].take(sum(1 for _ in run)):
                    held.append(piece)
                    size += text
                    count += piece.num_rows
                    if size >= _MERGED_GROUP_BYTES or count >= _MERGED_GROUP_ROWS:
                        writer.write_table(
                            pa.Table.from_batches(held, schema).combine_chunks())
                        held, count, size = [], 0, 0
            if held:
                writer.write_table(pa.Table.from_batches(held, schema).combine_chunks())
    (target / "_SUCCESS").touch()
    return out


class _Cursor:
    """A file's rows in order, handed out as slices of its batches (a row group each),
    with the characters of route text each slice holds."""

    def __init__(self, handle: Any) -> None:
        self._batches: Iterator[Any] = (
            batch for i in range(handle.metadata.num_row_groups)
            for batch in handle.read_row_group(i, use_threads=False).to_batches())
        self._batch: Any = None
        self._ends: list[int] = []  # the batch's text lengths, added up
        self._at = 0

    def take(self, n: int) -> Iterator[tuple[Any, int]]:
        """The next ``n`` rows, as (slice, characters of route text)."""
        import pyarrow.compute as pc

        while n:
            if self._batch is None or self._at == self._batch.num_rows:
                self._batch, self._at = next(self._batches), 0
                lengths = pc.binary_length(self._batch.column("route_json")).to_pylist()
                self._ends = [0, *itertools.accumulate(x or 0 for x in lengths)]
                continue
            k = min(n, self._batch.num_rows - self._at)
            yield (self._batch.slice(self._at, k),
                   self._ends[self._at + k] - self._ends[self._at])
            self._at += k
            n -= k
