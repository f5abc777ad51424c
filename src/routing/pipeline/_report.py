"""The report: one self-contained, interactive HTML page (plotly, from the ``cli`` extra,
imported here only; its JavaScript is inlined, so the page needs no network).

Left, one timeline per name server: a row per broker address labelled ``group #id
address``, a green bar per session (hover: address, start, end, end reason, heartbeats,
length), a tick at its end coloured by the end reason, and the disagreement incidents as
red bands drawn over the bars. Above them, how many topics were answered differently over
time. Zoom and pan with the mouse (the panels share the time axis); double-click resets.
Right, the incidents (each links to its place on the timelines), the lowest availability
over each topic's life, expiries per broker and rejected lines by reason and file.

Built from output rows only (``Analysis.summary_rows`` for Spark), so both engines share it.

**Size and level of detail.** The page holds plotly.js once (about 4.7 MB) and a few dozen
bytes per drawn session. At most `MAX_BARS` sessions are drawn: above that, sessions of
the same broker on the same name server that are closer than a pixel at full width are
drawn as one bar (its hover says how many sessions it merges), coarsening until the budget
holds; incidents shorter than a pixel are widened to one. Tables show their worst rows
(`TABLE_ROWS`) and say how many there are. So the page stays a few MB at the demo's size
and under about 12 MB for any journal size: it grows with brokers and sessions, not with
records.
"""

from __future__ import annotations

import html
import json
import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._availability import rank_availability
from ._schema import Row
from ._summary import Summary, format_ms, format_time, plural
from ._timeline import broker_rows

__all__ = ["DISAGREE_COLOUR", "LIVE_COLOUR", "MAX_BARS", "REASON_COLOURS", "TABLE_ROWS",
           "level_of_detail", "write_report"]


#: How each session ended (the tick at its end).
REASON_COLOURS: Mapping[str, str] = {
    "expired": "#d62728", "channel_closed": "#ff7f0e", "unregistered": "#7f7f7f",
    "replaced": "#1f77b4", "restart": "#9467bd", "open": "#2ca02c",
}
LIVE_COLOUR = "#2ca02c"
DISAGREE_COLOUR = "#d62728"
#: Sessions drawn at most (see the module's doc).
MAX_BARS = 40_000
#: Rows shown per side table.
TABLE_ROWS = 50
_EPOCH_2000 = 946_684_800_000


