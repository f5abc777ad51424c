"""The reference analysis with every name server's replay split at its snapshots, run in
one process: a thin local driver over the pipeline's segment machinery
(``routing.pipeline._segments``: `SegmentRun`, `walk`, `stitch`), the rules of
docs/journal.md ("Splitting a replay") as Spark runs them, without Spark.

`analyze_split` must give exactly `routing.pipeline.analyze_local`'s tables. It cuts each
name server's lines at its snapshot lines (`routing.journal.segment_starts`), replays every
segment on its own as a Spark task would (each with a fresh reader and deriver, the first
line of the next segment read last as the boundary probe), then walks the segments in
order: behind a clean boundary the independent result is used; behind a dirty one a
continuation from the segment before is. The rows are then stitched (sessions cut by a
boundary are joined) and the rest of the reference runs unchanged (the per-topic sweep,
the name-server table).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter

import attrs

from routing.journal import segment_starts
from routing.pipeline._answers import Change, answer_of_change
from routing.pipeline._availability import session_removals
from routing.pipeline._files import line_key
from routing.pipeline._read_replay import NsReading, NsStats, name_server_rows, rejected_counts
from routing.pipeline._schema import Emitted, Row
from routing.pipeline._segments import SegLine, SegmentOutcome, SegmentRun, stitch, walk
from routing.pipeline._store import TableStore
from routing.pipeline._sweep import sweep_changes

Line = tuple[str, int, str]


@attrs.define
class NsSplit:
    """What the split replay of one name server produced, stitched."""

    rows: list[Emitted]
    stats: NsStats | None
    rejected: list[Row]
    segments: int
    replayed_again: int


def replay_split(ns: str, lines: Sequence[Line], group: int = 1) -> NsSplit:
    """Split, replay every run of ``group`` neighbouring segments on its own (one task
    each; 1: every segment alone), take each result behind a clean boundary and a
    continuation behind a dirty one, then stitch."""
    starts = segment_starts(text for _s, _n, text in lines)
    segments = len(starts)
    starts = starts[::group]  # a run of neighbouring segments: one segment, cut once
    bounds = [*starts, len(lines)]
    sizes = [b - a for a, b in itertools.pairwise(bounds)]
    seg_lines: list[SegLine] = [(s, n, t, None) for s, n, t in lines]

    def run(k: int, go_on: bool) -> tuple[SegmentOutcome, list[Emitted]]:
        one = SegmentRun(ns, k)
        rows = list(one.replay(iter(seg_lines[starts[k]:]), sizes[k:], go_on=go_on))
        return one.outcome(), rows

    alone = {k: run(k, False) for k in range(len(sizes))}  # the tasks
    continued: dict[int, tuple[SegmentOutcome, list[Emitted]]] = {}
    while True:
        used, needed = walk(len(sizes), {k: o for k, (o, _r) in alone.items()},
                            {k: o for k, (o, _r) in continued.items()})
        if needed is None:
            break
        continued[needed] = run(needed, True)
    made = {id(o): rows for o, rows in [*alone.values(), *continued.values()]}
    rows = [row for outcome in used for row in made[id(outcome)]]
    sessions, stats, _counts = stitch(ns, used)
    rows.extend(("sessions", row) for row in sessions)
    rejected = [row for table, row in rows if table == "rejected"]
    return NsSplit(rows=[(t, r) for t, r in rows if t != "rejected"], stats=stats,
                   rejected=rejected, segments=segments, replayed_again=sum(
                       o.last - o.first for o in used))


_SWEEP_ORDER = itemgetter(0, 1, 2)


def analyze_split(sources: Mapping[str, Iterable[str]], *, at: Sequence[int] = (),
                  group: int = 1) -> tuple[dict[str, list[Row]], dict[str, NsSplit]]:
    """`analyze_local` over ``{source: lines}`` with every name server split at its
    snapshots, ``group`` neighbouring segments a task; also each name server's `NsSplit`
    (segment counts)."""
    by_ns: dict[str, list[Line]] = {}
    keyless: list[Line] = []
    for source, lines in sources.items():
        for number, text in enumerate(lines, start=1):
            ns, _seq = line_key(text)
            (keyless if ns is None else by_ns.setdefault(ns, [])).append((source, number, text))
    out = TableStore()
    changes: dict[str, list[Change]] = {}
    groups: dict[tuple[str, ...], tuple[str, ...]] = {}
    rejected: list[Row] = []
    stats: dict[str, NsStats] = {}
    splits: dict[str, NsSplit] = {}
    for ns in sorted(by_ns):
        split = splits[ns] = replay_split(ns, by_ns[ns], group)
        for table, row in split.rows:
            out.add(table, row)
            if table == "route_changes":
                names = tuple(row["groups"])
                answer = answer_of_change(row, groups=groups.setdefault(names, names))
                changes.setdefault(row["topic"], []).append(
                    (row["at_ms"], row["ns"], row["seq"], answer))
        rejected.extend(split.rejected)
        out.extend("rejected", split.rejected)
        if split.stats is not None:
            stats[ns] = split.stats
    loose = NsReading()
    for source, number, text in keyless:
        loose.feed(text, source, number, keyed=False)
    out.extend("rejected", loose.rejected)
    rejected.extend(loose.rejected)
    spans = {ns: (s.first_ms, s.last_ms) for ns, s in stats.items()}
    removals = session_removals(out.dicts("sessions"))
    for topic in sorted(changes):
        items = changes.pop(topic)
        items.sort(key=_SWEEP_ORDER)
        for table, row in sweep_changes(topic, items, spans, at, removals=removals):
            out.add(table, row)
    out.extend("name_servers", name_server_rows(stats.values(), rejected_counts(rejected)))
    return out.tables(), splits


__all__ = ["NsSplit", "analyze_split", "replay_split"]
