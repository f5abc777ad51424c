"""A name server's replay split at its snapshots: one segment replayed on its own
(`SegmentRun`, a Spark task), what the driver keeps of it (`SegmentOutcome`), the walk over
a name server's segments (`walk`: an independent result behind a clean boundary, a
continuation behind a dirty one) and the stitching of the sessions a boundary cut
(`stitch`). The rules are ``docs/journal.md``, "Splitting a replay" (1–7); the tables are
exactly the whole replay's (``tests/test_split_replay.py``, ``tests/spark/``).

A segment runs the reference's own reader and deriver (``_read_replay.NsReading``,
``_deriver.ReplayDeriver``); `SegmentDeriver` only adds a start at a snapshot and the
check of its own state at the boundary. Memory O(state) per run; time O(its lines) plus
one restore and one comparison (O(state)) per boundary. All times are ms.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from .._errors import InvariantViolation
from .._messages import BrokerRegistered
from ..journal import JournalEntry, JournalSnapshot, snapshot_key
from ._answers import Answer
from ._deriver import ReplayDeriver, _Session
from ._files import decode_line, line_key
from ._read_replay import NsReading, NsStats, count_rejected
from ._schema import Emitted, Row

__all__ = ["SegLine", "SegmentDeriver", "SegmentOutcome", "SegmentRun", "stitch", "walk"]

#: One line of a name server's journal: (source, line number, text, raw bytes when the
#: line is not UTF-8 (then text is None)).
SegLine = tuple[str, int, "str | None", "bytes | None"]
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
        """Take the snapshot's live entries as carried sessions and its routes as the
        previous answers (rule 6). O(state)."""
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
        the live entries with their last refresh, the answers of the stored routes).
        O(state)."""
        manager = self.replayer.managers.get(self.ns)
        if manager is None:
            return False
        sessions = {k: (s.broker_name, s.broker_id, s.last) for k, s in self.sessions.items()}
        live = {(e.cluster, e.broker_addr): (e.broker_name, e.broker_id, e.last_update_ms)
                for e in snapshot.state.live}
        routes = {t: Answer.of(manager.stored_route(t), 0).digest for t in manager.all_topics()
                  if manager.stored_route(t) is not None}
        return sessions == live and routes == self.present


@attrs.define(kw_only=True)
class SegmentOutcome:
    """What the driver keeps of one run (a segment, or a continuation over several):
    segments ``first``..``last``, whether the boundary after ``last`` is clean, the
    reading's stats, rejected rows per name server, the session rows it closed (``carried``
    when the session started before ``first``), the sessions open at its end (pieces:
    ``cluster, addr, name, id, start, heartbeats, gap, last, carried``), the lines of other
    name servers among its lines (``foreign``: not read here) and a probe line of another
    name server (``misrouted``: the run stopped there)."""

    ns: str
    first: int
    last: int
    clean: bool
    stats: NsStats | None
    rejected: dict[str, int]
    closed: list[Row]
    open: list[dict[str, Any]]
    misrouted: Row | None = None
    #: lines of other name servers in its lines: [name server, source, number, text]
    foreign: list[list[Any]] = attrs.Factory(list)

    def to_json(self) -> dict[str, Any]:
        """A JSON document (`from_json` reads it back)."""
        doc = attrs.asdict(self, recurse=False)
        doc["stats"] = None if self.stats is None else self.stats.to_json()
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SegmentOutcome:
        stats = doc.get("stats")
        return cls(**{**doc, "stats": None if stats is None else NsStats.from_json(stats)})


