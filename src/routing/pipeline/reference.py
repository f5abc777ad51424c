"""The pure-Python reference: the whole analysis in one process, no Spark.

`analyze_local` reads every line with one `routing.journal.JournalReader`, replays each name
server whole with `routing.journal.Replayer`, derives the rows from the library's events
(``_outputs.py``), then runs the per-topic sweep (``_topics.py``). The Spark pipeline
(`routing.pipeline.analyze`) runs the same functions inside partitions and must return the
same rows; the differential tests compare them row for row.

>>> import io, routing as r
>>> from routing.journal import JournalRecorder
>>> clock = r.ManualClock(start_ms=0)
>>> sink = io.StringIO()
>>> ns = JournalRecorder(r.RouteInfoManager(clock=clock), sink, nameserver_id="ns-0")
>>> _ = ns.register(r.Registration(cluster="c", broker_name="b", broker_id=0,
...     broker_addr="10.0.0.1:10911", topics={t: r.TopicConfig(topic_name=t) for t in "TU"}))
>>> _ = clock.advance(125_000)
>>> _ = ns.scan_expired()
>>> tables = analyze_local({"ns-0.jsonl": sink.getvalue().splitlines()})
>>> [(s["broker_addr"], s["end_reason"], s["duration_ms"]) for s in tables["sessions"]]
[('10.0.0.1:10911', 'expired', 125000)]
>>> [(e["latency_ms"], e["overdue_ms"]) for e in tables["expiries"]]
[(125000, 5000)]
>>> [(c["topic"], c["at_ms"], c["present"], c["writable_queue_count"])
...  for c in tables["route_changes"]][:2]
[('T', 0, True, 16), ('T', 125000, False, 0)]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any, TypeAlias

from ..journal import JournalEntry, JournalHeader, JournalRecord
from ._lifetime import session_removals
from ._outputs import Emitted, ReplayDeriver, Row
from ._read import (
    NsReading,
    NsStats,
    expand_local,
    iter_lines,
    name_server_rows,
    rejected_counts,
)
from ._schema import TABLES, sort_rows
from ._store import TableStore
from ._topics import Change, Contribution, answer_of_change, sweep_changes, sweep_topic

__all__ = [
    "RejectedRecords", "Sources", "analyze_local", "analyze_local_to", "analyze_partitioned",
    "check_strict", "gap_messages", "lines_of", "strict_rows",
]

#: Journal paths (files or folders; JSON Lines, gzip or Parquet copies), in-memory journals
#: as {source name: lines}, or decoded entries (`JournalHeader`/`JournalRecord`).
Sources: TypeAlias = (
    str | os.PathLike[str] | Mapping[str, Iterable[str]]
    | Sequence[str | os.PathLike[str]] | Iterable[JournalEntry]
)


class RejectedRecords(ValueError):
    """``strict`` was asked and some lines were set aside (``total`` of them; ``rows`` are
    the first ones, all of them from the reference) or some name server's accepted
    sequence numbers have gaps (``gaps``: one sentence per name server)."""

    def __init__(self, rows: Sequence[Row], *, total: int | None = None,
                 gaps: Sequence[str] = ()) -> None:
        total = len(rows) if total is None else total
        parts = []
        if total:
            shown = "; ".join(f"{r['source']}:{r['line']}: {r['reason']}" for r in rows[:5])
            more = f" (and {total - 5} more)" if total > 5 else ""
            parts.append(f"{total} journal line(s) rejected: {shown}{more}")
        if gaps:
            parts.append("sequence gaps (lines lost): " + "; ".join(gaps))
        super().__init__(" and ".join(parts) + " (--strict)")
        self.rows = tuple(rows)
        self.total = total
        self.gaps = tuple(gaps)


def strict_rows(rejected: Iterable[Row]) -> list[Row]:
    """The rows that fail ``--strict``: every rejection except files skipped by name."""
    return [r for r in rejected if r["stage"] != "skipped"]


def gap_messages(stats: Iterable[NsStats]) -> list[str]:
    """One sentence per name server with gaps in its accepted sequence numbers."""
    return [f"{s.ns}: {s.gaps} gap(s), the first after seq {s.first_gap[0]} (next "
            f"{s.first_gap[1]}: seq {s.first_gap[0] + 1}..{s.first_gap[1] - 1} missing)"
            for s in sorted(stats, key=lambda s: s.ns) if s.gaps and s.first_gap]


def check_strict(rejected: Sequence[Row], stats: Iterable[NsStats] = ()) -> None:
    """Raise `RejectedRecords` if anything was rejected or a sequence number is missing
    (the ``--strict`` rule: "no rejection and no gap")."""
    failing = strict_rows(rejected)
    gaps = gap_messages(stats)
    if failing or gaps:
        raise RejectedRecords(sort_rows(TABLES["rejected"], failing), gaps=gaps)


def lines_of(sources: Sources, notes: list[Row] | None = None
             ) -> Iterator[tuple[str, int, str]] | list[JournalEntry]:
    """(source, line, text) in reading order, or the entries themselves when given entries.
    Rows about whole files (skipped, empty, cut short) go to ``notes``."""
    notes = notes if notes is not None else []
    if isinstance(sources, str | os.PathLike):
        return iter_lines(expand_local([sources]), notes)
    if isinstance(sources, Mapping):
        return ((name, number, text) for name, lines in sources.items()
                for number, text in enumerate(lines, start=1))
    items = list(sources)
    if all(isinstance(i, JournalHeader | JournalRecord) for i in items) and items:
        return [i for i in items if isinstance(i, JournalHeader | JournalRecord)]
    paths: list[str | os.PathLike[str]] = []
    for i in items:
        if not isinstance(i, str | os.PathLike):
            raise TypeError(f"expected journal paths, {{name: lines}} or journal entries, "
                            f"got {i!r:.80}")
        paths.append(i)
    return iter_lines(expand_local(paths), notes)


def _seen(reading: NsReading, entry: JournalEntry) -> JournalEntry:
    """Count an already decoded entry in its name server's stats."""
    stats = reading.stats.get(entry.nameserver_id)
    if stats is None and isinstance(entry, JournalHeader):
        stats = reading.stats[entry.nameserver_id] = NsStats(
            ns=entry.nameserver_id, first_ms=entry.start_ms, last_ms=entry.start_ms)
    if stats is not None:
        stats.see(entry)
    return entry