def level_of_detail(sessions: Sequence[Row], span_ms: int,
                    budget: int = MAX_BARS) -> list[Row]:
    """The bars to draw: every session while there are at most ``budget``; else sessions of
    one broker on one name server closer than ``span_ms / 2000`` (then twice that, …) are
    merged into one bar with ``merged`` = how many sessions it stands for and the last
    one's end reason."""
    bars = [dict(r, merged=1) for r in sessions]
    gap = max(1, span_ms // 2000)
    while len(bars) > budget:
        bars.sort(key=lambda r: (r["ns"], r["broker_addr"], r["start_ms"]))
        out: list[Row] = []
        for r in bars:
            last = out[-1] if out else None
            if (last is not None and (last["ns"], last["broker_addr"]) == (r["ns"],
                                                                          r["broker_addr"])
                    and r["start_ms"] - last["end_ms"] <= gap):
                last.update(end_ms=max(last["end_ms"], r["end_ms"]),
                            end_reason=r["end_reason"], merged=last["merged"] + r["merged"],
                            heartbeats=last["heartbeats"] + r["heartbeats"])
            else:
                out.append(dict(r))
        if len(out) == len({(r["ns"], r["broker_addr"]) for r in out}):
            return out  # one bar per broker and name server: nothing left to merge
        if len(out) == len(bars):
            gap *= 4
        bars = out
        gap *= 2
    return bars


def _timeline_figure(ns: str, bars: Sequence[Row], rows: Sequence[tuple[str, str]],
                     incidents: Sequence[Row], t0: int, t1: int) -> Any:
    import plotly.graph_objects as go

    index = {addr: i for i, (addr, _label) in enumerate(rows)}
    mine = [b for b in bars if b["ns"] == ns]
    fig = go.Figure()
    custom = [[b["broker_addr"], format_time(b["start_ms"]), format_time(b["end_ms"]),
               b["end_reason"] + (f" (last of {b['merged']} sessions merged)"
                                  if b["merged"] > 1 else ""),
               b["heartbeats"], format_ms(b["end_ms"] - b["start_ms"]),
               rows[index[b["broker_addr"]]][1].split(" ")[0]] for b in mine]
    fig.add_trace(go.Bar(
        name="live", orientation="h", base=[b["start_ms"] for b in mine],
        x=[max(1, b["end_ms"] - b["start_ms"]) for b in mine],
        y=[index[b["broker_addr"]] for b in mine], customdata=custom,
        marker={"color": LIVE_COLOUR, "line": {"width": 0}}, width=0.7,
        hovertemplate=("<b>%{customdata[6]} %{customdata[0]}</b><br>start %{customdata[1]}"
                       "<br>end %{customdata[2]}<br>end reason <b>%{customdata[3]}</b>"
                       "<br>heartbeats %{customdata[4]}<br>length %{customdata[5]}"
                       f"<extra>{html.escape(ns)}</extra>"),
        showlegend=False))
    for reason, colour in REASON_COLOURS.items():
        ends = [b for b in mine if b["end_reason"] == reason and reason != "open"]
        if ends:
            fig.add_trace(go.Scatter(
                name=f"end: {reason.replace('_', ' ')}", mode="markers",
                x=[b["end_ms"] for b in ends], y=[index[b["broker_addr"]] for b in ends],
                marker={"symbol": "line-ns", "size": 11,
                        "line": {"color": colour, "width": 3}},
                hoverinfo="skip", legendgroup=reason, showlegend=False))
    minimum = max(1, (t1 - t0) // 1500)
    height = 70 + max(4, len(rows)) * (16 if len(rows) <= 120 else 12)
    strip = 6 / (height - 64)  # a 6 px solid red strip above the rows
    shapes = []
    for i in incidents:
        x0, x1 = i["start_ms"], max(i["end_ms"], i["start_ms"] + minimum)
        # over the bars (translucent: it tints the green), and solid red above them
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "layer": "above",
                       "x0": x0, "x1": x1, "y0": 0, "y1": 1, "fillcolor": DISAGREE_COLOUR,
                       "opacity": 0.4, "line": {"width": 1, "color": DISAGREE_COLOUR},
                       "name": f"incident-{i['id']}"})
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "layer": "above",
                       "x0": x0, "x1": x1, "y0": 1, "y1": 1 + strip,
                       "fillcolor": DISAGREE_COLOUR, "line": {"width": 0}})
    fig.update_layout(
        height=height, margin={"l": 10, "r": 10, "t": 34, "b": 36}, bargap=0.3,
        title={"text": f"name server <b>{html.escape(ns)}</b>", "x": 0, "font":
               {"size": 14}}, shapes=shapes, plot_bgcolor="white", hovermode="closest",
        dragmode="zoom", showlegend=False)
    fig.update_yaxes(tickvals=list(range(len(rows))), ticktext=[label for _a, label in rows],
                     range=[len(rows) - 0.5, -0.5], automargin=True, showgrid=False,
                     tickfont={"size": 11 if len(rows) <= 120 else 9, "family": "monospace"},
                     fixedrange=False)
    _time_axis(fig, t0, t1)
    return fig


def _time_axis(fig: Any, t0: int, t1: int) -> None:
    simulated = t0 < _EPOCH_2000
    fig.update_xaxes(type="date", range=[t0, t1], showgrid=True, gridcolor="#eee",
                     tickformat="%H:%M" if simulated and t1 - t0 < 86_400_000 else None,
                     title={"text": "simulated time (T+h:mm)" if simulated else "UTC",
                            "font": {"size": 11}})


