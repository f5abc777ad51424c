"""The replay of ``partition="ns"`` split at the journals' snapshots: many tasks per name
server (`replay_segments` → `Replayed`, or None: not this way).

For local plain journal files, each holding one name server's lines (the recorder's
layout; a name server may have several files, read in their order, as after restarts of
``routing serve --journal``: a segment may then span files), the driver finds each
file's snapshot lines with a byte scan (``_segment_files.FileScan``: about 1.4 CPU s per
GiB, no line parsed). Then:

1. **one task per segment**: the Python worker opens the file at the segment's byte
   offset, replays its lines with a fresh reader and deriver (``_segments.SegmentRun``),
   reads the next segment's first line as the boundary probe and returns its rows (packed,
   as the whole-file read's, tagged with the task in ``seg``) and one `PIECE_OUTCOME` row,
   its `SegmentOutcome` (verdict, counts, the sessions to stitch): one job. When there are
   more segments than `task_count` (few task slots), a task takes a run of neighbouring
   segments of one name server instead (``_segment_files.plan_runs``: each run is then
   one segment, its inner snapshots read as the whole replay reads them);
2. on the driver, each name server's segments are walked in order (`_segments.walk`);
   behind a dirty boundary (a damaged or lost line, a damaged snapshot) a *continuation*
   task replays from the segment before on, past dirty boundaries, until one is clean: one
   more small job per round, only for damaged journals;
3. the sessions cut by boundaries are stitched and the counts added up on the driver
   (`_segments.stitch`; O(sessions)); the route changes, expiries and rejections are the
   used tasks' rows, filtered by ``seg`` (no job). On a local master the tasks write their
   route changes as files of their own instead (``_change_files.py``): the table is the
   used tasks' files.

Not this way (the caller replays each name server in one task, `_spark_replay._read`):
no snapshot in any file (old journals), a gzip file, inputs that are not local plain
files (URIs, Parquet copies), a file whose first line names no name server, a snapshot
line of another name server, or a line of a name server that has a file of its own, or
an accepted one, in another's file.
(Lines of a name server without a file or header, which the whole replay rejects, are
set aside by the tasks and rejected on the driver, in reading order.)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

import attrs

from ..journal import is_gzip
from ._change_files import ChangeFiles, ChangeRuns, open_change_files
from ._files import first_name, has_scheme
from ._read_replay import ReadReplay, count_rejected, gap_messages, name_server_rows
from ._schema import TABLES, Emitted, Row
from ._segment_files import FileScan, FileSegments, plan_runs
from ._segments import SegmentOutcome, SegmentRun, stitch, walk
from ._session import is_connect
from ._spark_lines import Lines, task_slots
from ._spark_rows import (
    PIECE_CHANGES,
    PIECE_REST,
    READ_DDL,
    SESSION_ENDS,
    WIDE_DDL,
    Replayed,
    Step,
    local_frame,
    packed,
    python_step,
    replay_job,
    rows_of,
    unpack_step,
    wide_schema,
)

__all__ = ["MIN_TASKS", "SEGMENT_DDL", "TASKS_PER_SLOT", "replay_segments", "task_count"]

Say = Any
#: A segment task's output: the packed read stage (`READ_DDL`) and the task's number.
SEGMENT_DDL = f"{READ_DDL}, `seg` long"
#: The ``piece`` of a task's last row: its `SegmentOutcome` as JSON bytes in ``ipc`` (the
#: driver collects these rows alone; the outcome was a wide row packed among the others,
#: so finding it took a second Python step over every task's rows).
PIECE_OUTCOME = "outcome"


@attrs.frozen(kw_only=True)
class _Task:
    """One task: name server ``ns``'s journal from segment ``first`` on; ``go_on``: a
    continuation (past dirty boundaries)."""

    ns: str
    journal: FileSegments
    first: int
    go_on: bool


#: The replay runs at least this many tasks (when there are that many segments): on a
#: few cores, neighbouring segments of a name server share a task (one Python task's
#: start, one snapshot restore and one boundary check per task instead of per segment:
#: about 0.25 CPU s each on the fleet shape, docs/performance.md), yet total task time ÷
#: longest task stays above 16 though the longest segment costs 4× the mean (the fleet
#: shape's quiet task times regrouped: 21 with 60 tasks, 17.5 with 40, 11 with 24).
MIN_TASKS = 60
#: ... or this many per task slot, so that more cores get more, smaller tasks (up to one
#: per segment: 30 slots or more split the 120 segments of the fleet shape fully).
TASKS_PER_SLOT = 4


def task_count(spark: Any) -> int:
    """How many replay tasks to aim at: `MIN_TASKS`, or `TASKS_PER_SLOT` per task slot
    when that is more. O(1)."""
    return max(MIN_TASKS, TASKS_PER_SLOT * task_slots(spark))


def replay_segments(spark: Any, found: Lines, say: Say, kill: str | None = None
                    ) -> Replayed | None:
    """Replay ``found`` split at its snapshots (see the module docstring); None when it
    cannot be (then nothing was persisted). Jobs: one for the segments, one per round of
    continuations (none for healthy journals). Driver: O(bytes) of the scan, O(segments +
    sessions) of the walk and the stitching."""
    files = None if is_connect(spark) else _journal_files(found)
    if files is None:
        return None
    say("finding snapshots")
    journals: dict[str, FileSegments] = {}
    for ns, paths in files.items():
        scans = [FileScan.of(opened) for _given, opened in paths]
        if any(name != ns for scan in scans for name in scan.names):
            return None  # another name server's snapshot: not the recorder's layout
        journals[ns] = FileSegments.of(paths, scans)
    if all(j.count == 1 for j in journals.values()):
        return None  # no snapshot: nothing to split
    segments = sum(j.count for j in journals.values())
    planned = plan_runs(journals, task_count(spark))
    journals = {ns: j.grouped(planned[ns]) for ns, j in journals.items()}
    tasks = [_Task(ns=ns, journal=j, first=k, go_on=False)
             for ns, j in sorted(journals.items()) for k in range(j.count)]
    say(f"replaying {segments} segments of {len(journals)} name servers in "
        f"{len(tasks)} tasks")
    sink = open_change_files(spark)
    stages: list[Any] = [] if sink is None else [sink]
    try:
        return _split(spark, tasks, journals, found, stages, sink, kill, say)
    except BaseException:
        for stage in stages:
            stage.unpersist()
        raise


def _split(spark: Any, tasks: list[_Task], journals: Mapping[str, FileSegments],
           found: Lines, stages: list[Any], sink: ChangeFiles | None, kill: str | None,
           say: Say) -> Replayed | None:
    """`replay_segments` once the tasks are planned: their jobs, the walk, continuations;
    None (``stages`` released) when the split does not apply after all."""
    alone = _run(spark, tasks, 0, stages, sink, kill)
    if any(o.misrouted is not None for o in alone.values()):
        for stage in stages:
            stage.unpersist()
        return None
    by_ns: dict[str, dict[int, int]] = {}  # ns -> segment -> task
    for number, task in enumerate(tasks):
        by_ns.setdefault(task.ns, {})[task.first] = number
    continued: dict[str, dict[int, int]] = {ns: {} for ns in by_ns}
    outcomes = dict(alone)
    while True:
        used: dict[str, list[SegmentOutcome]] = {}
        needed: list[_Task] = []
        for ns, segs in by_ns.items():
            runs, k = walk(journals[ns].count, {j: outcomes[t] for j, t in segs.items()},
                           {j: outcomes[t] for j, t in continued[ns].items()})
            used[ns] = runs
            if k is not None:
                needed.append(_Task(ns=ns, journal=journals[ns], first=k, go_on=True))
        if not needed:
            break
        say(f"replaying {len(needed)} continuation(s) behind dirty boundaries")
        lo = len(tasks)
        tasks.extend(needed)
        more = _run(spark, tasks, lo, stages, sink, kill)
        for number in more:
            continued[tasks[number].ns][tasks[number].first] = number
        outcomes.update(more)
    foreign = _foreign(found, set(journals), used)
    if foreign is None:
        for stage in stages:
            stage.unpersist()
        return None
    task_of = {id(o): n for n, o in outcomes.items()}
    chosen = sorted(task_of[id(o)] for runs in used.values() for o in runs)
    return _replayed(spark, stages, chosen, used, len(tasks), foreign, sink)


def _journal_files(found: Lines) -> dict[str, list[tuple[str, str]]] | None:
    """Each name server's files (path as given, absolute path), in reading order: every
    input a local plain JSON Lines file, named to a name server by its first line; else
    None. O(files): a first line each."""
    seen = found.seen
    if found.memory is not None or seen.parquets or seen.damaged or not found.paths:
        return None
    whole = found.whole_files or {}
    out: dict[str, list[tuple[str, str]]] = {}
    for i in sorted(found.paths):
        given = found.paths[i]
        if has_scheme(given):
            return None
        opened = os.path.abspath(given)
        if is_gzip(opened):
            return None
        ns = whole.get(i) or first_name(opened)
        if ns is None:
            return None
        out.setdefault(ns, []).append((given, opened))
    return out


def _foreign(found: Lines, names: set[str],
             used: Mapping[str, Sequence[SegmentOutcome]]) -> list[Row] | None:
    """The ``rejected`` rows of the lines of other name servers the tasks set aside, read
    in reading order as the whole replay reads them; None when such a name server has a
    file of its own or any of its lines is accepted (then its lines' order across files
    matters: not this way). O(those lines)."""
    lines = [f for runs in used.values() for o in runs for f in o.foreign]
    if not lines:
        return []
    if {f[0] for f in lines} & names:
        return None
    order = {path: i for i, path in found.paths.items()}
    lines.sort(key=lambda f: (order.get(f[1], -1), f[2]))
    loop = ReadReplay(replay=True)
    rows = list(loop.run([(source, number, text, None, None)
                          for _ns, source, number, text in lines]))
    if loop.reading.stats or any(table != "rejected" for table, _row in rows):
        return None
    return [row for _table, row in rows]


def _run(spark: Any, tasks: Sequence[_Task], lo: int, stages: list[Any],
         sink: ChangeFiles | None, kill: str | None) -> dict[int, SegmentOutcome]:
    """Tasks ``lo`` on as one stage, one task each, persisted (added to ``stages``); one
    job collects their outcomes. With a ``sink``, each task writes its route changes
    there itself."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    hi = len(tasks)
    step = _segment_step({n: tasks[n] for n in range(lo, hi)}, kill, sink)
    stage = (spark.range(lo, hi, 1, hi - lo).mapInArrow(step, SEGMENT_DDL)
             .persist(StorageLevel.DISK_ONLY))
    stages.append(stage)
    # the outcomes are pieces of their own: no Python step unpacks the rows to find them
    facts = stage.filter(F.col("piece") == PIECE_OUTCOME).select("ipc")
    with replay_job(spark):
        got = facts.collect()
    out: dict[int, SegmentOutcome] = {}
    for row in got:
        doc = json.loads(bytes(row["ipc"]))
        number = int(doc.pop("task"))
        out[number] = SegmentOutcome.from_json(doc)
    return out


