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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from operator import itemgetter
from typing import Any

from ._answers import Contribution, answer_of_change
from ._availability import Removals, session_removals
from ._connect import session_parallelism
from ._schema import Emitted
from ._spark_rows import (
    CHANGE_COLUMNS,
    CONTRIB_COLUMNS,
    WIDE_DDL,
    Replayed,
    Step,
    python_step,
    rows_of,
)
from ._sweep import sweep_changes, sweep_topic

__all__ = ["SWEEP_TASKS_PER_SLOT", "sweep", "topic_step"]

#: Partitions of the topic sweep per task slot (`_connect.session_parallelism`).
SWEEP_TASKS_PER_SLOT = 4


def sweep(spark: Any, replayed: Replayed, at: Sequence[int], say: Callable[[str], object]
          ) -> Any:
    """The swept rows (wide, persisted; planning only, no job): ``routes_at`` for the times
    ``at`` (ms), ``disagreement``, ``disagreement_totals``, ``availability`` and, with
    ``partition="group"``, ``route_changes``. O(route changes) over the tasks when run."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    say("sweeping topics")
    step = topic_step(replayed, at)
    parts = SWEEP_TASKS_PER_SLOT * session_parallelism(spark)
    if replayed.changes is not None:
        # whole name servers: their replay emitted the route changes itself; the sweep
        # takes their answers without the route texts (digests, groups, queue counts)
        answers = (replayed.changes.select(*(c for c, _ in CHANGE_COLUMNS))
                   .repartition(parts, F.col("topic"))
                   .sortWithinPartitions("topic", "at_ms", "ns", "seq"))
    else:
        assert replayed.contributions is not None  # partition="group"
        answers = (replayed.contributions.repartition(parts, F.col("topic"))
                   .sortWithinPartitions("topic", "at_ms", "ns", "seq", "part"))
    return answers.mapInArrow(step, WIDE_DDL).persist(StorageLevel.DISK_ONLY)


def topic_step(replayed: Replayed, at: Sequence[int]) -> Step:
    """A sweep task: each topic of the task, its input sorted by (topic, time): the route
    changes of whole name servers without their route texts (`CHANGE_COLUMNS`), or route
    contributions (`CONTRIB_COLUMNS`, ``partition="group"``). The sessions' ends tell a
    topic deleted on purpose from an outage (`session_removals`)."""
    rows = _topic_rows if replayed.changes is None else _change_rows
    return python_step(partial(rows, spans=dict(replayed.spans), at=tuple(at),
                               removals=session_removals(replayed.sessions)))


def _topic_rows(batches: Iterable[Any], *, spans: Mapping[str, tuple[int, int]],
                at: Sequence[int], removals: Removals) -> Iterator[Emitted]:
    names = tuple(c for c, _ in CONTRIB_COLUMNS)
    rows = (Contribution(ns=r[0], topic=r[1], at_ms=r[2], seq=r[3], part=r[4], route_json=r[5])
            for r in rows_of(batches, names))
    for topic, group in itertools.groupby(rows, key=lambda c: c.topic):
        yield from sweep_topic(topic, group, spans, at, removals=removals)


def _change_rows(batches: Iterable[Any], *, spans: Mapping[str, tuple[int, int]],
                 at: Sequence[int], removals: Removals) -> Iterator[Emitted]:
    names = tuple(c for c, _ in CHANGE_COLUMNS)
    rows = (dict(zip(names, r, strict=True)) for r in rows_of(batches, names))
    for topic, group in itertools.groupby(rows, key=itemgetter("topic")):
        yield from sweep_changes(topic, ((r["at_ms"], r["ns"], r["seq"], answer_of_change(r))
                                         for r in group), spans, at, removals=removals)
