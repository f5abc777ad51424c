"""The reference analysis with every name server's replay split at its snapshots: the
stitching rules of docs/journal.md ("Splitting a replay") in executable form, over the
pipeline's own reference deriver (``routing.pipeline._outputs.ReplayDeriver``), used
unchanged but for a subclass that can start at a snapshot.

`analyze_split` must give exactly `routing.pipeline.analyze_local`'s tables. It
cuts each name server's lines at its snapshot lines (`routing.journal.segment_starts`),
replays every segment on its own as a Spark task would (`SegmentRun`, each with a fresh
reader and deriver, the first line of the next segment read last as the boundary probe),
then walks the segments in order: behind a clean boundary the independent result is used;
behind a dirty one the segment is replayed again as the continuation of the one before.
The rows are then stitched (sessions cut by a boundary are joined) and the rest of the
reference runs unchanged (the per-topic sweep, the name-server table).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any

import attrs

from routing import BrokerRegistered
from routing.journal import JournalSnapshot, segment_starts, snapshot_key
from routing.pipeline._answers import Answer, Change, answer_of_change
from routing.pipeline._availability import session_removals
from routing.pipeline._deriver import ReplayDeriver, _Session
from routing.pipeline._files import line_key
from routing.pipeline._read_replay import NsReading, NsStats, name_server_rows, rejected_counts
from routing.pipeline._schema import Emitted, Row
from routing.pipeline._store import TableStore
from routing.pipeline._sweep import sweep_changes

Line = tuple[str, int, str]
Key = tuple[str, str]


class SegmentDeriver(ReplayDeriver):
    """The reference deriver, able to start at a snapshot: each live entry of the snapshot
    is a *carried* session (opened in an earlier segment: no start here, no heartbeat
    counted yet, last refresh as recorded), and each route it holds is the topic's
    previous answer. A session row closed from a carried session is marked ``carried``."""

    def __init__(self, ns: str) -> None:
        super().__init__(ns, 0, end_ms=0, changes=True)
        self.carried: dict[Key, _Session] = {}

    def start_at(self, snapshot: JournalSnapshot) -> None:
        for e in snapshot.state.live:
            session = _Session(BrokerRegistered(
                cluster=e.cluster, broker_name=e.broker_name, broker_id=e.broker_id,
                broker_addr=e.broker_addr, generation=e.generation, first=True),
                e.last_update_ms)
            session.heartbeats = 0
            self.sessions[(e.cluster, e.broker_addr)] = session
            self.carried[(e.cluster, e.broker_addr)] = session
        manager = self.replayer.managers[self.ns]
        for topic in manager.all_topics():
            route = manager.stored_route(topic)
            if route is not None:
                self.present[topic] = Answer.of(route, 0).digest

    def _close(self, key: Key, at: int, reason: str, *, last: int | None = None) -> Emitted:
        session = self.sessions[key]
        table, row = super()._close(key, at, reason, last=last)
        if self.carried.get(key) is session:
            del self.carried[key]
            row["carried"] = True
        return table, row

    def agrees_with(self, snapshot: JournalSnapshot) -> bool:
        """Its own state is what a deriver starting at ``snapshot`` derives (sessions of
        the live entries with their last refresh, the answers of the stored routes)."""
        manager = self.replayer.managers.get(self.ns)
        if manager is None:
            return False
        sessions = {k: (s.broker_name, s.broker_id, s.last) for k, s in self.sessions.items()}
        live = {(e.cluster, e.broker_addr): (e.broker_name, e.broker_id, e.last_update_ms)
                for e in snapshot.state.live}
        routes = {t: Answer.of(manager.stored_route(t), 0).digest for t in manager.all_topics()
                  if manager.stored_route(t) is not None}
        return sessions == live and routes == self.present


class SegmentRun:
    """One segment of one name server replayed on its own (a Spark task), or, after
    `extend`, several in a row (the continuation behind a dirty boundary)."""

    def __init__(self, ns: str, lines: Sequence[Line], probe: Line | None) -> None:
        self.ns = ns
        self.reading = NsReading()
        self.deriver = SegmentDeriver(ns)
        self.rows: list[Emitted] = []
        key = snapshot_key(lines[0][2]) if lines else None
        if key is not None:  # a segment that starts at a snapshot: no header to count
            self.reading.stats[ns] = NsStats(ns=ns, first_ms=key[2], last_ms=key[2])
        self.starts_at_snapshot = key is not None
        self.clean_end = False
        self._first = True
        self.extend(lines, probe)

    def extend(self, lines: Iterable[Line], probe: Line | None) -> None:
        for line in lines:
            self._feed(line)
        self.clean_end = probe is not None and self._probe(probe)

    def _feed(self, line: Line) -> None:
        source, number, text = line
        reading, deriver = self.reading, self.deriver
        hit = reading.steady(text, self.ns)
        if hit is not None:
            if deriver.steady(hit[3], hit[2]):
                return
            entry = reading.reader.record_of(hit)
        else:
            entry = reading.feed(text, source, number)
        first, self._first = self._first, False
        if entry is None:
            return
        self.rows.extend(deriver.apply(entry, line))
        if first and self.starts_at_snapshot and isinstance(entry, JournalSnapshot):
            deriver.start_at(entry)

    def _probe(self, line: Line) -> bool:
        """Read the next segment's first line as the whole replay would; True when the
        boundary is clean. On a clean boundary the line belongs to the next segment
        (its record is counted there); otherwise to this run, which goes on."""
        source, number, text = line
        entry = self.reading.feed(text, source, number)
        if isinstance(entry, JournalSnapshot):
            checked = self.deriver.replayer.apply(entry)
            if checked.result is True and self.deriver.agrees_with(entry):
                self.reading.stats[self.ns].records -= 1
                return True
        elif entry is not None:
            self.rows.extend(self.deriver.apply(entry, line))
        return False


@attrs.define
class NsSplit:
    """What the split replay of one name server produced, stitched."""

    rows: list[Emitted]
    stats: NsStats | None
    rejected: list[Row]
    segments: int
    replayed_again: int


def replay_split(ns: str, lines: Sequence[Line]) -> NsSplit:
    """Split, replay every segment on its own, take each result behind a clean boundary
    and replay again behind a dirty one, then stitch."""
    starts = segment_starts(text for _s, _n, text in lines)
    bounds = [*starts, len(lines)]
    segments = [lines[a:b] for a, b in itertools.pairwise(bounds)]

    def probe(k: int) -> Line | None:
        return segments[k + 1][0] if k + 1 < len(segments) else None

    alone = [SegmentRun(ns, seg, probe(k)) for k, seg in enumerate(segments)]  # the tasks
    used = [alone[0]]
    again = 0
    for k in range(1, len(segments)):
        if used[-1].clean_end:
            used.append(alone[k])
        else:  # the boundary line was read by the run before: go on after it
            used[-1].extend(segments[k][1:], probe(k))
            again += 1
    return _stitch(ns, used, len(segments), again)


def _stitch(ns: str, runs: Sequence[SegmentRun], segments: int, again: int) -> NsSplit:
    rows: list[Emitted] = []
    rejected: list[Row] = []
    stats: NsStats | None = None
    chain: dict[Key, dict[str, Any]] = {}  # sessions open at the end of the runs so far
    for run in runs:
        rejected.extend(run.reading.rejected)
        stats = _merge_stats(stats, run.reading.stats.get(ns))
        for table, row in run.rows:
            if table == "sessions" and row.pop("carried", False):
                piece = chain.pop((row["cluster"], row["broker_addr"]))
                row["start_ms"] = piece["start"]
                row["duration_ms"] = row["end_ms"] - piece["start"]
                row["heartbeats"] += piece["heartbeats"]
                row["largest_gap_ms"] = max(row["largest_gap_ms"], piece["gap"])
            rows.append((table, row))
        follows: dict[Key, dict[str, Any]] = {}
        for key, s in run.deriver.sessions.items():
            piece = {"name": s.broker_name, "id": s.broker_id, "start": s.start,
                     "heartbeats": s.heartbeats, "gap": s.gap, "last": s.last}
            if run.deriver.carried.get(key) is s:
                before = chain.pop(key)
                piece.update(start=before["start"], gap=max(s.gap, before["gap"]),
                             heartbeats=s.heartbeats + before["heartbeats"])
            follows[key] = piece
        assert not chain, f"{ns}: sessions left behind at a clean boundary: {sorted(chain)}"
        chain = follows
    end = stats.last_ms if stats is not None else 0
    for key in sorted(chain):  # the reference's `finish`: still open at the end
        p = chain[key]
        at = max(end, p["last"])
        rows.append(("sessions", {
            "ns": ns, "cluster": key[0], "broker_name": p["name"], "broker_id": p["id"],
            "broker_addr": key[1], "start_ms": p["start"], "end_ms": at, "end_reason": "open",
            "duration_ms": at - p["start"], "heartbeats": p["heartbeats"],
            "last_heartbeat_ms": p["last"], "largest_gap_ms": p["gap"]}))
    return NsSplit(rows=rows, stats=stats, rejected=rejected, segments=segments,
                   replayed_again=again)


def _merge_stats(total: NsStats | None, part: NsStats | None) -> NsStats | None:
    if part is None or total is None:
        return total if part is None else attrs.evolve(part)
    total.last_ms = max(total.last_ms, part.last_ms)
    total.records += part.records
    total.headers += part.headers
    total.gaps += part.gaps
    total.first_gap = total.first_gap or part.first_gap
    return total


_SWEEP_ORDER = itemgetter(0, 1, 2)


def analyze_split(sources: Mapping[str, Iterable[str]], *, at: Sequence[int] = ()
                  ) -> tuple[dict[str, list[Row]], dict[str, NsSplit]]:
    """`analyze_local` over ``{source: lines}`` with every name server split at its
    snapshots; also each name server's `NsSplit` (segment counts)."""
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
        split = splits[ns] = replay_split(ns, by_ns[ns])
        for table, row in split.rows:
            out.add(table, row)
            if table == "route_changes":
                names = tuple(row["groups"])
                answer = answer_of_change(row, groups=groups.setdefault(names, names))
                changes.setdefault(row["topic"], []).append(
                    (row["at_ms"], row["ns"], row["seq"], answer))
            elif table == "rejected":
                rejected.append(row)
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


__all__ = ["NsSplit", "SegmentDeriver", "SegmentRun", "analyze_split", "replay_split"]
