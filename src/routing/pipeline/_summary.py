"""The printed summary: a few numbers per table, the same from Spark or from the reference.

`summarize_rows` builds a `Summary` from the rows the summary and the report use (the
tables with one row per session, window, expiry, route change or name server; ``rejected``
only counted by reason and file; nothing with one row per journal line: ``_schema``'s
`SUMMARY_COLUMNS`), which both engines return (`analyze_local_to`,
`Analysis.summary_rows`), so they share one implementation. Incidents (``_incidents.py``)
are computed from those rows; availability over a topic's life is the ``availability``
table itself (``_availability.py``, computed by the sweep). `render_summary` prints the
summary with rich (imported only there); `summary_json` is every number it prints, for
``--summary-json``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from ._availability import rank_availability
from ._incidents import DEFAULT_INCIDENT_GAP_MS, find_incidents, wall_time
from ._schema import Row, reason_key

__all__ = ["Summary", "format_ms", "format_time", "plural", "render_summary",
           "summarize_analysis", "summarize_rows", "summary_json"]

_TOP = 10


@attrs.frozen(kw_only=True)
class Summary:
    """What `render_summary` prints, built by `summarize_rows`. Times in ms. A frozen
    value: O(1) to read; `worst_incidents` sorts the incidents, O(n log n)."""

    name_servers: tuple[Row, ...]
    sessions_by_reason: Mapping[str, int]
    expiry_latencies_ms: tuple[int, ...]
    expiry_overdue_ms: tuple[int, ...]
    route_changes: int
    topics: int
    disagreement_intervals: int
    #: the sum of every topic's disagreement time: NOT wall time (kept for the JSON only)
    disagreement_topic_sum_ms: int
    #: the union of the disagreement windows: wall time during which some topic differed
    disagreement_wall_ms: int
    #: the span every journal covers (where disagreement is measured)
    common_span_ms: int
    disagreement_topics: int
    incidents: tuple[Row, ...]
    incident_gap_ms: int
    lowest_availability: tuple[Row, ...]
    deleted_topics: int
    rejected_by_reason: Mapping[str, int]
    rejected_total: int
    rejected_by_file: tuple[Row, ...] = ()
    routes_at: tuple[Row, ...] = ()
    #: every row of the ``availability`` table (the JSON has them all)
    availability_life: tuple[Row, ...] = ()

    @property
    def records(self) -> int:
        return sum(int(r["records"]) for r in self.name_servers)

    @property
    def worst_incidents(self) -> tuple[Row, ...]:
        """The longest incidents, longest first."""
        return tuple(sorted(self.incidents, key=lambda r: (-r["duration_ms"], r["start_ms"]))
                     [:_TOP])


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 name server``, ``2 name servers``, ``1,024 entries`` (with ``many``). O(1).

    >>> plural(1, "name server"), plural(3, "name server"), plural(0, "entry", "entries")
    ('1 name server', '3 name servers', '0 entries')
    """
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def summarize_rows(tables: Mapping[str, Sequence[Row]], *,
                   gap_ms: int = DEFAULT_INCIDENT_GAP_MS) -> Summary:
    """A `Summary` of output rows (`analyze_local`'s tables, or the summary rows of
    `analyze_local_to` and `Analysis.summary_rows`).

    ``rejected`` may be replaced by ``rejected_groups`` (``source, reason, lines``: the
    rejected lines counted by file and `reason_key`); ``gap_ms`` merges disagreement
    windows into incidents (``_incidents.py``). O(n log n) in those rows (one per session,
    expiry, window and route change; none per journal line): 0.02–0.13 s for the demo."""
    dis = tables["disagreement"]
    servers = tables["name_servers"]
    w0 = max((r["first_ms"] for r in servers), default=0)
    w1 = min((r["last_ms"] for r in servers), default=0)
    groups = tables.get("rejected_groups")
    if groups is None:
        counted = Counter((r["source"], reason_key(r["reason"])) for r in tables["rejected"])
        groups = [{"source": f, "reason": k, "lines": n} for (f, k), n in counted.items()]
    by_reason: Counter[str] = Counter()
    for g in groups:
        by_reason[g["reason"]] += int(g["lines"])
    life = sorted(tables["availability"], key=lambda r: (r["topic"], r["ns"]))
    return Summary(
        name_servers=tuple(servers),
        sessions_by_reason=dict(sorted(Counter(r["end_reason"] for r in
                                               tables["sessions"]).items())),
        expiry_latencies_ms=tuple(sorted(r["latency_ms"] for r in tables["expiries"])),
        expiry_overdue_ms=tuple(sorted(r["overdue_ms"] for r in tables["expiries"]
                                       if r["overdue_ms"] is not None)),
        route_changes=len(tables["route_changes"]),
        topics=len({r["topic"] for r in tables["route_changes"]}),
        disagreement_intervals=len(dis),
        disagreement_topic_sum_ms=sum(r["duration_ms"] for r in dis),
        disagreement_wall_ms=wall_time((r["start_ms"], r["end_ms"]) for r in dis),
        common_span_ms=max(0, w1 - w0) if len(servers) > 1 else 0,
        disagreement_topics=len({r["topic"] for r in dis}),
        incidents=tuple(find_incidents(dis, tables["sessions"],
                                       servers=[r["ns"] for r in servers], gap_ms=gap_ms)),
        incident_gap_ms=gap_ms,
        lowest_availability=tuple(rank_availability(life, _TOP)),
        deleted_topics=len({r["topic"] for r in life if r["deletions"]}),
        rejected_by_reason=dict(by_reason.most_common(_TOP)),
        rejected_total=sum(by_reason.values()),
        rejected_by_file=tuple(sorted(groups, key=lambda g: (-int(g["lines"]), g["source"],
                                                             g["reason"]))),
        routes_at=_routes_at(tables.get("routes_at", ())),
        availability_life=tuple(life),
    )