class SegmentRun:
    """One name server's lines from the start of segment ``first`` replayed on its own (a
    Spark task): `replay` yields the rows (all but ``sessions``, which the outcome keeps
    for stitching) and, with ``go_on``, continues past dirty boundaries (the continuation
    of rule 4). Lines of no name server are judged by a fresh reader (as the whole replay
    does); a line of another name server is set aside (``foreign``, for the driver); a
    probe of another name server stops the run (``misrouted``)."""

    def __init__(self, ns: str, first: int = 0) -> None:
        self.ns = ns
        self.first = first
        self.last = first
        self.reading = NsReading()
        self.deriver = SegmentDeriver(ns)
        self.rows: list[Emitted] = []
        self.closed: list[Row] = []
        self.rejected: dict[str, int] = {}
        self.clean_end = False
        self.misrouted: Row | None = None
        #: lines of other name servers met: (their name server, source, number, text)
        self.foreign: list[tuple[str, str, int, str]] = []
        self._started = False
        self._at_snapshot = False

    def replay(self, lines: Iterator[SegLine], sizes: Sequence[int | None], *,
               go_on: bool = False) -> Iterator[Emitted]:
        """Read ``sizes[0]`` lines (None: to the end) as segment ``first``, then the next
        line as the boundary probe (rule 3); with ``go_on``, behind a dirty probe the next
        segment's other ``sizes[1] - 1`` lines, and so on until a clean boundary or the
        end. O(lines)."""
        k = 0
        count = sizes[0]
        while True:
            n = 0
            while count is None or n < count:
                line = next(lines, None)
                if line is None:
                    self.last = self.first + k
                    return
                self._feed(line)
                n += 1
                if self.rows:
                    yield from self.rows
                    self.rows.clear()
                if self.misrouted is not None:
                    return
            self.last = self.first + k
            probe = next(lines, None)
            if probe is None:
                return
            self.clean_end = self._probe(probe)
            yield from self.rows
            self.rows.clear()
            if self.clean_end or not go_on or self.misrouted is not None:
                return
            k += 1
            size = sizes[k] if k < len(sizes) else None
            count = None if size is None else size - 1

    def outcome(self) -> SegmentOutcome:
        """What the driver keeps of this run (its rows are yielded by `replay`)."""
        d = self.deriver
        pieces = [{"cluster": key[0], "addr": key[1], "name": s.broker_name, "id": s.broker_id,
                   "start": s.start, "heartbeats": s.heartbeats, "gap": s.gap, "last": s.last,
                   "carried": d.carried.get(key) is s} for key, s in d.sessions.items()]
        return SegmentOutcome(ns=self.ns, first=self.first, last=self.last,
                              clean=self.clean_end, stats=self.reading.stats.get(self.ns),
                              rejected=dict(self.rejected), closed=self.closed, open=pieces,
                              misrouted=self.misrouted,
                              foreign=[list(f) for f in self.foreign])

    def _take(self, emitted: Iterable[Emitted]) -> None:
        for table, row in emitted:
            if table == "sessions":
                self.closed.append(row)
                continue
            if table == "rejected":
                count_rejected(self.rejected, row)
            self.rows.append((table, row))

    def _rejections(self) -> None:
        bad = self.reading.rejected
        if bad:
            self._take([("rejected", row) for row in bad])
            bad.clear()

    def _own(self, text: str, source: str, number: int, *, probe: bool = False
             ) -> str | bool | None:
        """The line's name server (None: none); False for another name server's line: set
        aside in ``foreign`` (it touches no state of this one), or, as the probe, marked
        ``misrouted`` (the split does not apply)."""
        own = self.reading.reader.remembered_name(text) or line_key(text)[0]
        if own is not None and own != self.ns:
            if probe:
                self.misrouted = {"ns": own, "source": source, "line": number}
            else:
                self.foreign.append((own, source, number, text))
            return False
        return own

    def _feed(self, line: SegLine) -> None:
        source, number, text, raw = line
        reading, deriver = self.reading, self.deriver
        first = not self._started
        if first:
            self._started = True
            key = snapshot_key(text) if text is not None else None
            if key is not None:  # starts at a snapshot: no header
                self.reading.stats[self.ns] = NsStats(ns=self.ns, first_ms=key[2],
                                                      last_ms=key[2])
                self._at_snapshot = True
        if raw is not None or text is None:  # not UTF-8: rejected, state untouched
            reading.feed(decode_line(raw or b""), source, number, keyed=False)
            self._rejections()
            return
        hit = reading.steady(text, self.ns) if reading.stats.get(self.ns) else None
        entry: JournalEntry | None
        if hit is not None:
            if deriver.steady(hit[3], hit[2]):
                return
            entry = reading.reader.record_of(hit)
        else:
            own = self._own(text, source, number)
            if own is False:
                return
            entry = reading.feed(text, source, number, keyed=own is not None)
            self._rejections()
        if entry is None:
            return
        self._take(deriver.apply(entry, (source, number, text)))
        self._rejections()
        if first and self._at_snapshot and isinstance(entry, JournalSnapshot):
            deriver.start_at(entry)

    def _probe(self, line: SegLine) -> bool:
        """Read the next segment's first line as the whole replay would; True when the
        boundary is clean. On a clean boundary the line belongs to the next segment
        (its record is counted there); otherwise to this run, which goes on."""
        source, number, text, raw = line
        if raw is not None or text is None:
            self._feed(line)
            return False
        own = self._own(text, source, number, probe=True)
        if own is False:
            return False
        entry = self.reading.feed(text, source, number, keyed=own is not None)
        self._rejections()
        if isinstance(entry, JournalSnapshot):
            checked = self.deriver.replayer.apply(entry)
            if checked.result is True and self.deriver.agrees_with(entry):
                self.reading.stats[self.ns].records -= 1
                return True
        elif entry is not None:
            self._take(self.deriver.apply(entry, (source, number, text)))
            self._rejections()
        return False


