"""The read→replay loop, the one both engines run: journal lines in, table rows out.

The reading rules are `routing.journal.JournalReader`'s. Its state is kept per name server
(last sequence number, last time, table definitions), so feeding it one name server's lines
in reading order gives exactly what it gives for all lines: the reference feeds it every
line in one process, Spark one name server (or one journal file) per task, through the
same `ReadReplay.run`. Each accepted entry is replayed at once by its name server's
`ReplayDeriver` (``_deriver.py``), so a task holds one reader and one manager per name
server, never its lines. Most records are a broker re-sending the table it last sent: the
reader's steady lane (`JournalReader.steady`) accepts such a line without parsing it, and
the deriver renews it in O(1) (`ReplayDeriver.steady`).

`NsStats` is what reading saw of each name server (the ``name_servers`` table,
`name_server_rows`; ``--strict``'s `gap_messages`). All times are ms.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from ..journal import JournalEntry, JournalHeader, JournalReader, Register, RejectedLine, Scan
from ._deriver import ReplayDeriver
from ._files import Line, decode_line, line_key
from ._groups import nodes_of
from ._schema import Emitted, Row

__all__ = ["LINE", "MISROUTED", "NsReading", "NsStats", "ReadReplay", "count_rejected",
           "gap_messages", "name_server_rows", "rejected_counts", "rejected_row"]

#: The kinds of row a read emits besides table rows: an accepted line with the nodes it
#: touches (``replay=False``: the broker-group partition replays it later), and a line of
#: another name server than its group's (Spark's read tasks; the driver then reruns).
LINE, MISROUTED = "line", "misrouted"


@attrs.define(kw_only=True)
class NsStats:
    """What reading one name server's journal saw (for the ``name_servers`` table)."""

    ns: str
    first_ms: int
    last_ms: int
    records: int = 0
    headers: int = 0
    gaps: int = 0
    #: (last accepted seq, next accepted seq) of the first gap.
    first_gap: tuple[int, int] | None = None

    def see(self, entry: JournalEntry) -> None:
        """Count one accepted entry. O(1)."""
        if isinstance(entry, JournalHeader):
            self.headers += 1
            self.last_ms = max(self.last_ms, entry.start_ms)
        else:
            self.records += 1
            if entry.at_ms > self.last_ms:
                self.last_ms = entry.at_ms

    def to_row(self, rejected: int) -> Row:
        """The ``name_servers`` row, with ``rejected`` lines of this name server."""
        return {"ns": self.ns, "first_ms": self.first_ms, "last_ms": self.last_ms,
                "records": self.records, "restarts": max(0, self.headers - 1),
                "gaps": self.gaps, "rejected": rejected}

    def to_json(self) -> dict[str, Any]:
        """A JSON document of every field (`from_json` reads it back)."""
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> NsStats:
        """The inverse of `to_json` (JSON makes the gap pair a list). No converter on the
        class: attrs would then hook every attribute write, about 1 µs per record."""
        gap = doc.get("first_gap")
        return cls(**{**doc, "first_gap": None if gap is None else (int(gap[0]), int(gap[1]))})


def rejected_row(bad: RejectedLine) -> Row:
    """The ``rejected`` row of a line the reader set aside."""
    ns, seq = line_key(bad.text)
    return {"source": bad.source, "line": bad.line_number, "stage": "read",
            "reason": bad.reason, "ns": ns, "seq": seq, "text": bad.text}