def analyze_local(sources: Sources, *, at: Sequence[int] = (),
                  strict: bool = False) -> dict[str, list[dict[str, Any]]]:
    """Every output table as a list of rows (dicts), each sorted by the table's key.

    ``at`` are the times (ms) for ``routes_at``. ``strict`` raises `RejectedRecords` when
    any line was set aside. Memory: the rows (compact until the end, see ``_store.py``),
    plus one manager per name server while it is replayed.
    """
    return _analyze_into(TableStore(), sources, at=at, strict=strict).tables()


def analyze_local_to(out_dir: str | os.PathLike[str], sources: Sources, *,
                     at: Sequence[int] = (), strict: bool = False,
                     before_writing: Callable[[], object] | None = None
                     ) -> dict[str, list[Row]]:
    """`analyze_local`, writing every table as Parquet into ``out_dir`` (the layout of
    `write_local_tables`, the same rows) from compact rows, table by table, instead of
    returning them: what ``routing analyze --local`` runs. Returns only the rows the
    summary and the report use, in the shape `_summary.collect_rows` gives for Spark
    (``route_changes`` without its JSON, ``rejected_groups`` instead of ``rejected``).
    ``before_writing`` is called once the analysis is done (the CLI's progress step)."""
    from ._summary import _COLLECTED

    store = _analyze_into(TableStore(), sources, at=at, strict=strict)
    if before_writing is not None:
        before_writing()
    return store.write(Path(out_dir), _COLLECTED)


_SWEEP_ORDER = itemgetter(0, 1, 2)  # of a `Change`: (at_ms, ns, seq)


