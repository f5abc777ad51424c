"""The read stage on Spark: journal files and folders to numbered lines (`read` → `Lines`).

JSON Lines files are read by Spark's text source, cut into byte ranges (at least
`SPLITS_PER_FILE` read tasks for a large plain file; gzip is one task per file); line numbers
come from each split's first row id and the line counts of the earlier splits of the same
file, all on the JVM. Lines that are not UTF-8 travel as bytes (``raw``) so that Python
rejects them exactly as the reference does. Parquet copies carry their own numbers. Files
that the reference reports as a whole (skipped by name, empty, a gzip file cut short) are
reported here the same way: a damaged gzip file is read in Python on the driver, so its
readable lines are the reference's.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .._errors import InvalidRequest
from ._connect import is_connect, session_parallelism
from ._errors import JournalNotFound
from ._files import (
    LINES_SCHEMA_DDL,
    InputFile,
    Survey,
    expand_local,
    has_scheme,
    is_parquet_path,
    kind_in_folder,
    survey,
)
from ._schema import Row

__all__ = ["SPLITS_PER_FILE", "SPLIT_READ_BYTES", "Lines", "read", "read_lines", "task_slots",
           "to_parquet"]

#: No input looked at (lines given in memory).
_NOTHING = Survey(texts={}, parquets={}, damaged={}, notes=(), first_names=None, whole=None)


def _expand(spark: Any, paths: Sequence[str]) -> list[InputFile]:
    """Local paths as `expand_local` does; URIs through Hadoop's FileSystem (any scheme
    Spark reads), with the same rules."""
    found: list[InputFile] = []
    local: list[str] = []

    def flush() -> None:
        if local:
            found.extend(expand_local(local))
            local.clear()

    for path in paths:
        if not has_scheme(path):
            local.append(path)
            continue
        flush()
        listed = _list_uri(spark, path)
        if listed is None:
            found.append(InputFile(kind="parquet" if is_parquet_path(path) else "text",
                                   path=path))
            continue
        base, files = listed
        rel = sorted(f[len(base) + 1:] for f in files if f.startswith(base + "/"))
        rel = [r for r in rel if not any(p.startswith((".", "_")) for p in r.split("/"))]
        if any("/" not in r and is_parquet_path(r) for r in rel):
            found.append(InputFile(kind="parquet", path=path))
            continue
        for r in rel:
            full = f"{path.rstrip('/')}/{r}"
            found.append(InputFile(kind=kind_in_folder(r), path=full))
    flush()
    return found


def _list_uri(spark: Any, path: str) -> tuple[str, list[str]] | None:
    """None if the URI ``path`` names a file; for a folder, its name and the names of every
    file under it, comparable by prefix. Through Hadoop's FileSystem in the driver's JVM
    (qualified names), or on Spark Connect (no JVM here) through the server: the paths of
    a ``binaryFile`` scan that reads no content, compared by their path parts, normalised
    (Spark qualifies ``file:///x`` as ``file:/x``; its listing already leaves out names
    starting with ``_`` or ``.``, which `_expand` leaves out too). Raises
    `JournalNotFound` (a `FileNotFoundError`) if nothing is there."""
    if is_connect(spark):
        try:
            files = [str(r[0]) for r in spark.read.format("binaryFile")
                     .option("recursiveFileLookup", "true").load(path)
                     .select("path").collect()]
        except Exception as exc:
            if "PATH_NOT_FOUND" in str(exc):
                raise JournalNotFound(f"no such journal file or folder: {path}") from None
            raise
        base = _path_part(path)
        parts = [_path_part(f) for f in files]
        if parts == [base]:
            return None  # the path itself: a file
        return base, parts
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(conf)
    if not fs.exists(hpath):
        raise JournalNotFound(f"no such journal file or folder: {path}")
    if not fs.getFileStatus(hpath).isDirectory():
        return None
    files = []
    iterator = fs.listFiles(hpath, True)
    while iterator.hasNext():
        files.append(str(iterator.next().getPath().toString()))
    return str(fs.getFileStatus(hpath).getPath().toString()).rstrip("/"), files


def _path_part(uri: str) -> str:
    """A URI without its scheme and authority, normalised (``file:///a//b/`` and
    ``file:/a/b`` both give ``/a/b``; ``?`` and ``#`` are part of the name). O(len)."""
    rest = re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*:(//[^/]*)?", "", uri)
    return posixpath.normpath(rest) if rest else "/"


def read_lines(spark: Any, sources: Any) -> Any:
    """Every journal line as a DataFrame ``(order_a, order_b, source, line, text)``:
    ``order_a`` is the input's position, ``order_b`` the file index inside a Parquet copy,
    ``line`` 1-based. ``sources``: a path, a list of paths, or ``{name: lines}``."""
    return read(spark, sources).lines


#: The smallest and largest byte range one read task takes from a plain JSON Lines file.
SPLIT_MIN_BYTES = 1 << 20
SPLIT_MAX_BYTES = 128 << 20
#: A file is cut into at least this many byte ranges (read tasks), when they stay above
#: `SPLIT_MIN_BYTES` (gzip files are never cut: one task each).
SPLITS_PER_FILE = 8
#: One journal file per name server is read whole, one task per file, unless the files are
#: fewer than the cores and the largest plain one is larger than this (Spark's default
#: ``spark.sql.files.maxPartitionBytes``): then it is cut into byte ranges (`Lines.split`).
SPLIT_READ_BYTES = 128 << 20


#: How many tasks run at once (the session's cores or default parallelism; on Spark
#: Connect asked of the server).
task_slots = session_parallelism


def _split_large_files(spark: Any, inputs: Sequence[InputFile]) -> int:
    """Lower ``spark.sql.files.maxPartitionBytes`` (never raise it) so that the largest
    local plain-text journal is read by `SPLITS_PER_FILE` tasks; returns the value used."""
    sizes = [os.path.getsize(i.path) for i in inputs
             if i.kind == "text" and not has_scheme(i.path) and not i.path.endswith(".gz")]
    current = _max_partition_bytes(spark)
    if not sizes:
        return current
    wanted = max(SPLIT_MIN_BYTES, min(SPLIT_MAX_BYTES, max(sizes) // SPLITS_PER_FILE))
    if wanted < current:
        spark.conf.set("spark.sql.files.maxPartitionBytes", str(wanted))
        return wanted
    return current


#: Spark's byte-size suffixes (``JavaUtils.byteStringAs``: binary, case-insensitive).
_BYTE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "p": 1 << 50,
               "pb": 1 << 50}


def _max_partition_bytes(spark: Any) -> int:
    """``spark.sql.files.maxPartitionBytes`` in bytes: asked of the session's SQL
    configuration in the driver's JVM, or on Spark Connect (no JVM here) read as the
    setting's text ("128MB", Spark's default when unset) and parsed as Spark parses it."""
    if not is_connect(spark):
        return int(spark._jsparkSession.sessionState().conf().filesMaxPartitionBytes())
    text = str(spark.conf.get("spark.sql.files.maxPartitionBytes", None) or "128MB")
    return byte_size(text)


def byte_size(text: str) -> int:
    """``"128MB"``, ``"64m"``, ``"1g"``, ``"134217728"`` (bytes) as a number of bytes, as
    Spark reads its byte-size settings; `routing.InvalidRequest` (a `ValueError`) naming
    the text otherwise. O(len)."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _BYTE_UNITS:
        raise InvalidRequest(f"not a byte size: {text!r} (e.g. 128MB, 64m, 134217728)",
                             field="spark.sql.files.maxPartitionBytes", value=text)
    return int(m.group(1)) * _BYTE_UNITS[unit]


@attrs.define(kw_only=True)
class Lines:
    """What `read` found: the inputs looked at here (`_files.Survey`: rows about whole
    files, the name servers their first lines name, one file per name server or not),
    whether few large files are better read in byte ranges (``split``), and, built on
    first use (planning only, no job), the numbered lines (``order_a, order_b, source,
    line, text, raw``: ``raw`` holds the bytes of a line that is not UTF-8, whose ``text``
    is null), the bare ``text`` column of every line and how many tasks read the text
    files in byte ranges. A run that reads whole local files never builds them: each Spark
    text source costs tenths of a second of planning on the driver."""

    spark: Any = attrs.field(repr=False)
    inputs: Sequence[InputFile] = ()
    seen: Survey = _NOTHING
    #: few and large files: read them in byte ranges even when `whole_files` is known
    split: bool = False
    #: lines given in memory: (input number, source, number, text)
    memory: list[tuple[int, str, int, str]] | None = None
    _frames: tuple[Any, Any, int] | None = attrs.field(default=None, init=False, repr=False)

    @property
    def first_names(self) -> frozenset[str] | None:
        """The name servers the local files' first lines name (None when unknown)."""
        return self.seen.first_names

    @property
    def notes(self) -> tuple[Row, ...]:
        """Rows about whole files (skipped, empty, a gzip file cut short)."""
        return self.seen.notes

    @property
    def paths(self) -> Mapping[int, str]:
        """Input number (``order_a``) → path, for the files Spark reads as text."""
        return self.seen.texts

    @property
    def whole_files(self) -> Mapping[int, str] | None:
        """Input number → the name server of its first line, when every input is a local
        file read by Spark and those names all differ; else None."""
        return self.seen.whole

    @property
    def lines(self) -> Any:
        return self._built()[0]

    @property
    def texts(self) -> Any:
        return self._built()[1]

    @property
    def read_tasks(self) -> int:
        """How many tasks read the JSON Lines files by byte ranges, under the session's
        ``spark.sql.files.maxPartitionBytes`` (planning only, no job); 0 when there is no
        such scan, or on Spark Connect, whose client cannot plan without running a job
        (there is no RDD to ask)."""
        return self._built()[2]

    def _built(self) -> tuple[Any, Any, int]:
        if self._frames is None:
            if self.memory is not None:
                df = _python_lines(self.spark, self.memory)
                self._frames = (df, df.select("text"), 0)
            else:
                lines, texts, scan = _frames(self.spark, self.inputs, self.seen)
                tasks = (0 if scan is None or is_connect(self.spark)
                         else int(scan.rdd.getNumPartitions()))
                self._frames = (lines, texts, tasks)
        return self._frames


_LINES_DDL = ("order_a long, order_b long, source string, line long, text string, "
              "raw binary")


def _python_lines(spark: Any, rows: list[tuple[int, str, int, str]]) -> Any:
    """Lines read in Python (in-memory journals, damaged gzip files) as a lines frame."""
    data: list[tuple[int, int, str, int, str | None, bytes | None]] = []
    for order, source, number, text in rows:
        try:
            text.encode("utf-8")
            data.append((order, 0, source, number, text, None))
        except UnicodeEncodeError:  # bytes that are not UTF-8, kept as bytes
            data.append((order, 0, source, number, None,
                         text.encode("utf-8", "surrogateescape")))
    return spark.createDataFrame(data, _LINES_DDL)


def read(spark: Any, sources: Any) -> Lines:
    """Every line of ``sources`` with its file and number (see `Lines`). Looks at the local
    files now (`_files.survey`: sizes, first lines, gzip ends: O(files + gzip bytes));
    builds the Spark frames on first use. Raises `JournalNotFound` when nothing is there."""
    if isinstance(sources, Mapping):
        rows = [(i, name, n, text) for i, (name, lines) in enumerate(sources.items())
                for n, text in enumerate(lines, start=1)]
        return Lines(spark=spark, memory=rows)
    given = [str(sources)] if isinstance(sources, str | Path) else [str(p) for p in sources]
    inputs = _expand(spark, given)
    if not inputs:
        raise JournalNotFound(f"no journal files in {given}")
    seen = survey(inputs)
    # one file per name server, but fewer files than task slots and a large plain one:
    # read in byte ranges (a gzip file is never cut)
    whole = seen.whole or {}
    plain = [os.path.getsize(seen.texts[i]) for i in whole if not seen.texts[i].endswith(".gz")]
    split = bool(plain) and len(whole) < task_slots(spark) and max(plain) > SPLIT_READ_BYTES
    return Lines(spark=spark, inputs=inputs, seen=seen, split=split)


def _frames(spark: Any, inputs: Sequence[InputFile], seen: Survey) -> tuple[Any, Any, Any]:
    """`read`'s frames (lines, texts, scan), inputs in their order: Parquet copies, lines
    of damaged gzip files read in Python, text files read by Spark."""
    from pyspark.sql import functions as F

    paths, parquets, damaged = seen.texts, seen.parquets, seen.damaged
    _split_large_files(spark, inputs)
    parts = []
    texts = []
    for i in sorted({*paths, *parquets, *damaged}):
        if i in parquets:
            parts.append(spark.read.schema(LINES_SCHEMA_DDL).parquet(parquets[i]).select(
                F.lit(i).cast("long").alias("order_a"),
                F.col("source_index").alias("order_b"), "source", "line", "text",
                F.lit(None).cast("binary").alias("raw")))
        elif i in damaged:
            parts.append(_python_lines(spark, [(i, g[0], g[1], g[2] or "")
                                               for g in damaged[i]]))
        else:
            texts.append(spark.read.option("lineSep", "\n").text(paths[i]).select(
                F.lit(i).cast("long").alias("order_a"), F.lit(paths[i]).alias("source"),
                F.input_file_block_start().alias("block"),
                F.monotonically_increasing_id().alias("mid"), F.col("value")))
    raw = None
    if texts:
        raw = texts[0]
        for more in texts[1:]:
            raw = raw.unionByName(more)
        # Line numbers: within a split, rows are consecutive ids in one partition; a split
        # starts after all the lines of the earlier splits of its file.
        from pyspark.sql import Window

        splits = raw.groupBy("order_a", "block").agg(F.min("mid").alias("first_mid"),
                                                     F.count("*").alias("n"))
        before = Window.partitionBy("order_a").orderBy("block").rowsBetween(
            Window.unboundedPreceding, -1)
        splits = splits.withColumn("before", F.coalesce(F.sum("n").over(before), F.lit(0)))
        numbered = raw.join(F.broadcast(splits.select("order_a", "block", "first_mid", "before")),
                            ["order_a", "block"])
        # Bytes that are not UTF-8 travel as bytes: Python decodes them as the reference does.
        valid = F.expr("is_valid_utf8(value)")
        parts.append(numbered.select(
            "order_a", F.lit(0).cast("long").alias("order_b"), "source",
            (F.col("mid") - F.col("first_mid") + F.col("before") + 1).alias("line"),
            F.when(valid, F.col("value")).alias("text"),
            F.when(~valid, F.col("value").cast("binary")).alias("raw")))
    if not parts:
        empty = spark.createDataFrame([], _LINES_DDL)
        return empty, empty.select("text"), None
    lines = parts[0]
    for more in parts[1:]:
        lines = lines.unionByName(more)
    bare = [p.select("text") for p in parts[:len(parts) - (1 if texts else 0)]]
    bare += [t.select(F.col("value").alias("text")) for t in texts]
    union = bare[0]
    for more in bare[1:]:
        union = union.unionByName(more)
    return lines, union, raw


def to_parquet(spark: Any, sources: Any, out: str, *, mode: str = "error") -> int:
    """Copy journals to Parquet (``source, source_index, line, text``) under ``out``, for
    faster and splittable re-reading; returns the number of lines. Reading the copy gives
    the same records, rejections and places as the originals. ``mode``: Spark's save mode
    (``"error"``, the default, refuses an existing ``out``; Spark Connect does not know
    the ``"errorifexists"`` spelling). Cost: one Spark job that reads and sorts every line
    and writes it (O(lines log lines) over the tasks), and one that counts the copy."""
    from pyspark.sql import functions as F

    lines = read_lines(spark, sources)
    index = (F.col("order_a") * F.lit(1 << 20) + F.col("order_b")).alias("source_index")
    # a line that is not UTF-8 is copied with U+FFFD in place of the bad bytes
    text = F.coalesce(F.col("text"), F.expr("make_valid_utf8(cast(raw as string))"))
    table = lines.select("source", index, "line", text.alias("text")).orderBy(
        "source_index", "line")
    table.write.mode(mode).parquet(out)
    return int(spark.read.parquet(out).count())