def _segment_step(tasks: Mapping[int, _Task], kill: str | None,
                  sink: ChangeFiles | None = None) -> Step:
    """The tasks' Python step: input row ``id`` n runs ``tasks[n]``; its packed rows
    (`packed`) carry ``seg`` = n, then one row (``piece`` = `PIECE_OUTCOME`) its
    `SegmentOutcome` as JSON bytes in ``ipc``. With a ``sink`` its route changes are not
    among those rows: the task writes them to its folder there (`ChangeFiles.runs`)."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for (number,) in list(rows_of(batches, ("id",))):
            task = tasks[number]
            one = SegmentRun(task.ns, task.first)
            runs = None if sink is None else sink.runs(number)
            inner = packed(python_step(partial(_task_rows, task=task, run=one,
                                               changes=runs), kill=kill))
            for batch in inner(()):
                yield _with_seg(batch, number)
            doc = one.outcome().to_json()
            doc["task"] = number
            names = TABLES["route_changes"].names
            wide = wide_schema()
            yield _with_seg(pa.RecordBatch.from_arrays(
                [pa.array([PIECE_OUTCOME], pa.string()),
                 *(pa.nulls(1, wide.field(n).type) for n in names),
                 pa.array([json.dumps(doc).encode()], pa.binary())],
                names=["piece", *names, "ipc"]), number)

    return run


def _with_seg(batch: Any, number: int) -> Any:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [*batch.columns, pa.array([number] * batch.num_rows, pa.int64())],
        names=[*batch.schema.names, "seg"])


def _task_rows(_batches: Iterable[Any], *, task: _Task, run: SegmentRun,
               changes: ChangeRuns | None = None) -> Iterator[Emitted]:
    """One task's rows (all but sessions, which its outcome keeps): ``run`` over its
    lines; with ``changes``, the route changes go there instead (`ChangeRuns.divert`)."""
    journal = task.journal
    rows = run.replay(journal.lines(task.first), journal.sizes(task.first), go_on=task.go_on)
    yield from rows if changes is None else changes.divert(rows)


def _replayed(spark: Any, stages: Sequence[Any], chosen: Sequence[int],
              used: Mapping[str, Sequence[SegmentOutcome]], tasks: int,
              foreign: Sequence[Row], sink: ChangeFiles | None) -> Replayed:
    """The `Replayed` of the chosen tasks' rows, with the stitched sessions and the
    ``foreign`` lines' rejections (a small local frame) and the added-up counts; the route
    changes are the chosen tasks' files in ``sink`` when there is one."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    sessions: list[Row] = []
    stats = []
    rejected: dict[str, int] = {}
    for ns in sorted(used):
        rows, ns_stats, counts = stitch(ns, used[ns])
        sessions.extend(rows)
        if ns_stats is not None:
            stats.append(ns_stats)
        for name, n in counts.items():
            rejected[name] = rejected.get(name, 0) + n
    for row in foreign:
        count_rejected(rejected, row)
    keep = F.col("seg").isin(*chosen)
    changes = rest = None
    for stage in stages:
        if stage is sink:
            continue
        if sink is None:
            part = stage.filter(keep & (F.col("piece") == PIECE_CHANGES)).select(
                *TABLES["route_changes"].names)
            changes = part if changes is None else changes.unionByName(part)
        more = stage.filter(keep & (F.col("piece") == PIECE_REST)).select("ipc")
        rest = more if rest is None else rest.unionByName(more)
    written = () if sink is None else tuple(sink.files(chosen))
    if sink is not None:
        changes = sink.frame(spark, written)
    assert rest is not None and changes is not None
    # as many partitions downstream as task slots, not one per segment: a table's job and
    # the sweep's map side then start a few tasks, each reading several persisted blocks
    slots = max(1, task_slots(spark))
    local = local_frame(spark, [*(("sessions", s) for s in sessions),
                                *(("rejected", r) for r in foreign)])
    rows = (rest.coalesce(slots).mapInArrow(unpack_step(), WIDE_DDL)
            .filter(F.col("kind") == "row").unionByName(local)
            .persist(StorageLevel.DISK_ONLY))
    return Replayed(
        rows=rows, contributions=None, persisted=(*stages, rows),
        changes=changes.coalesce(slots),
        spans={s.ns: (s.first_ms, s.last_ms) for s in stats},
        sessions=tuple({c: r[c] for c in SESSION_ENDS} for r in sessions),
        rejected=rejected, name_servers=tuple(name_server_rows(stats, rejected)),
        gaps=tuple(gap_messages(stats)), partitions={ns: len(runs) for ns, runs in used.items()},
        read_tasks=tasks, change_files=written)