def _count_figure(disagreement: Sequence[Row], t0: int, t1: int) -> Any:
    import plotly.graph_objects as go

    edges = Counter[int]()
    for r in disagreement:
        edges[r["start_ms"]] += 1
        edges[r["end_ms"]] -= 1
    xs, ys, level = [t0], [0], 0
    for x in sorted(edges):
        level += edges[x]
        xs.append(x)
        ys.append(level)
    xs.append(t1)
    ys.append(level)
    fig = go.Figure(go.Scatter(x=xs, y=ys, mode="lines", line={"shape": "hv", "width": 1,
                                                                "color": DISAGREE_COLOUR},
                               fill="tozeroy", name="topics answered differently",
                               hovertemplate="%{y} topics<extra></extra>"))
    fig.update_layout(height=150, margin={"l": 10, "r": 10, "t": 28, "b": 30},
                      title={"text": "topics answered differently by the name servers",
                             "x": 0, "font": {"size": 13}}, plot_bgcolor="white",
                      showlegend=False)
    fig.update_yaxes(rangemode="tozero", automargin=True, gridcolor="#eee")
    _time_axis(fig, t0, t1)
    return fig


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, cls: str = "",
           total: int | None = None, what: str = "rows") -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    # short cells never break; longer ones wrap at their spaces (addresses stay whole)
    body = "".join("<tr>" + "".join(
        f'<td class="{"n" if len(re.sub("<[^>]*>", "", c)) <= 12 else "t"}">{c}</td>'
        for c in r) + "</tr>" for r in rows)
    note = (f'<p class="note">{len(rows)} of {total:,} {e(what)} shown.</p>'
            if total is not None and total > len(rows) else "")
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>' \
           f"</table>{note}"


def _expiries_by_broker(expiries: Sequence[Row]) -> list[dict[str, Any]]:
    grouped: dict[tuple[str, int, str], list[Row]] = {}
    for r in expiries:
        grouped.setdefault((r["broker_name"], r["broker_id"], r["broker_addr"]), []).append(r)
    out: list[dict[str, Any]] = []
    for (name, bid, addr), rs in grouped.items():
        over = [r["overdue_ms"] for r in rs if r["overdue_ms"] is not None]
        out.append({"broker": f"{name} #{bid} {addr}", "count": len(rs),
                    "name_servers": dict(sorted(Counter(r["ns"] for r in rs).items())),
                    "median_latency_ms": int(statistics.median(r["latency_ms"] for r in rs)),
                    "max_overdue_ms": max(over) if over else None})
    out.sort(key=lambda r: (-int(r["count"]), str(r["broker"])))
    return out