def walk(count: int, alone: Mapping[int, SegmentOutcome],
         continued: Mapping[int, SegmentOutcome]) -> tuple[list[SegmentOutcome], int | None]:
    """The runs whose results make a name server's replay (rules 3, 4): from segment 0,
    each segment's independent result (``alone``) behind a clean boundary, else the
    continuation that starts at it (``continued``). Returns the runs so far and the
    segment whose continuation is still needed (None: complete). O(segments)."""
    used: list[SegmentOutcome] = []
    k = 0
    while k < count:
        run = alone[k]
        if not run.clean and run.last < count - 1:
            cont = continued.get(k)
            if cont is None:
                return used, k
            run = cont
        used.append(run)
        k = run.last + 1
    return used, None


def stitch(ns: str, runs: Sequence[SegmentOutcome]
           ) -> tuple[list[Row], NsStats | None, dict[str, int]]:
    """The session rows of a name server's runs, joined where a boundary cut them, with
    the runs' stats and rejected counts added up (rules 5, 7). O(sessions)."""
    rows: list[Row] = []
    stats: NsStats | None = None
    rejected: dict[str, int] = {}
    chain: dict[Key, dict[str, Any]] = {}  # sessions open at the end of the runs so far
    for run in runs:
        for name, n in run.rejected.items():
            rejected[name] = rejected.get(name, 0) + n
        stats = _merge_stats(stats, run.stats)
        for closed in run.closed:
            row = dict(closed)
            if row.pop("carried", False):
                piece = chain.pop((row["cluster"], row["broker_addr"]))
                row["start_ms"] = piece["start"]
                row["duration_ms"] = row["end_ms"] - piece["start"]
                row["heartbeats"] += piece["heartbeats"]
                row["largest_gap_ms"] = max(row["largest_gap_ms"], piece["gap"])
            rows.append(row)
        follows: dict[Key, dict[str, Any]] = {}
        for piece in run.open:
            key = (piece["cluster"], piece["addr"])
            piece = dict(piece)
            if piece["carried"]:
                before = chain.pop(key)
                piece.update(start=before["start"], gap=max(piece["gap"], before["gap"]),
                             heartbeats=piece["heartbeats"] + before["heartbeats"])
            follows[key] = piece
        if chain:
            raise InvariantViolation([f"{ns}: sessions left behind at a clean boundary: "
                                      f"{sorted(chain)}"])
        chain = follows
    end = stats.last_ms if stats is not None else 0
    for key in sorted(chain):  # the reference's `finish`: still open at the end
        p = chain[key]
        at = max(end, p["last"])
        rows.append({
            "ns": ns, "cluster": key[0], "broker_name": p["name"], "broker_id": p["id"],
            "broker_addr": key[1], "start_ms": p["start"], "end_ms": at, "end_reason": "open",
            "duration_ms": at - p["start"], "heartbeats": p["heartbeats"],
            "last_heartbeat_ms": p["last"], "largest_gap_ms": p["gap"]})
    return rows, stats, rejected


def _merge_stats(total: NsStats | None, part: NsStats | None) -> NsStats | None:
    if part is None or total is None:
        return total if part is None else attrs.evolve(part)
    total.last_ms = max(total.last_ms, part.last_ms)
    total.records += part.records
    total.headers += part.headers
    total.gaps += part.gaps
    total.first_gap = total.first_gap or part.first_gap
    return total