def _routes_at(rows: Iterable[Row]) -> tuple[Row, ...]:
    """Per (time, topic): how many name servers had a route, how many different answers,
    the groups and writable queues of the most common answer. Topics whose name servers
    differed come first."""
    by_key: dict[tuple[int, str], list[Row]] = {}
    for r in rows:
        by_key.setdefault((r["at_ms"], r["topic"]), []).append(r)
    out = []
    for (at, topic), rs in by_key.items():
        counts = Counter(r["digest"] for r in rs)
        top = max(counts.values())
        modal = min((d for d, n in counts.items() if n == top), key=lambda d: d or "")
        example = next(r for r in rs if r["digest"] == modal)
        out.append({"at_ms": at, "topic": topic, "servers": len(rs),
                    "present": sum(1 for r in rs if r["present"]), "answers": len(counts),
                    "groups": list(example["groups"]),
                    "writable_queue_count": example["writable_queue_count"]})
    out.sort(key=lambda r: (r["at_ms"], -r["answers"], r["topic"]))
    return tuple(out)


def summarize_analysis(analysis: Any, *, gap_ms: int = DEFAULT_INCIDENT_GAP_MS) -> Summary:
    """A `Summary` of a Spark `Analysis`: `summarize_rows` of `Analysis.summary_rows`
    (which fetches O(sessions + windows + route changes) rows)."""
    return summarize_rows(analysis.summary_rows(), gap_ms=gap_ms)


# --------------------------------------------------------------------------- formatting


def format_ms(ms: int | None) -> str:
    """A duration: ``850 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``."""
    if ms is None:
        return "-"
    if abs(ms) < 1_000:
        return f"{ms} ms"
    if abs(ms) < 60_000:
        return f"{ms / 1000:.1f} s"
    s = ms // 1000
    if abs(ms) < 3_600_000:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def format_time(ms: int | None, *, millis: bool = True) -> str:
    """An instant: UTC date-time for epoch times, ``T+h:mm:ss.mmm`` for small (simulated)
    clocks; ``millis=False`` drops the milliseconds (the printed tables)."""
    if ms is None:
        return "-"
    if ms >= 946_684_800_000:  # 2000-01-01: a wall-clock epoch
        text = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime(
            "%Y-%m-%d %H:%M:%S.%f")[:-3]
        return text if millis else text[:-4]
    s, milli = divmod(ms, 1000)
    return f"T+{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" + (
        f".{milli:03d}" if millis else "")


