"""The printed summary: a few numbers per table, the same from Spark or from the reference.

`summarize_rows` builds a `Summary` from the reference's rows, `summarize_analysis` from a
Spark `Analysis` (small aggregations and ``limit`` queries, nothing proportional to the
journal is collected). `render` prints it with rich (imported only there).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

__all__ = ["Summary", "format_ms", "format_time", "render", "summarize_analysis",
           "summarize_rows"]

Row = dict[str, Any]
_TOP = 10


@attrs.frozen(kw_only=True)
class Summary:
    """What `render` prints. Times in ms."""

    name_servers: tuple[Row, ...]
    sessions_by_reason: Mapping[str, int]
    expiry_latencies_ms: tuple[int, ...]
    expiry_overdue_ms: tuple[int, ...]
    route_changes: int
    topics: int
    disagreement_intervals: int
    disagreement_total_ms: int
    worst_disagreement: tuple[Row, ...]
    lowest_availability: tuple[Row, ...]
    rejected_by_reason: Mapping[str, int]
    rejected_total: int
    routes_at: tuple[Row, ...] = ()

    @property
    def records(self) -> int:
        return sum(int(r["records"]) for r in self.name_servers)


def _reason_key(reason: str) -> str:
    """Group rejection reasons by their first clause (numbers and names vary)."""
    return reason.split(":")[0][:80]


def summarize_rows(tables: Mapping[str, Sequence[Row]]) -> Summary:
    """A `Summary` of `analyze_local`'s tables."""
    dis = tables["disagreement"]
    return Summary(
        name_servers=tuple(tables["name_servers"]),
        sessions_by_reason=dict(sorted(Counter(r["end_reason"] for r in
                                               tables["sessions"]).items())),
        expiry_latencies_ms=tuple(sorted(r["latency_ms"] for r in tables["expiries"])),
        expiry_overdue_ms=tuple(sorted(r["overdue_ms"] for r in tables["expiries"]
                                       if r["overdue_ms"] is not None)),
        route_changes=len(tables["route_changes"]),
        topics=len({r["topic"] for r in tables["route_changes"]}),
        disagreement_intervals=len(dis),
        disagreement_total_ms=sum(r["duration_ms"] for r in dis),
        worst_disagreement=_windows(dis),
        lowest_availability=tuple(sorted(
            (r for r in tables["availability"] if r["share"] is not None),
            key=lambda r: (r["share"], r["topic"], r["ns"]))[:_TOP]),
        rejected_by_reason=dict(Counter(_reason_key(r["reason"])
                                        for r in tables["rejected"]).most_common(_TOP)),
        rejected_total=len(tables["rejected"]),
        routes_at=_routes_at(tables.get("routes_at", ())),
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


def _windows(rows: Sequence[Row]) -> tuple[Row, ...]:
    """Disagreement intervals with the same span and the same name servers out of step,
    grouped (a name-server restart makes every topic disagree at once), worst first."""
    groups: dict[tuple[int, int, tuple[str, ...]], list[Row]] = {}
    for r in rows:
        groups.setdefault((r["start_ms"], r["end_ms"], tuple(r["out_of_step"])), []).append(r)
    windows = [{"start_ms": a, "end_ms": b, "out_of_step": list(out),
                "duration_ms": b - a, "open_at_end": any(r["open_at_end"] for r in rs),
                "variants": max(r["variants"] for r in rs), "topics": len(rs),
                "sample": sorted(r["topic"] for r in rs)[:3]}
               for (a, b, out), rs in groups.items()]
    windows.sort(key=lambda w: (-w["duration_ms"], w["start_ms"], -w["topics"],
                                w["out_of_step"]))
    return tuple(windows[:_TOP])


def summarize_analysis(analysis: Any) -> Summary:
    """A `Summary` of a Spark `Analysis` (equal to `summarize_rows` of its rows)."""
    from pyspark.sql import functions as F

    t = analysis.tables

    def dicts(df: Any) -> tuple[Row, ...]:
        return tuple(r.asDict(recursive=True) for r in df.collect())

    reasons = {r["end_reason"]: int(r["count"])
               for r in t["sessions"].groupBy("end_reason").count().collect()}
    exp = t["expiries"].select("latency_ms", "overdue_ms").collect()
    dis = t["disagreement"].agg(F.count("*").alias("n"),
                                F.sum("duration_ms").alias("total")).first()
    rc = t["route_changes"].agg(F.count("*").alias("n"),
                                F.countDistinct("topic").alias("topics")).first()
    rejected = [r["reason"] for r in t["rejected"].select("reason").limit(100_000).collect()]
    total_rejected = t["rejected"].count()
    return Summary(
        name_servers=dicts(t["name_servers"].orderBy("ns")),
        sessions_by_reason=dict(sorted(reasons.items())),
        expiry_latencies_ms=tuple(sorted(int(r["latency_ms"]) for r in exp)),
        expiry_overdue_ms=tuple(sorted(int(r["overdue_ms"]) for r in exp
                                       if r["overdue_ms"] is not None)),
        route_changes=int(rc["n"]),
        topics=int(rc["topics"]),
        disagreement_intervals=int(dis["n"]),
        disagreement_total_ms=int(dis["total"] or 0),
        worst_disagreement=dicts(
            t["disagreement"].groupBy("start_ms", "end_ms", "out_of_step")
            .agg(F.first("duration_ms").alias("duration_ms"),
                 F.max("open_at_end").alias("open_at_end"), F.max("variants").alias("variants"),
                 F.count("*").alias("topics"),
                 F.slice(F.sort_array(F.collect_list("topic")), 1, 3).alias("sample"))
            .orderBy(F.desc("duration_ms"), "start_ms", F.desc("topics"), "out_of_step")
            .limit(_TOP)),
        lowest_availability=dicts(t["availability"].filter(F.col("share").isNotNull())
                                  .orderBy("share", "topic", "ns").limit(_TOP)),
        rejected_by_reason=dict(Counter(_reason_key(r) for r in rejected).most_common(_TOP)),
        rejected_total=int(total_rejected),
        routes_at=_routes_at(dicts(t["routes_at"].select(
            "at_ms", "topic", "ns", "present", "groups", "writable_queue_count", "digest")
            .limit(500_000))),
    )


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


def render(summary: Summary, console: Any = None, *, title: str = "routing analyze") -> None:
    """Print the summary as rich tables on ``console`` (a new one by default)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    span = [(r["first_ms"], r["last_ms"]) for r in summary.name_servers]
    length = max((b for _a, b in span), default=0) - min((a for a, _b in span), default=0)
    console.rule(f"[bold]{title}[/bold]: {len(summary.name_servers)} name servers, "
                 f"{summary.records:,} records over {format_ms(length)}")

    ns = Table(title="Name servers", title_justify="left")
    for col in ("name server", "from", "to", "records", "restarts", "seq gaps", "rejected"):
        ns.add_column(col, justify="left" if col in ("name server", "from", "to") else "right")
    for r in summary.name_servers:
        ns.add_row(r["ns"], format_time(r["first_ms"], millis=False),
                   format_time(r["last_ms"], millis=False),
                   f"{r['records']:,}", str(r["restarts"]), str(r["gaps"]),
                   f"{r['rejected']:,}")
    console.print(ns)

    sessions = Table(title="Broker sessions by how they ended", title_justify="left")
    sessions.add_column("end reason")
    sessions.add_column("sessions", justify="right")
    for reason, n in summary.sessions_by_reason.items():
        sessions.add_row(reason, f"{n:,}")
    sessions.add_row("[bold]total[/bold]", f"[bold]{sum(summary.sessions_by_reason.values()):,}")
    console.print(sessions)

    lat, over = summary.expiry_latencies_ms, summary.expiry_overdue_ms
    exp = Table(title=f"Expiries: {len(lat):,} (last heartbeat → detecting scan)",
                title_justify="left")
    for col in ("", "min", "median", "p95", "max"):
        exp.add_column(col, justify="right" if col else "left")
    exp.add_row("latency", *(format_ms(v) for v in (lat[0] if lat else None, _pct(lat, 0.5),
                                                     _pct(lat, 0.95), lat[-1] if lat else None)))
    exp.add_row("past the deadline", *(format_ms(v) for v in (
        over[0] if over else None, _pct(over, 0.5), _pct(over, 0.95),
        over[-1] if over else None)))
    console.print(exp)

    dis = Table(title=f"Worst disagreement windows ({summary.disagreement_intervals:,} "
                      f"intervals, {format_ms(summary.disagreement_total_ms)} in total over "
                      f"{summary.topics:,} topics)", title_justify="left")
    for col in ("from", "to", "duration", "out of step", "topics", "answers"):
        dis.add_column(col, justify="right" if col in ("duration", "answers") else "left")
    for r in summary.worst_disagreement:
        more = r["topics"] - len(r["sample"])
        topics = ", ".join(r["sample"]) + (f" +{more}" if more > 0 else "")
        dis.add_row(format_time(r["start_ms"], millis=False),
                    format_time(r["end_ms"], millis=False),
                    format_ms(r["duration_ms"]) + (" (open)" if r["open_at_end"] else ""),
                    ", ".join(r["out_of_step"]), topics, str(r["variants"]))
    console.print(dis)

    av = Table(title="Lowest availability (share of time with a writable queue)",
               title_justify="left")
    for col in ("topic", "name server", "writable", "outages", "window"):
        av.add_column(col, justify="left" if col in ("topic", "name server") else "right")
    for r in summary.lowest_availability:
        av.add_row(r["topic"], r["ns"], f"{100 * r['share']:.3f} %", str(r["outages"]),
                   format_ms(r["window_ms"]))
    console.print(av)

    if summary.routes_at:
        differing = sum(1 for r in summary.routes_at if r["answers"] > 1)
        at = Table(title=f"Routes at the requested times ({len(summary.routes_at):,} topic "
                         f"answers, {differing:,} differing between name servers; all in the "
                         f"routes_at table)", title_justify="left")
        for col in ("at", "topic", "with a route", "answers", "groups", "writable queues"):
            at.add_column(col, justify="right" if col in ("answers", "writable queues")
                          else "left")
        for r in summary.routes_at[:_TOP]:
            groups = r["groups"]
            shown = (", ".join(groups) if len(groups) <= 3
                     else f"{len(groups)} groups ({groups[0]} … {groups[-1]})")
            at.add_row(format_time(r["at_ms"], millis=False), r["topic"],
                       f"{r['present']}/{r['servers']}",
                       str(r["answers"]), shown or "(no route)", str(r["writable_queue_count"]))
        console.print(at)

    if summary.rejected_total:
        rej = Table(title=f"Rejected lines: {summary.rejected_total:,} (see the rejected "
                          f"table for file and line)", title_justify="left")
        rej.add_column("reason")
        rej.add_column("lines", justify="right")
        for reason, n in summary.rejected_by_reason.items():
            rej.add_row(reason, f"{n:,}")
        console.print(rej)
    else:
        console.print("Rejected lines: none")
