"""Incidents, not rows: the ``disagreement`` windows of all topics merged in wall time, each
with the brokers and name servers involved and its cause when the journals show it.

Everything here works on finished output rows (``disagreement``, ``sessions``), so Spark and
the reference share it: a run collects those two tables (one row per window and per
session, not per journal line) and calls `find_incidents`.

* Windows that overlap, touch, or lie within ``gap_ms`` of each other (any topics) form one
  incident: ``start_ms`` = the first window's start, ``end_ms`` = the latest end, and
  ``duration_ms`` its length in wall time. Incidents never overlap, so their durations add up
  to at most the wall time of the journals.
* `wall_time` is the length of the union of the windows (the time during which at least
  one topic was answered differently): the honest total, never a sum over topics.
* The cause comes from the ``sessions`` table: which broker sessions began or ended, on
  which name servers, inside the incident (see `classify`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from ._schema import Row

__all__ = ["DEFAULT_INCIDENT_GAP_MS", "classify", "find_incidents", "merge_windows", "union",
           "wall_time"]


#: Windows closer than this are one incident: one name-server scan interval (5 s), the time
#: within which the name servers normally catch up with each other. A constant (ms).
DEFAULT_INCIDENT_GAP_MS = 5_000


def union(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of half-open intervals ``[a, b)`` as sorted, disjoint, non-touching spans."""
    return merge_windows(intervals, gap_ms=0)


def merge_windows(intervals: Iterable[tuple[int, int]], *,
                  gap_ms: int) -> list[tuple[int, int]]:
    """Spans that overlap, touch or are at most ``gap_ms`` apart merged; sorted."""
    merged: list[list[int]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1] + gap_ms:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def wall_time(intervals: Iterable[tuple[int, int]]) -> int:
    """Length of the union of the intervals (ms)."""
    return sum(b - a for a, b in union(intervals))


def _broker_label(row: Row) -> str:
    return f"{row['broker_name']} #{row['broker_id']} {row['broker_addr']}"


def _events(sessions: Sequence[Row]) -> list[tuple[int, str, str, str, str]]:
    """(at_ms, kind, ns, broker address, broker label) of every session start ("registered")
    and end (its end reason; 'open' is the end of the journal, not an event), sorted."""
    out = []
    for s in sessions:
        label = _broker_label(s)
        out.append((s["start_ms"], "registered", s["ns"], s["broker_addr"], label))
        if s["end_reason"] != "open":
            out.append((s["end_ms"], s["end_reason"], s["ns"], s["broker_addr"], label))
    out.sort()
    return out


def classify(events: Sequence[tuple[int, str, str, str, str]],
             servers: Sequence[str]) -> tuple[str, list[str]]:
    """(kind, causes) of an incident from the session events inside it.

    Kinds, most telling first: ``restart`` (a name server restarted: its tables emptied),
    ``expired-on-some`` (a broker expired on some name servers only: cut off from them),
    ``lost-unregister`` (a broker unregistered from some name servers and not from the
    others, which kept it until it expired), ``channel-closed-on-some``, ``broker-down``
    (a broker removed from every name server, at different instants), ``failover`` (an
    address re-registered as another group member on some name servers), ``registration``
    (a broker became live on the name servers at different instants), or ``topic-change``
    (no broker came or went: a topic's configuration changed and reached the name servers
    at different instants)."""
    restarts = sorted({ns for _t, kind, ns, _a, _l in events if kind == "restart"})
    causes: list[str] = []
    kinds: list[str] = []
    if restarts:
        kinds.append("restart")
        causes.append(f"name-server restart: {', '.join(restarts)}")
    ends: dict[str, dict[str, str]] = {}
    starts: dict[str, set[str]] = {}
    labels: dict[str, str] = {}
    for _t, kind, ns, addr, label in events:
        labels[addr] = label
        if kind == "registered":
            starts.setdefault(addr, set()).add(ns)
        elif kind != "restart":
            ends.setdefault(addr, {}).setdefault(ns, kind)
    everyone = set(servers)
    for addr in sorted(ends):
        by_ns = ends[addr]
        where = set(by_ns)
        reasons = set(by_ns.values())
        label = labels[addr]
        on = ", ".join(sorted(where))
        if "unregistered" in reasons and (where != everyone or reasons != {"unregistered"}):
            gone = sorted(n for n, r in by_ns.items() if r == "unregistered")
            kinds.append("lost-unregister")
            causes.append(f"lost unregister: {label} unregistered on {', '.join(gone)}, "
                          f"not on {', '.join(sorted(everyone - set(gone)))}")
        elif where | set(restarts) >= everyone:
            kinds.append("broker-down")
            causes.append(f"broker down: {label} removed from every name server at different "
                          f"instants ({'/'.join(sorted(reasons)).replace('_', ' ')})")
        elif reasons == {"expired"}:
            kinds.append("expired-on-some")
            causes.append(f"{label} expired on {on} only")
        elif "channel_closed" in reasons:
            kinds.append("channel-closed-on-some")
            causes.append(f"{label} channel closed on {on} only")
        else:
            kinds.append("failover")
            causes.append(f"{label} {'/'.join(sorted(reasons))} on {on} only")
    if not kinds:
        late = sorted(a for a in starts if starts[a] != everyone)
        if starts:
            kinds.append("registration")
            shown = ", ".join(labels[a] for a in sorted(starts)[:3])
            more = f" +{len(starts) - 3}" if len(starts) > 3 else ""
            causes.append(f"registration reached the name servers at different instants: "
                          f"{shown}{more}" + (f" ({len(late)} not on every name server)"
                                              if late else ""))
        else:
            kinds.append("topic-change")
            causes.append("no broker came or went: a topic's route changed and reached the "
                          "name servers at different instants")
    return kinds[0], causes