class NsReading:
    """Reads lines with one `JournalReader`, keeping per-name-server stats.

    Feed lines in reading order (all of them, or one name server's); `feed` returns the
    accepted entry or None (the rejection was added to ``rejected``).
    """

    def __init__(self) -> None:
        self.reader = JournalReader()
        self.stats: dict[str, NsStats] = {}
        self.rejected: list[Row] = []
        self._gaps_seen = 0

    def steady(self, text: str, ns: str | None = None
               ) -> tuple[str, int, int, Register | Scan, Any] | None:
        """`JournalReader.steady`, counted in the name server's stats: a remembered
        re-registration or scan in order is accepted without building its record (None:
        `feed` the line). O(1)."""
        hit = self.reader.steady(text, ns)
        if hit is not None:
            stats = self.stats[hit[0]]
            stats.records += 1
            if hit[2] > stats.last_ms:
                stats.last_ms = hit[2]
        return hit

    def seen(self, entry: JournalEntry) -> JournalEntry:
        """Count an entry decoded elsewhere (the reference given entries) in its name
        server's stats, as `feed` counts what it accepts. O(1)."""
        stats = self.stats.get(entry.nameserver_id)
        if stats is None and isinstance(entry, JournalHeader):
            stats = self.stats[entry.nameserver_id] = NsStats(
                ns=entry.nameserver_id, first_ms=entry.start_ms, last_ms=entry.start_ms)
        if stats is not None:
            stats.see(entry)
        return entry

    def feed(self, text: str, source: str, line: int, *,
             keyed: bool = True) -> JournalEntry | None:
        """``keyed=False`` for a line without a name server: a fresh reader judges it (it
        is rejected before any state is read)."""
        reader = self.reader if keyed else JournalReader()
        item = reader.feed(text, source=source, line_number=line)
        if isinstance(item, RejectedLine):
            self.rejected.append(rejected_row(item))
            return None
        stats = self.stats.get(item.nameserver_id)
        if stats is None:
            assert isinstance(item, JournalHeader)  # the reader wants a header first
            stats = self.stats[item.nameserver_id] = NsStats(
                ns=item.nameserver_id, first_ms=item.start_ms, last_ms=item.start_ms)
        stats.see(item)
        gaps = self.reader.gaps
        while self._gaps_seen < len(gaps):
            gap = gaps[self._gaps_seen]
            self._gaps_seen += 1
            seen = self.stats[gap.nameserver_id]
            seen.gaps += 1
            if seen.first_gap is None:
                seen.first_gap = (gap.after_seq, gap.next_seq)
        return item


def count_rejected(counts: dict[str, int], row: Row) -> None:
    """Add one ``rejected`` row to ``counts`` (per name server; a row without one is not
    counted). Both engines count with it."""
    ns = row.get("ns")
    if ns is not None:
        counts[ns] = counts.get(ns, 0) + 1


def rejected_counts(rejected: Iterable[Row]) -> dict[str, int]:
    """Rejected rows per name server (`count_rejected`)."""
    counts: dict[str, int] = {}
    for row in rejected:
        count_rejected(counts, row)
    return counts


def name_server_rows(stats: Iterable[NsStats], rejected: Mapping[str, int]) -> list[Row]:
    """The ``name_servers`` table: one row per name server with an accepted header;
    ``rejected`` counts the rejected rows of each name server."""
    return [s.to_row(rejected.get(s.ns, 0)) for s in sorted(stats, key=lambda s: s.ns)]