def _analyze_into(out: TableStore, sources: Sources, *, at: Sequence[int],
                  strict: bool) -> TableStore:
    """Read, replay and sweep ``sources`` into ``out`` (see `analyze_local`)."""
    reading = NsReading()
    derivers: dict[str, ReplayDeriver] = {}
    changes: dict[str, list[Change]] = {}  # by topic, for the sweep
    groups: dict[tuple[str, ...], tuple[str, ...]] = {}  # one tuple per distinct group list
    rejected: list[Row] = []  # also kept as dicts: --strict and the name_servers counts
    intern = out.intern

    def take(rows: Iterable[Emitted]) -> None:
        for table, row in rows:
            out.add(table, row)
            if table == "route_changes":  # the sweep keeps its answer, not its route text
                names = tuple(row["groups"])
                answer = answer_of_change(row, groups=groups.setdefault(names, names))
                changes.setdefault(intern(row["topic"]), []).append((
                    row["at_ms"], intern(row["ns"]), row["seq"], answer))
            elif table == "rejected":
                rejected.append(row)

    notes: list[Row] = []
    source = lines_of(sources, notes)
    feed, steady = reading.feed, reading.steady
    entry: JournalEntry | None
    for item in source:
        if isinstance(item, tuple):  # (source name, line number, text): the common case
            where: tuple[str, int, str] = item
            hit = steady(item[2])
            if hit is not None:  # a remembered re-registration, accepted in order
                steady_deriver = derivers.get(hit[0])
                if steady_deriver is not None and steady_deriver.steady(hit[3], hit[2]):
                    continue
                entry = reading.reader.record_of(hit)
            else:
                entry = feed(item[2], item[0], item[1])
        else:
            where = ("<entries>", item.seq, "")
            entry = _seen(reading, item)
        if entry is None:
            continue
        deriver = derivers.get(entry.nameserver_id)
        if deriver is None:
            deriver = derivers[entry.nameserver_id] = ReplayDeriver(
                entry.nameserver_id, 0, end_ms=0, changes=True)
        rows = deriver.apply(entry, where)
        if rows != ():  # a steady re-registration produces nothing
            take(rows)
    for ns, deriver in derivers.items():
        stats = reading.stats.get(ns)
        deriver.end_ms = stats.last_ms if stats is not None else 0
        take(deriver.finish())
    derivers.clear()  # the managers: no longer needed
    out.extend("rejected", reading.rejected)
    out.extend("rejected", notes)
    rejected.extend(reading.rejected)
    rejected.extend(notes)
    spans = {ns: (s.first_ms, s.last_ms) for ns, s in reading.stats.items()}
    removals = session_removals(out.dicts("sessions"))
    for topic in sorted(changes):
        items = changes.pop(topic)  # swept, then released
        items.sort(key=_SWEEP_ORDER)  # (at_ms, ns, seq): one change per record and topic
        take(sweep_changes(topic, items, spans, at, removals=removals))
    out.extend("name_servers", name_server_rows(reading.stats.values(),
                                                rejected_counts(rejected)))
    if strict:
        check_strict(rejected, reading.stats.values())
    return out


def analyze_partitioned(sources: Mapping[str, Iterable[str]] | Sequence[str | os.PathLike[str]],
                        *, at: Sequence[int] = ()) -> dict[str, list[dict[str, Any]]]:
    """The Spark plan of ``partition="group"``, run in this process: read each name server,
    split it into the broker-group components of ``_plan.py`` (copying the entries that
    touch the whole server), re-read and replay every component on its own, then merge the
    route contributions per topic. Must equal `analyze_local`; the tests use it to check
    that the partitioning is exact on many more inputs than Spark could run."""
    from ..journal import JournalReader
    from ._plan import component_count, components, nodes_of, replay_entry

    reading = NsReading()
    notes: list[Row] = []
    accepted: list[tuple[JournalEntry, tuple[str, int, str], tuple[str, ...]]] = []
    for name, number, text in lines_of(sources, notes):  # type: ignore[misc]
        entry = reading.feed(text, name, number)
        if entry is not None:
            accepted.append((entry, (name, number, text), nodes_of(entry)))
    comps = components([(e.nameserver_id, nodes) for e, _w, nodes in accepted]
                       + [(ns, ()) for ns in reading.stats])
    out: dict[str, list[Row]] = {name: [] for name in TABLES}
    contribs: dict[str, list[Contribution]] = {}
    spans = {ns: (s.first_ms, s.last_ms) for ns, s in reading.stats.items()}
    for ns in sorted(comps):
        mine = sorted((x for x in accepted if x[0].nameserver_id == ns), key=lambda x: x[0].seq)
        for part in range(component_count(comps[ns])):
            reader = JournalReader()
            deriver = ReplayDeriver(ns, part, end_ms=spans[ns][1])
            emitted: list[Emitted] = []
            for entry, (name, number, text), nodes in mine:
                if nodes and comps[ns][nodes[0]] != part:
                    continue
                again = replay_entry(reader, ns, entry.seq, entry.at_ms, entry.op, name,
                                     number, text)
                emitted.extend(deriver.apply(again, (name, number, text),
                                             primary=bool(nodes) or part == 0))
            emitted.extend(deriver.finish())
            for table, row in emitted:
                if table == "contrib":
                    contribs.setdefault(row["topic"], []).append(Contribution(**row))
                else:
                    out[table].append(row)
    out["rejected"].extend(reading.rejected)
    out["rejected"].extend(notes)
    removals = session_removals(out["sessions"])
    for topic in sorted(contribs):
        items = sorted(contribs[topic], key=lambda c: (c.at_ms, c.ns, c.seq, c.part))
        out_rows = sweep_topic(topic, items, spans, at, removals=removals)
        for table, row in out_rows:
            out[table].append(row)
    out["name_servers"] = name_server_rows(reading.stats.values(),
                                           rejected_counts(out["rejected"]))
    return {name: sort_rows(TABLES[name], rows) for name, rows in out.items()}