def write_report(tables: Mapping[str, Sequence[Row]], summary: Summary, path: Path, *,
                 title: str = "routing: name-server journals") -> Path:
    """Write the report page to ``path`` (see the module's doc); returns ``path``.

    ``tables`` are output rows (`analyze_local`'s, or `Analysis.summary_rows`'s):
    ``name_servers``, ``sessions``, ``expiries`` and ``disagreement`` are used (availability
    and rejected lines come from ``summary``). Cost: O(sessions + incidents), at most
    `MAX_BARS` bars drawn: 0.3–1.2 s and a page of about 5 MB for the demo."""
    import plotly
    import plotly.io as pio

    e = html.escape
    sessions = tables["sessions"]
    servers = sorted({r["ns"] for r in tables["name_servers"]} | {r["ns"] for r in sessions})
    t0 = min([r["first_ms"] for r in tables["name_servers"]]
             + [r["start_ms"] for r in sessions] or [0])
    t1 = max([r["last_ms"] for r in tables["name_servers"]]
             + [r["end_ms"] for r in sessions] or [1])
    rows = broker_rows(sessions)
    bars = level_of_detail(sessions, t1 - t0)
    incidents = summary.incidents
    config = {"displaylogo": False, "scrollZoom": True, "responsive": True,
              "modeBarButtonsToRemove": ["select2d", "lasso2d", "toImage"]}
    figures = [("disagreement-count", _count_figure(tables["disagreement"], t0, t1))]
    figures += [(f"tl-{ns}", _timeline_figure(ns, bars, rows, incidents, t0, t1))
                for ns in servers]
    plots = "\n".join(
        f'<section class="panel" id="panel-{e(div)}">'
        + pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=div,
                      config=config) + "</section>" for div, fig in figures)

    wall = summary.disagreement_wall_ms
    span = summary.common_span_ms
    numbers = [
        ("name servers", str(len(summary.name_servers))),
        ("brokers", f"{len(rows):,}"),
        ("journal records", f"{summary.records:,}"),
        ("broker sessions", f"{sum(summary.sessions_by_reason.values()):,} ("
         + ", ".join(f"{k} {v:,}" for k, v in summary.sessions_by_reason.items()) + ")"),
        ("expiries", f"{len(summary.expiry_latencies_ms):,}"),
        ("disagreement", f"{plural(len(incidents), 'incident')}, {format_ms(wall)} of wall "
                         f"time" + (f" ({100 * wall / span:.1f} % of the common span)"
                                    if span else "")),
        ("rejected lines", f"{summary.rejected_total:,}"),
    ]
    facts = "".join(f"<div><b>{e(v)}</b><span>{e(k)}</span></div>" for k, v in numbers)
    worst = sorted(incidents, key=lambda i: (-i["duration_ms"], i["start_ms"]))[:TABLE_ROWS]
    inc_rows = [[
        f'<a class="incident-link" href="#tl-{e((i["name_servers"] or servers)[0])}" '
        f'data-incident="{i["id"]}" data-start="{i["start_ms"]}" data-end="{i["end_ms"]}">'
        f'#{i["id"]}</a>',
        e(format_time(i["start_ms"], millis=False)),
        e(format_ms(i["duration_ms"])) + (" (open)" if i["open_at_end"] else ""),
        f"{i['topics']:,}",
        "<br>".join(e(c) for c in i["causes"][:2])
        + (f" (+{len(i['causes']) - 2} more)" if len(i["causes"]) > 2 else ""),
        e(", ".join(i["name_servers"])),
        "<br>".join(e(b) for b in i["brokers"][:3]) + (f"<br>+{len(i['brokers']) - 3} more"
                                                       if len(i["brokers"]) > 3 else "")]
                for i in worst]
    life = summary.availability_life
    ranked = rank_availability(life, TABLE_ROWS)
    av_rows = [[e(r["topic"]), e(r["ns"]), f"{100 * r['share']:.3f} %", str(r["outages"]),
                e(format_ms(r["longest_outage_ms"])), e(format_ms(r["life_ms"]))
                + (" (deleted)" if r["deleted_ms"] is not None else "")] for r in ranked]
    expiries = _expiries_by_broker(tables["expiries"])
    exp_rows = [[e(r["broker"]), str(r["count"]),
                 e(", ".join(f"{k} {v}" for k, v in r["name_servers"].items())),
                 e(format_ms(r["median_latency_ms"])), e(format_ms(r["max_overdue_ms"]))]
                for r in expiries[:TABLE_ROWS]]
    rej_rows = [[e(g["reason"]), e(g["source"]), f"{int(g['lines']):,}"]
                for g in summary.rejected_by_file[:TABLE_ROWS]]
    legend = "".join(
        f'<span><i style="background:{c}"></i>{e(r.replace("_", " "))}</span>'
        for r, c in REASON_COLOURS.items() if r != "open")
    side = f"""
<h2>Incidents</h2>
<p class="note">{plural(len(incidents), 'incident')}: disagreement windows of all topics
merged when less than {e(format_ms(summary.incident_gap_ms))} apart; {e(format_ms(wall))} of
wall time in all. Longest first; click one to see it on the timelines.</p>
{_table(["#", "from", "length", "topics", "cause", "name servers", "brokers"], inc_rows,
        cls="incidents", total=len(incidents), what="incidents")}
<h2>Lowest availability</h2>
<p class="note">Share of each topic's life with a writable queue on that name server (the
time from a deletion on purpose until the topic is created again is not part of its life).
Topics without an outage are left out.</p>
{_table(["topic", "name server", "writable", "outages", "longest outage", "life"], av_rows,
        total=sum(1 for r in life if r["outages"]), what="topic/name-server pairs with an outage")
 if av_rows else '<p>No outage.</p>'}
<h2>Expiries per broker</h2>
{_table(["broker", "expiries", "per name server", "median latency", "max past deadline"],
        exp_rows, total=len(expiries), what="brokers") if exp_rows else '<p>None.</p>'}
<h2>Rejected lines</h2>
{_table(["reason", "file", "lines"], rej_rows, total=len(summary.rejected_by_file),
        what="reason/file pairs") if rej_rows else '<p>None: every line was used.</p>'}
"""
    nav = " · ".join(f'<a href="#tl-{e(ns)}">{e(ns)}</a>' for ns in servers)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body {{ font-family: system-ui, sans-serif; margin: 0; color: #222; }}
header {{ padding: 0.8em 1.2em; border-bottom: 1px solid #ddd; }}
h1 {{ font-size: 1.3em; margin: 0 0 0.4em 0; }}
h2 {{ font-size: 1.05em; margin: 1.2em 0 0.3em 0; }}
.facts {{ display: flex; flex-wrap: wrap; gap: 0.4em 1.6em; }}
.facts div {{ display: flex; flex-direction: column; }}
.facts span {{ font-size: 0.8em; color: #666; }}
.legend span {{ margin-right: 1.2em; white-space: nowrap; font-size: 0.9em; }}
.legend i {{ display: inline-block; width: 1.6em; height: 0.8em; margin-right: 0.3em;
            vertical-align: middle; }}
main {{ display: grid; grid-template-columns: minmax(0, 3fr) minmax(22em, 2fr); gap: 1em;
       padding: 0 1em; }}
#side {{ position: sticky; top: 0; align-self: start; max-height: 100vh; overflow: auto;
        font-size: 0.85em; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ padding: 0.15em 0.5em; text-align: left; border-bottom: 1px solid #eee;
          vertical-align: top; }}
td.n {{ white-space: nowrap; }}
th {{ background: #fafafa; position: sticky; top: 0; }}
.note {{ color: #555; font-size: 0.9em; margin: 0.2em 0; }}
.panel {{ margin: 0.4em 0; }}
tr.active td {{ background: #fde0e0; }}
</style>
<script>{plotly.offline.get_plotlyjs()}</script>
</head><body>
<header><h1>{e(title)}</h1>
<div class="facts">{facts}</div>
<p class="legend"><span><i style="background:{LIVE_COLOUR}"></i>broker live on the name
server (hover a bar for its session)</span><span><i style="background:{DISAGREE_COLOUR};
opacity:0.4"></i>red bands (solid red above the rows, a red tint over them): the name
servers disagreed on some topic's route (an incident)</span> session ends: {legend}</p>
<p class="note">Drag to zoom, shift-drag or the wheel to pan and zoom, double-click to
reset; the panels share the time axis. Name servers: {nav}</p>
</header>
<main><div id="timelines">{plots}</div><aside id="side">{side}</aside></main>
<script>
(function () {{
  const ids = {json.dumps([div for div, _f in figures])};
  const plots = ids.map(id => document.getElementById(id));
  let syncing = false;
  plots.forEach(p => p.on('plotly_relayout', ev => {{
    if (syncing) return;
    let update = null;
    if (ev['xaxis.range[0]'] !== undefined)
      update = {{'xaxis.range': [ev['xaxis.range[0]'], ev['xaxis.range[1]']]}};
    else if (ev['xaxis.range']) update = {{'xaxis.range': ev['xaxis.range']}};
    else if (ev['xaxis.autorange']) update = {{'xaxis.autorange': true}};
    if (!update) return;
    syncing = true;
    Promise.all(plots.filter(q => q !== p).map(q => Plotly.relayout(q, update)))
      .finally(() => {{ syncing = false; }});
  }}));
  const span = {t1 - t0};
  document.querySelectorAll('a.incident-link').forEach(a => a.addEventListener('click', ev => {{
    ev.preventDefault();
    const s = Number(a.dataset.start), e = Number(a.dataset.end);
    const pad = Math.max((e - s) * 0.5, span / 400, 1000);
    const range = [s - pad, e + pad];
    document.querySelectorAll('tr.active').forEach(r => r.classList.remove('active'));
    a.closest('tr').classList.add('active');
    syncing = true;
    delete document.body.dataset.incident;
    Promise.all(plots.map(q => Plotly.relayout(q, {{'xaxis.range': range}})))
      .finally(() => {{
        syncing = false;
        document.body.dataset.incident = a.dataset.incident;  // shown: tests wait for it
      }});
    const target = document.getElementById(a.getAttribute('href').slice(1));
    if (target) target.scrollIntoView({{block: 'start'}});
    history.replaceState(null, '', a.getAttribute('href'));
  }}));
}})();
</script>
</body></html>
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