def find_incidents(disagreement: Sequence[Row], sessions: Sequence[Row] = (), *,
                   servers: Sequence[str] = (), gap_ms: int = DEFAULT_INCIDENT_GAP_MS) -> list[Row]:
    """The incidents of a run, in time order.

    ``disagreement`` rows need ``topic, start_ms, end_ms, out_of_step, open_at_end``;
    ``sessions`` rows the broker columns, ``start_ms, end_ms, end_reason``; ``servers`` are
    every name server (default: those named in the rows). Each incident: ``id`` (1-based, in
    time order), ``start_ms, end_ms, duration_ms`` (wall time), ``disagreeing_ms`` (the part
    of it when some topic was answered differently; the rest are gaps up to ``gap_ms``),
    ``windows`` (disagreement rows merged), ``topics`` (distinct), ``sample_topics`` (first
    five), ``out_of_step`` (name servers off the majority answer in some window),
    ``name_servers`` (where its session events happened, else ``out_of_step``), ``brokers``
    (labelled ``group #id address``), ``kind``, ``cause`` (the first of ``causes``) and
    ``open_at_end``."""
    windows = sorted(disagreement, key=lambda r: (r["start_ms"], r["end_ms"], r["topic"]))
    spans = merge_windows(((r["start_ms"], r["end_ms"]) for r in windows), gap_ms=gap_ms)
    events = _events(sessions)
    times = [e[0] for e in events]
    every = sorted(set(servers) | {s["ns"] for s in sessions}
                   | {n for r in windows for n in r["out_of_step"]})
    starts = [a for a, _b in spans]
    members: list[list[Row]] = [[] for _ in spans]
    for r in windows:
        members[bisect.bisect_right(starts, r["start_ms"]) - 1].append(r)
    incidents: list[Row] = []
    for number, ((a, b), rows) in enumerate(zip(spans, members, strict=True), start=1):
        inside = events[bisect.bisect_left(times, a):bisect.bisect_right(times, b)]
        kind, causes = classify(inside, every)
        topics = sorted({r["topic"] for r in rows})
        out = sorted({n for r in rows for n in r["out_of_step"]})
        involved = sorted({e[2] for e in inside}) or out
        brokers = sorted({e[4] for e in inside if e[1] != "restart"})
        incidents.append({
            "id": number, "start_ms": a, "end_ms": b, "duration_ms": b - a,
            "disagreeing_ms": wall_time((r["start_ms"], r["end_ms"]) for r in rows),
            "windows": len(rows), "topics": len(topics), "sample_topics": topics[:5],
            "out_of_step": out, "name_servers": involved, "brokers": brokers,
            "kind": kind, "cause": causes[0], "causes": causes,
            "open_at_end": any(r["open_at_end"] for r in rows),
        })
    return incidents
