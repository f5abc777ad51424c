"""The Spark engine: `analyze`, the reference's stages run inside partitions.

Every Python step calls the same code as the reference (``_reference.py``); Spark only
moves lines and rows between them. The stages, one module each:

1. **read** (``_spark_lines.py``): journal files to numbered lines — local files looked at
   on the driver (first lines, sizes, gzip ends), Spark frames built only when a stage
   needs them (byte ranges, line numbers on the JVM);
2. **replay** (``_spark_replay.py``): the read→replay loop (``_read_replay.py``) in tasks,
   one per journal file or per name server (or per broker-group component with
   ``partition="group"``);
3. **sweep** (``_spark_sweep.py``): each topic's answers swept in tasks partitioned by
   topic;
4. **tables** (``_spark_tables.py``): the tables picked from the persisted rows, the
   sweep's job started in the background, ``--strict`` checked; `Analysis.write` writes
   them as Parquet and `Analysis.summary_rows` collects what the summary needs.

Rows travel between stages typed, through Arrow (``_spark_rows.py``). Intermediate results
are persisted on disk (``DISK_ONLY``: no partition is ever held in the JVM heap) so every
table is computed once. Each Python task streams its sorted partition: it holds one reader
and one manager per name server or component, never the partition's lines. Cost on 2
cores: see ``docs/performance.md`` (pipeline).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._errors import InvalidRequest
from ._spark_lines import read
from ._spark_replay import replay
from ._spark_sweep import sweep
from ._spark_tables import Analysis, tables

__all__ = ["PARTITIONS", "Progress", "analyze"]

#: Told the name of each step as it starts.
Progress = Callable[[str], object]

#: The ways to partition the replay: ``ns`` (each name server's segments between
#: snapshots apart where the journals have snapshots, else each name server whole; the
#: default), ``ns-whole`` (each name server whole, snapshots or not) or ``group`` (each
#: independent set of a name server's broker groups apart).
PARTITIONS = ("ns", "ns-whole", "group")


def analyze(spark: Any, sources: Any, *, at: Sequence[int] = (), strict: bool = False,
            partition: str = "ns", progress: Progress | None = None) -> Analysis:
    """Analyze journals on ``spark``; the tables equal `analyze_local`'s.

    ``sources``: journal paths (files or folders: JSON Lines, ``.gz``, or Parquet copies
    from `to_parquet`; local or any URI Spark reads) or ``{name: lines}``. ``at``: times
    (ms) for ``routes_at``. ``strict``: raise `RejectedRecords` if any line was set aside.
    ``partition``: ``"ns"`` (the default: local plain journal files, one per name server,
    with snapshot records are replayed as one task per segment between snapshots, read
    from their byte offsets, the sessions stitched on the driver; other inputs as with
    ``"ns-whole"``), ``"ns-whole"`` (read and replay each name server in one task: no
    line is shuffled twice) or ``"group"`` (replay each name server's independent
    broker-group sets apart, after reading it whole; snapshots are read and checked, not
    used to split); anything else raises `routing.InvalidRequest`. ``progress`` is told
    the name of each step as it starts.

    Cost: the read and replay jobs run before it returns (O(lines) over the tasks; about
    5 µs a record of Python work, the steady lane's); the sweep's job runs in the
    background, and `Analysis.write` and `Analysis.summary_rows` wait for it.
    """
    if partition not in PARTITIONS:
        raise InvalidRequest(
            f"partition must be 'ns', 'ns-whole' or 'group', got {partition!r}",
            field="partition", value=partition)
    say = progress or (lambda _step: None)
    say("listing inputs")
    found = read(spark, sources)  # 1. read: the inputs, their lines
    replayed = replay(spark, found, partition, say)  # 2. read and replay
    swept = sweep(spark, replayed, sorted({int(t) for t in at}), say)  # 3. sweep the topics
    return tables(spark, found, replayed, swept, strict=strict)  # 4. the tables
