"""The reference engine: the whole analysis in one process, no Spark.

Its stages are the Spark engine's, run here one after the other: **read** every line in
reading order (``_files.lines_of``); **replay** each name server whole as it is read, with
the loop Spark's read tasks run (``_read_replay.ReadReplay``: one reader, one deriver per
name server); **sweep** each topic's route changes (``_sweep.sweep_changes``); **write**
the rows kept compact (``_store.TableStore``) as Parquet; the summary is built from the
rows `analyze_local_to` returns. The Spark engine (`routing.pipeline.analyze`) must return
the same rows; the differential tests compare them row for row.

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
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

from ._answers import Answer, Change, Contribution
from ._availability import Removals, session_removals
from ._errors import RejectedRecords
from ._files import Sources, lines_of
from ._groups import ComponentLine, component_count, components, replay_components
from ._read_replay import (
    LINE,
    NsStats,
    ReadReplay,
    gap_messages,
    name_server_rows,
    rejected_counts,
)
from ._schema import TABLES, Row, sort_rows
from ._spill import SortedRuns
from ._store import SPILL_ROWS, TableStore
from ._sweep import sweep_changes, sweep_topic

__all__ = ["analyze_local", "analyze_local_to", "analyze_partitioned", "check_strict",
           "sweep_into"]


def analyze_local(sources: Sources, *, at: Sequence[int] = (),
                  strict: bool = False) -> dict[str, list[dict[str, Any]]]:
    """Every output table as a list of rows (dicts), each sorted by the table's key: the
    reference engine, in this process, no Spark.

    ``sources``: journal paths (files or folders: JSON Lines, ``.gz``, Parquet copies),
    ``{name: lines}`` or decoded journal entries. ``at`` are the times (ms) for
    ``routes_at``. ``strict`` raises `RejectedRecords` when any line was set aside or a
    sequence number is missing. Cost: O(lines) time, about 9 µs a record on a simulator
    journal (``docs/performance.md``); memory: the returned rows, plus one manager per name
    server while it is replayed (the rows are compact and spilled to disk until the end,
    see ``_store.py``).
    """
    return _analyze_into(TableStore(), sources, at=at, strict=strict).tables()


def analyze_local_to(out_dir: str | os.PathLike[str], sources: Sources, *,
                     at: Sequence[int] = (), strict: bool = False,
                     before_writing: Callable[[], object] | None = None
                     ) -> dict[str, Sequence[Row]]:
    """`analyze_local`, writing every table as Parquet into ``out_dir`` (one
    ``<table>/part-00000.parquet`` each, the rows of `analyze_local`) from compact rows,
    table by table, instead of returning them: what ``routing analyze --local`` runs.
    Returns only the rows the summary and the report use (`SUMMARY_COLUMNS`, plus
    ``rejected_groups``: rejected lines counted by file and reason), the shape
    `Analysis.summary_rows` gives for Spark (``route_changes`` and ``routes_at`` as
    `_store.ParquetRows`: read back from their file when iterated). ``before_writing`` is
    called once the analysis is done (the CLI's progress step). Cost: `analyze_local`'s,
    plus O(rows) to write; memory O(state + bounded buffers), whatever the journal's length:
    rows past `_store.SPILL_ROWS` a table are spilled to a temporary folder in ``out_dir``
    (removed at the end) and merged as they are written."""
    out = Path(out_dir)
    existed = out.exists()
    store = TableStore(spill_dir=out)  # spills there (made on first use), not in a tmpfs /tmp
    try:
        _analyze_into(store, sources, at=at, strict=strict)
    except BaseException:  # nothing written: the spill folder, and ``out_dir`` if it is new
        store.close()
        if not existed:
            shutil.rmtree(out, ignore_errors=True)
        raise
    if before_writing is not None:
        before_writing()
    return store.write(out)


#: A route change as the sweep's spill keeps it: (topic, at_ms, ns, seq, present, digest,
#: groups, read, writable and producer-writable queue counts); sorted by its first four.
_SWEEP_ORDER = itemgetter(0, 1, 2, 3)


#: A `Change` (at_ms, ns, seq, answer) in the sweep's order.
_CHANGE_ORDER = itemgetter(0, 1, 2)


def _answer(item: tuple[Any, ...]) -> Change:
    """The sweep's `Change` of a spilled route change (its answer without route text)."""
    _topic, at, ns, seq, present, digest, groups, read, writable, producer = item
    return (at, ns, seq, Answer(present=present, since_ms=at, digest=digest, groups=groups,
                                read_queue_count=read, writable_queue_count=writable,
                                producer_writable_queue_count=producer, route_json=None))


def _analyze_into(out: TableStore, sources: Sources, *, at: Sequence[int],
                  strict: bool) -> TableStore:
    """Read, replay and sweep ``sources`` into ``out`` (see `analyze_local`). Memory
    O(state): the rows and the sweep's route changes go to ``out``'s bounded buffers and
    spill to disk (``_spill.py``); the sweep reads the changes back topic by topic."""
    notes: list[Row] = []  # whole files skipped, empty or cut short
    loop = ReadReplay()
    # the sweep's input: its answers, not their route texts, sorted by topic then time
    changes = SortedRuns(_SWEEP_ORDER, out.folder, limit=SPILL_ROWS, name="changes")
    removals: set[tuple[str, str, int]] = set()  # sessions ended before their journal
    rejected: list[Row] = []  # also kept as dicts: --strict
    intern = out.intern
    for table, row in loop.run(lines_of(sources, notes)):  # read and replay
        out.add(table, row)
        if table == "route_changes":
            changes.add((intern(row["topic"]), row["at_ms"], intern(row["ns"]), row["seq"],
                         row["present"], intern(row["digest"]), intern(row["groups"]),
                         row["read_queue_count"], row["writable_queue_count"],
                         row["producer_writable_queue_count"]))
        elif table == "sessions":
            removals.update(session_removals((row,)))
        elif table == "rejected" and strict:
            rejected.append(row)
    out.extend("rejected", notes)
    rejected.extend(notes)
    stats = loop.reading.stats
    spans = {ns: (s.first_ms, s.last_ms) for ns, s in stats.items()}
    by_topic = groupby(changes.sorted(), key=itemgetter(0))  # spilled, sorted by topic
    _sweep_topics(out, ((topic, map(_answer, items)) for topic, items in by_topic), spans,
                  at, frozenset(removals))
    out.extend("name_servers", name_server_rows(stats.values(), loop.rejected))
    if strict:
        check_strict(rejected, stats.values())
    return out


def sweep_into(out: TableStore, changes: dict[str, list[Change]],
               spans: Mapping[str, tuple[int, int]], at: Sequence[int]) -> None:
    """The sweep stage: each topic's ``changes`` (emptied as they are swept) into ``out``'s
    ``routes_at``, ``disagreement``, ``disagreement_totals`` and ``availability``, with
    ``out``'s ``sessions`` telling removals from deletions. O(changes log changes)."""
    def by_topic() -> Iterator[tuple[str, Iterable[Change]]]:
        for topic in sorted(changes):
            items = changes.pop(topic)  # swept, then released
            items.sort(key=_CHANGE_ORDER)  # (at_ms, ns, seq): one change per record, topic
            yield topic, items

    _sweep_topics(out, by_topic(), spans, at, session_removals(out.dicts("sessions")))


def _sweep_topics(out: TableStore, topics: Iterable[tuple[str, Iterable[Change]]],
                  spans: Mapping[str, tuple[int, int]], at: Sequence[int],
                  removals: Removals) -> None:
    """The sweep stage's one loop (`analyze_local`'s and the live watcher's): each topic's
    changes, in time order, through `sweep_changes` into ``out``. O(changes)."""
    for topic, items in topics:
        for table, row in sweep_changes(topic, items, spans, at, removals=removals):
            out.add(table, row)


def check_strict(rejected: Sequence[Row], stats: Iterable[NsStats] = ()) -> None:
    """Raise `RejectedRecords` if anything was rejected (but files skipped by name) or a
    sequence number is missing: the ``--strict`` rule, "no rejection and no gap".
    O(n log n) in the rejected rows."""
    failing = [r for r in rejected if r["stage"] != "skipped"]
    gaps = gap_messages(stats)
    if failing or gaps:
        raise RejectedRecords(sort_rows(TABLES["rejected"], failing), gaps=gaps)


def analyze_partitioned(sources: Mapping[str, Iterable[str]] | Sequence[str | os.PathLike[str]],
                        *, at: Sequence[int] = ()) -> dict[str, list[dict[str, Any]]]:
    """The Spark plan of ``partition="group"``, run in this process: read each name server
    (`ReadReplay` without replay), split it into the broker-group components of
    ``_groups.py`` (copying the entries that touch the whole server), replay every
    component on its own (`replay_components`, Spark's replay tasks), then sweep the route
    contributions per topic. Must equal `analyze_local`; the tests use it to check that the
    partitioning is exact on many more inputs than Spark could run. O(lines × components)."""
    notes: list[Row] = []
    loop = ReadReplay(replay=False)
    out: dict[str, list[Row]] = {name: [] for name in TABLES}
    accepted: list[Row] = []
    for table, row in loop.run(lines_of(sources, notes)):
        (accepted if table == LINE else out[table]).append(row)
    stats = loop.reading.stats
    comps = components([(r["ns"], r["nodes"]) for r in accepted] + [(ns, ()) for ns in stats])
    routed: list[ComponentLine] = []
    for r in accepted:  # a line touching no node goes to every component, the first primary
        nodes, mine = r["nodes"], comps[r["ns"]]
        parts = [mine[nodes[0]]] if nodes else range(component_count(mine))
        routed += [(r["ns"], part, bool(nodes) or part == 0, r["seq"], r["ts"], r["op"],
                    r["source"], r["line"], r["text"]) for part in parts]
    routed.sort(key=itemgetter(0, 1, 3))  # (ns, component, seq)
    spans = {ns: (s.first_ms, s.last_ms) for ns, s in stats.items()}
    contribs: dict[str, list[Contribution]] = {}
    for table, row in replay_components(routed, spans):
        if table == "contrib":
            contribs.setdefault(row["topic"], []).append(Contribution(**row))
        else:
            out[table].append(row)
    out["rejected"].extend(notes)
    removals = session_removals(out["sessions"])
    for topic in sorted(contribs):
        items = sorted(contribs[topic], key=lambda c: (c.at_ms, c.ns, c.seq, c.part))
        for table, row in sweep_topic(topic, items, spans, at, removals=removals):
            out[table].append(row)
    out["name_servers"] = name_server_rows(stats.values(), rejected_counts(out["rejected"]))
    return {name: sort_rows(TABLES[name], rows) for name, rows in out.items()}