def _pct(values: Sequence[int], p: float) -> int | None:
    """Nearest-rank percentile of sorted ``values``."""
    if not values:
        return None
    rank = max(1, min(len(values), math.ceil(p * len(values))))
    return values[rank - 1]


def _expiry_stats(values: Sequence[int]) -> dict[str, int | None]:
    return {"min": values[0] if values else None, "median": _pct(values, 0.5),
            "p95": _pct(values, 0.95), "max": values[-1] if values else None}


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def summary_json(summary: Summary) -> dict[str, Any]:
    """Every number `render_summary` prints (and the incidents in full), as plain JSON
    values. Times and durations are ms; shares are fractions of 1. O(rows of the
    summary)."""
    span = [(r["first_ms"], r["last_ms"]) for r in summary.name_servers]
    return {
        "name_servers": [dict(r) for r in summary.name_servers],
        "records": summary.records,
        "journal_span_ms": (max(b for _a, b in span) - min(a for a, _b in span)) if span else 0,
        "sessions": {"total": sum(summary.sessions_by_reason.values()),
                     "by_end_reason": dict(summary.sessions_by_reason)},
        "expiries": {"count": len(summary.expiry_latencies_ms),
                     "latency_ms": _expiry_stats(summary.expiry_latencies_ms),
                     "past_deadline_ms": _expiry_stats(summary.expiry_overdue_ms)},
        "route_changes": summary.route_changes,
        "topics": summary.topics,
        "disagreement": {
            "windows": summary.disagreement_intervals,
            "topics": summary.disagreement_topics,
            "wall_ms": summary.disagreement_wall_ms,
            "common_span_ms": summary.common_span_ms,
            "share_of_common_span": _share(summary.disagreement_wall_ms,
                                           summary.common_span_ms),
            "sum_over_topics_ms": summary.disagreement_topic_sum_ms,
            "incident_gap_ms": summary.incident_gap_ms,
            "incidents": len(summary.incidents),
            "incidents_by_kind": dict(sorted(Counter(
                i["kind"] for i in summary.incidents).items())),
        },
        "incidents": [dict(i) for i in summary.incidents],
        "worst_incidents": [i["id"] for i in summary.worst_incidents],
        "lowest_availability": [dict(r) for r in summary.lowest_availability],
        "topics_deleted_on_purpose": summary.deleted_topics,
        "availability_over_life": [dict(r) for r in summary.availability_life],
        "routes_at": [dict(r) for r in summary.routes_at],
        "rejected": {"total": summary.rejected_total,
                     "by_reason": dict(summary.rejected_by_reason),
                     "by_file": [dict(g) for g in summary.rejected_by_file]},
    }


def _brokers(names: Sequence[str], shown: int = 2) -> str:
    more = len(names) - shown
    return "; ".join(names[:shown]) + (f" +{more} more" if more > 0 else "") or "-"


