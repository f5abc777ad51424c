"""The sweep stage on Spark: each topic's answers partitioned by topic, sorted by time and
swept in a task (`sweep` → the swept rows).

With ``partition="ns"`` the replay emitted the route changes itself; their answers without
the route texts (`CHANGE_COLUMNS`) are swept by `_sweep.sweep_changes`. With
``partition="group"`` the route contributions are swept by `_sweep.sweep_topic` into route
changes (unions of parts). Either way the sweep makes the routes at ``--at`` times,
disagreement and availability over each topic's life, which needs the ends of the broker
sessions (collected by the replay stage: one tuple per session). A few topics (served by
every group) weigh most: more partitions than task slots let the scheduler fill the cores
around them. The swept rows are persisted; `Analysis` computes them in the background.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any

from ._answers import Contribution, answer_of_change
from ._availability import Removals, session_removals
from ._connect import session_parallelism
from ._schema import Emitted
from ._spark_replay import Replayed
from ._spark_rows import CHANGE_COLUMNS, CONTRIB_COLUMNS, WIDE_DDL, rows_of, tag_rows, to_batches
from ._spark_run import SparkRun
from ._sweep import sweep_changes, sweep_topic

__all__ = ["SWEEP_TASKS_PER_SLOT", "sweep", "topic_step"]

#: Partitions of the topic sweep per task slot (`_connect.session_parallelism`).
SWEEP_TASKS_PER_SLOT = 4


def sweep(run: SparkRun, replayed: Replayed, at: Sequence[int]) -> Any:
    """The swept rows (wide, persisted; planning only, no job): ``routes_at`` for the times
    ``at`` (ms), ``disagreement``, ``disagreement_totals``, ``availability`` and, with
    ``partition="group"``, ``route_changes``. O(route changes) over the tasks when run."""
    from pyspark.sql import functions as F

    run.say("sweeping topics")
    # which broker sessions ended when: tells a topic deleted on purpose from an outage
    removals = session_removals(replayed.sessions)
    parts = SWEEP_TASKS_PER_SLOT * session_parallelism(run.spark)
    if replayed.changes is not None:
        # whole name servers: their replay emitted the route changes itself; the sweep
        # takes their answers without the route texts (digests, groups, queue counts)
        return run.keep(replayed.changes.select(*(c for c, _ in CHANGE_COLUMNS))
                        .repartition(parts, F.col("topic"))
                        .sortWithinPartitions("topic", "at_ms", "ns", "seq")
                        .mapInArrow(topic_step(replayed.spans, at, removals, changes=True),
                                    WIDE_DDL))
    assert replayed.contributions is not None  # partition="group"
    return run.keep(replayed.contributions.repartition(parts, F.col("topic"))
                    .sortWithinPartitions("topic", "at_ms", "ns", "seq", "part")
                    .mapInArrow(topic_step(replayed.spans, at, removals), WIDE_DDL))


def topic_step(spans: Mapping[str, tuple[int, int]], at: Sequence[int],
               removals: Removals, *, changes: bool = False
               ) -> Any:
    """A sweep task: each topic of the task, its input sorted by (topic, time): route
    contributions (`CONTRIB_COLUMNS`), or with ``changes`` the ``route_changes`` rows of
    whole name servers without their route text (`CHANGE_COLUMNS`)."""

    def step(batches: Iterable[Any]) -> Iterator[Any]:
        rows = (_change_rows if changes else _topic_rows)(batches, spans, at, removals)
        return to_batches(tag_rows(rows))

    return step


def _topic_rows(batches: Iterable[Any], spans: Mapping[str, tuple[int, int]],
                at: Sequence[int], removals: Removals) -> Iterator[Emitted]:
    names = tuple(c for c, _ in CONTRIB_COLUMNS)
    rows = (Contribution(ns=r[0], topic=r[1], at_ms=r[2], seq=r[3], part=r[4], route_json=r[5])
            for r in rows_of(batches, names))
    for topic, group in itertools.groupby(rows, key=lambda c: c.topic):
        yield from sweep_topic(topic, group, spans, at, removals=removals)


def _change_rows(batches: Iterable[Any], spans: Mapping[str, tuple[int, int]],
                 at: Sequence[int], removals: Removals) -> Iterator[Emitted]:
    names = tuple(c for c, _ in CHANGE_COLUMNS)
    rows = (dict(zip(names, r, strict=True)) for r in rows_of(batches, names))
    for topic, group in itertools.groupby(rows, key=itemgetter("topic")):
        yield from sweep_changes(topic, ((r["at_ms"], r["ns"], r["seq"], answer_of_change(r))
                                         for r in group), spans, at, removals=removals)
