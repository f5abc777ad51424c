"""The broker-group partition on Spark (``partition="group"``): after the read stage read
each name server whole (``_spark_replay.py``, without replay), its accepted lines are
replayed per (name server, broker-group component) of ``_groups.py``, each in a task of its
own; entries touching the whole name server are copied to every component, and the
copies after the first report no rejection. Slower than ``partition="ns"`` (the lines are
shuffled twice), it spreads one large name server over several tasks.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from ._groups import component_count, components, replay_components
from ._read_replay import NsStats, gap_messages, name_server_rows
from ._schema import Emitted
from ._spark_rows import (
    CONTRIB_COLUMNS,
    KILL_WORKER_ENV,
    SESSION_ENDS,
    WIDE_DDL,
    Replayed,
    Step,
    python_step,
    rows_of,
)

__all__ = ["replay_groups", "replay_step"]

#: The columns of the lines a component's replay task takes (`_groups.ComponentLine`).
_COMPONENT_COLUMNS = ("ns", "comp", "primary", "seq", "ts", "op", "source", "line", "text")


def replay_groups(spark: Any, stage: Any, side: Any, rows: Any, stats: Sequence[NsStats],
                  read_tasks: int, say: Callable[[str], object]) -> Replayed:
    """``partition="group"``: plan the broker-group components of the accepted lines of the
    read ``stage`` (one small job), replay each (name server, component) in a task of its
    own, collect the sessions' ends and count the rejected lines per name server (two more
    jobs over the persisted replay); ``rows`` are the read's table rows (its rejections),
    ``side`` the frame they come from. O(accepted lines × components) over the tasks."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    say("planning broker-group partitions")
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
    say("replaying (one task per name server and broker-group set)")
    spans = {s.ns: (s.first_ms, s.last_ms) for s in stats}
    replayed = (routed.repartition(F.col("ns"), F.col("comp"))
                .sortWithinPartitions("ns", "comp", "seq")
                .select("ns", "comp", "primary", "seq", "ts", "op", "source", "line", "text")
                .mapInArrow(replay_step(spans, os.environ.get(KILL_WORKER_ENV) or None),
                            WIDE_DDL)
                .persist(StorageLevel.DISK_ONLY))
    rows = replayed.unionByName(rows)
    sessions = tuple(r.asDict() for r in rows.filter(F.col("tbl") == "sessions")
                     .select(*SESSION_ENDS).collect())
    say("counting rejected lines")  # the replay rejects lines too
    rejected = {r["ns"]: int(r["count"]) for r in
                rows.filter((F.col("tbl") == "rejected") & F.col("ns").isNotNull())
                .groupBy("ns").count().collect()}
    return Replayed(rows=rows, changes=None,
                    contributions=rows.filter(F.col("tbl") == "contrib").select(
                        *(c for c, _ in CONTRIB_COLUMNS)),
                    persisted=(stage, side, replayed), spans=spans, sessions=sessions,
                    rejected=rejected, name_servers=tuple(name_server_rows(stats, rejected)),
                    gaps=tuple(gap_messages(stats)), partitions=parts, read_tasks=read_tasks)


def replay_step(spans: Mapping[str, tuple[int, int]], kill: str | None = None) -> Step:
    """A replay task of ``partition="group"``: each (name server, component) of the task,
    lines in seq order (`_groups.replay_components`)."""
    return python_step(partial(_component_rows, spans=dict(spans)), kill=kill)


def _component_rows(batches: Iterable[Any], *, spans: Mapping[str, tuple[int, int]]
                    ) -> Iterator[Emitted]:
    return replay_components(rows_of(batches, _COMPONENT_COLUMNS), spans)
