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
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

from ._answers import Change, Contribution, answer_of_change
from ._availability import session_removals
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
from ._store import TableStore
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
    journal (``docs/performance.md``); memory: the rows (compact until the end, see
    ``_store.py``), plus one manager per name server while it is replayed.
    """
    return _analyze_into(TableStore(), sources, at=at, strict=strict).tables()


def analyze_local_to(out_dir: str | os.PathLike[str], sources: Sources, *,
                     at: Sequence[int] = (), strict: bool = False,
                     before_writing: Callable[[], object] | None = None
                     ) -> dict[str, list[Row]]:
    """`analyze_local`, writing every table as Parquet into ``out_dir`` (one
    ``<table>/part-00000.parquet`` each, the rows of `analyze_local`) from compact rows,
    table by table, instead of returning them: what ``routing analyze --local`` runs.
    Returns only the rows the summary and the report use (`SUMMARY_COLUMNS`, plus
    ``rejected_groups``: rejected lines counted by file and reason), the shape
    `Analysis.summary_rows` gives for Spark. ``before_writing`` is called once the analysis
    is done (the CLI's progress step). Cost: `analyze_local`'s, plus O(rows) to write;
    memory: the compact rows, released table by table as they are written."""
    store = _analyze_into(TableStore(), sources, at=at, strict=strict)
    if before_writing is not None:
        before_writing()
    return store.write(Path(out_dir))


_SWEEP_ORDER = itemgetter(0, 1, 2)  # of a `Change`: (at_ms, ns, seq)


def _analyze_into(out: TableStore, sources: Sources, *, at: Sequence[int],
                  strict: bool) -> TableStore:
    """Read, replay and sweep ``sources`` into ``out`` (see `analyze_local`)."""
    notes: list[Row] = []  # whole files skipped, empty or cut short
    loop = ReadReplay()
    changes: dict[str, list[Change]] = {}  # by topic, for the sweep
    groups: dict[tuple[str, ...], tuple[str, ...]] = {}  # one tuple per distinct group list
    rejected: list[Row] = []  # also kept as dicts: --strict
    intern = out.intern
    for table, row in loop.run(lines_of(sources, notes)):  # read and replay
        out.add(table, row)
        if table == "route_changes":  # the sweep keeps its answer, not its route text
            names = tuple(row["groups"])
            answer = answer_of_change(row, groups=groups.setdefault(names, names))
            changes.setdefault(intern(row["topic"]), []).append((
                row["at_ms"], intern(row["ns"]), row["seq"], answer))
        elif table == "rejected":
            rejected.append(row)
    out.extend("rejected", notes)
    rejected.extend(notes)
    stats = loop.reading.stats
    sweep_into(out, changes, {ns: (s.first_ms, s.last_ms) for ns, s in stats.items()}, at)
    out.extend("name_servers", name_server_rows(stats.values(), loop.rejected))
    if strict:
        check_strict(rejected, stats.values())
    return out


def sweep_into(out: TableStore, changes: dict[str, list[Change]],
               spans: Mapping[str, tuple[int, int]], at: Sequence[int]) -> None:
    """The sweep stage: each topic's ``changes`` (emptied as they are swept) into ``out``'s
    ``routes_at``, ``disagreement``, ``disagreement_totals`` and ``availability``, with
    ``out``'s ``sessions`` telling removals from deletions. O(changes log changes)."""
    removals = session_removals(out.dicts("sessions"))
    for topic in sorted(changes):
        items = changes.pop(topic)  # swept, then released
        items.sort(key=_SWEEP_ORDER)  # (at_ms, ns, seq): one change per record and topic
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