class ReadReplay:
    """The read→replay loop: one `NsReading` and one `ReplayDeriver` per name server.

    `run` reads lines in reading order and yields every row they produce (`Emitted`):
    ``rejected`` rows as soon as a line is set aside, then the replay's ``sessions``,
    ``expiries`` and ``route_changes`` (a whole name server's answers: ``changes=True``).
    ``replay=False`` only reads: each accepted line comes out as a `LINE` row with the
    nodes it touches (`_groups.nodes_of`), replayed later per broker-group component.
    ``rejected`` counts the ``rejected`` rows emitted per name server.
    """

    def __init__(self, *, replay: bool = True) -> None:
        self.reading = NsReading()
        self.replay = replay
        self.derivers: dict[str, ReplayDeriver] = {}
        self.rejected: dict[str, int] = {}

    def run(self, items: Iterable[Line | JournalEntry], *, keyed: bool = False,
            finish: bool = True) -> Iterator[Emitted]:
        """Read (and replay) ``items``: `Line` tuples, or entries decoded already; at the
        end, close every name server's open sessions (`finish`; ``finish=False`` keeps
        them open: the live watcher feeds a name server's files one batch at a time).

        ``keyed`` (Spark's read tasks): the lines come grouped by their ``key``, the JVM's
        guess of their name server. The reader's own key (`line_key`) decides: a line
        without one is judged by a fresh reader (it is rejected without touching state,
        wherever it is); a line whose key differs from its group's is not read, and one
        `MISROUTED` row says so (the driver reruns the read with Python's keys). Each name
        server is closed as soon as its group ends.

        O(1) a line on the steady lane, else a parse and a replay; memory O(state): one
        reader and one manager per name server, never the lines."""
        reading, derivers, replay = self.reading, self.derivers, self.replay
        steady, feed, bad = reading.steady, reading.feed, reading.rejected
        record_of, remembered = reading.reader.record_of, reading.reader.remembered_name
        current: str | None = None
        misrouted = False
        entry: JournalEntry | None
        for item in items:
            if isinstance(item, tuple):
                source, line, text, raw, key = item
                if keyed and key != current:
                    if current is not None:
                        yield from self._close(current)
                    current = key
                if raw is not None or text is None:  # not UTF-8: rejected, state untouched
                    text, hit = decode_line(raw or b""), None
                else:
                    hit = steady(text, key) if replay else None
                if hit is not None:  # a remembered re-registration or scan, in order
                    deriver = derivers.get(hit[0])
                    if deriver is not None and deriver.steady(hit[3], hit[2]):
                        continue
                    entry = record_of(hit)
                else:
                    shared = not keyed
                    if keyed and raw is None:
                        own = remembered(text) or line_key(text)[0]
                        if own is not None and own != key:
                            if not misrouted:  # the driver reruns the read: one row says so
                                misrouted = True
                                yield MISROUTED, {"ns": own, "source": source, "line": line}
                            continue
                        shared = own is not None
                    entry = feed(text, source, line, keyed=shared)
                where = (source, line, text)
            else:
                entry = reading.seen(item)
                where = ("<entries>", item.seq, "")
            if bad:  # handed on at once: memory stays O(state), not O(lines)
                for row in bad:
                    count_rejected(self.rejected, row)
                    yield "rejected", row
                bad.clear()
            if entry is None:
                continue
            ns = entry.nameserver_id
            if not replay:
                yield LINE, {"ns": ns, "seq": entry.seq, "ts": entry.at_ms, "op": entry.op,
                             "source": where[0], "line": where[1], "text": where[2],
                             "nodes": list(nodes_of(entry))}
                continue
            deriver = derivers.get(ns)
            if deriver is None:
                deriver = derivers[ns] = ReplayDeriver(ns, 0, end_ms=0, changes=True)
            yield from deriver.apply(entry, where)
        if finish:
            yield from self.finish()

    def finish(self) -> Iterator[Emitted]:
        """Close every name server still replayed: its open sessions end with its journal
        (``open``). O(open sessions)."""
        for ns in list(self.derivers):
            yield from self._close(ns)

    def _close(self, ns: str) -> Iterator[Emitted]:
        deriver = self.derivers.pop(ns, None)
        if deriver is None:
            return
        stats = self.reading.stats.get(ns)
        deriver.end_ms = stats.last_ms if stats is not None else 0
        yield from deriver.finish()
        if deriver.rejected:
            self.rejected[ns] = self.rejected.get(ns, 0) + deriver.rejected


def gap_messages(stats: Iterable[NsStats]) -> list[str]:
    """One sentence per name server with gaps in its accepted sequence numbers (for
    `RejectedRecords`). O(name servers)."""
    return [f"{s.ns}: {s.gaps} gap(s), the first after seq {s.first_gap[0]} (next "
            f"{s.first_gap[1]}: seq {s.first_gap[0] + 1}..{s.first_gap[1] - 1} missing)"
            for s in sorted(stats, key=lambda s: s.ns) if s.gaps and s.first_gap]