def render_summary(summary: Summary, console: Any = None, *,
                   title: str = "routing analyze") -> None:
    """Print the summary as rich tables on ``console`` (a new one by default). Cells fold
    instead of being cut: names are never shortened; when the console is not a terminal,
    give it a width wide enough for the longest row (the CLI does). O(rows shown): at
    most ten a table (all the name servers)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console()

    def table(heading: str, *columns: str, right: Iterable[str] = ()) -> Any:
        # the heading is printed as its own line (a title would wrap to the table's width)
        t = Table(caption=heading)
        for col in columns:
            t.add_column(col, justify="right" if col in set(right) else "left",
                         overflow="fold")
        return t

    def show(t: Any) -> None:
        heading, t.caption = t.caption, None
        console.print(Text(heading, style="italic"))
        console.print(t)

    span = [(r["first_ms"], r["last_ms"]) for r in summary.name_servers]
    length = max((b for _a, b in span), default=0) - min((a for a, _b in span), default=0)
    heading = (f"[bold]{title}[/bold]: {plural(len(summary.name_servers), 'name server')}, "
               f"{plural(summary.records, 'record')} over {format_ms(length)}")
    if console.is_terminal:
        console.rule(heading)
    else:
        console.print(heading)

    ns = table("Name servers", "name server", "from", "to", "records", "restarts",
               "seq gaps", "rejected", right=("records", "restarts", "seq gaps", "rejected"))
    for r in summary.name_servers:
        ns.add_row(r["ns"], format_time(r["first_ms"], millis=False),
                   format_time(r["last_ms"], millis=False),
                   f"{r['records']:,}", str(r["restarts"]), str(r["gaps"]),
                   f"{r['rejected']:,}")
    show(ns)

    sessions = table("Broker sessions by how they ended", "end reason", "sessions",
                     right=("sessions",))
    for reason, n in summary.sessions_by_reason.items():
        sessions.add_row(reason, f"{n:,}")
    sessions.add_row("total", f"{sum(summary.sessions_by_reason.values()):,}", style="bold")
    show(sessions)

    lat, over = summary.expiry_latencies_ms, summary.expiry_overdue_ms
    exp = table(f"Expiries: {len(lat):,} (last heartbeat → detecting scan)",
                "", "min", "median", "p95", "max", right=("min", "median", "p95", "max"))
    for name, values in (("latency", lat), ("past the deadline", over)):
        exp.add_row(name, *(format_ms(v) for v in _expiry_stats(values).values()))
    show(exp)

    n_inc = len(summary.incidents)
    span_note = (f" ({100 * summary.disagreement_wall_ms / summary.common_span_ms:.1f} % of "
                 f"the {format_ms(summary.common_span_ms)} all journals cover)"
                 if summary.common_span_ms else "")
    dis = table(f"Worst disagreement incidents ({plural(n_inc, 'incident')}, "
                f"{format_ms(summary.disagreement_wall_ms)} of wall time{span_note}; "
                f"{plural(summary.disagreement_intervals, 'window')} over "
                f"{plural(summary.disagreement_topics, 'topic')}, merged when less than "
                f"{format_ms(summary.incident_gap_ms)} apart)",
                "#", "from", "to", "length", "cause", "name servers", "brokers", "topics",
                right=("#", "length", "topics"))
    for r in summary.worst_incidents:
        dis.add_row(str(r["id"]), format_time(r["start_ms"], millis=False),
                    format_time(r["end_ms"], millis=False),
                    format_ms(r["duration_ms"]) + (" (open)" if r["open_at_end"] else ""),
                    r["cause"], ", ".join(r["name_servers"]), _brokers(r["brokers"]),
                    f"{r['topics']:,}")
    show(dis)

    deleted = (f"; {plural(summary.deleted_topics, 'topic')} deleted on purpose, not "
               f"counted from a deletion until created again" if summary.deleted_topics
               else "")
    av = table(f"Lowest availability over each topic's life (share of its life with a "
               f"writable queue{deleted})", "topic", "name server", "writable", "outages",
               "longest outage", "life", right=("writable", "outages", "longest outage",
                                                "life"))
    for r in summary.lowest_availability:
        av.add_row(r["topic"], r["ns"], f"{100 * r['share']:.3f} %", str(r["outages"]),
                   format_ms(r["longest_outage_ms"]), format_ms(r["life_ms"]))
    if not summary.lowest_availability:
        av.add_row("(no outage)", "", "", "", "", "")
    show(av)

    if summary.routes_at:
        differing = sum(1 for r in summary.routes_at if r["answers"] > 1)
        at = table(f"Routes at the requested times "
                   f"({plural(len(summary.routes_at), 'topic answer')}, {differing:,} "
                   f"differing between name servers; all in the routes_at table)",
                   "at", "topic", "with a route", "answers", "groups", "writable queues",
                   right=("answers", "writable queues"))
        for r in summary.routes_at[:_TOP]:
            groups = r["groups"]
            shown = (", ".join(groups) if len(groups) <= 3
                     else f"{len(groups)} groups ({groups[0]} … {groups[-1]})")
            at.add_row(format_time(r["at_ms"], millis=False), r["topic"],
                       f"{r['present']}/{r['servers']}",
                       str(r["answers"]), shown or "(no route)", str(r["writable_queue_count"]))
        show(at)

    if summary.rejected_total:
        rej = table(f"Rejected lines: {summary.rejected_total:,} (see the rejected table for "
                    f"file and line)", "reason", "lines", right=("lines",))
        for reason, n in summary.rejected_by_reason.items():
            rej.add_row(reason, f"{n:,}")
        show(rej)
    else:
        console.print("Rejected lines: none")
