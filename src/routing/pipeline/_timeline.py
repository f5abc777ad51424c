"""The picture: broker liveness per name server, with the disagreement windows marked.

`draw_timeline` writes a PNG (matplotlib, from the ``cli`` extra, imported here only) and
`write_html` a small self-contained page embedding it with the summary's key numbers. One
panel per name server has a row per broker address: a bar for each session, a tick at its
end coloured by the end reason. Red bands mark the instants when the name servers answered
differently for at least one topic; the bottom panel counts those topics over time.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._summary import Summary, format_ms, format_time

__all__ = ["draw_timeline", "write_html"]

Row = dict[str, Any]

#: End-reason colours (the bar itself is green while the broker is live).
REASON_COLOURS: Mapping[str, str] = {
    "expired": "#d62728", "channel_closed": "#ff7f0e", "unregistered": "#7f7f7f",
    "replaced": "#1f77b4", "restart": "#9467bd",
}
_LIVE = "#2ca02c"
_DISAGREE = "#d62728"


def _union(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _counts(intervals: Sequence[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Step function: how many intervals cover each instant (x, y for ``step(where=post)``)."""
    edges: list[tuple[int, int]] = [(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals]
    xs: list[int] = []
    ys: list[int] = []
    level = 0
    for x, d in sorted(edges):
        level += d
        if xs and xs[-1] == x:
            ys[-1] = level
        else:
            xs.append(x)
            ys.append(level)
    return xs, ys


def draw_timeline(sessions: Sequence[Row], disagreement: Sequence[Row],
                  name_servers: Sequence[Row], path: Path, *,
                  title: str = "Broker liveness per name server") -> Path:
    """Draw the timeline PNG to ``path``; returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    servers = sorted({r["ns"] for r in name_servers} | {r["ns"] for r in sessions})
    t0 = min([r["first_ms"] for r in name_servers] + [r["start_ms"] for r in sessions] or [0])
    t1 = max([r["last_ms"] for r in name_servers] + [r["end_ms"] for r in sessions] or [1])
    hours = (t1 - t0) >= 2 * 3_600_000
    unit, unit_name = (3_600_000, "h") if hours else (60_000, "min")

    def x(ms: int) -> float:
        return float(ms - t0) / unit

    # One row per address, labelled with its group and the ids it held, sorted by group.
    held: dict[str, tuple[str, set[int]]] = {}
    for r in sorted(sessions, key=lambda r: (r["start_ms"], r["ns"])):
        _name, ids = held.setdefault(r["broker_addr"], (r["broker_name"], set()))
        ids.add(r["broker_id"])
    order = sorted(held, key=lambda a: (held[a][0], min(held[a][1]), a))
    labels = [f"{held[a][0]} #{'/'.join(map(str, sorted(held[a][1])))}" for a in order]
    row_of = {a: i for i, a in enumerate(order)}
    n_rows = max(1, len(order))
    panel_h = max(1.6, 0.085 * n_rows)
    fig_h = panel_h * len(servers) + 2.2
    fig, axes = plt.subplots(
        len(servers) + 1, 1, sharex=True, figsize=(15, fig_h),
        gridspec_kw={"height_ratios": [panel_h] * len(servers) + [1.4]}, squeeze=False)
    spans = _union((r["start_ms"], r["end_ms"]) for r in disagreement)
    for ax, ns in zip(axes[:, 0], servers, strict=False):
        for a, b in spans:
            ax.axvspan(x(a), x(max(b, a + unit // 2000)), color=_DISAGREE, alpha=0.25, lw=0)
        mine = [r for r in sessions if r["ns"] == ns]
        by_row: dict[int, list[tuple[float, float]]] = {}
        for r in mine:
            by_row.setdefault(row_of[r["broker_addr"]], []).append(
                (x(r["start_ms"]), max(x(r["end_ms"]) - x(r["start_ms"]), 1e-4)))
        for row, bars in by_row.items():
            ax.broken_barh(bars, (row - 0.38, 0.76), facecolors=_LIVE, lw=0)
        for reason, colour in REASON_COLOURS.items():
            ends = [(x(r["end_ms"]), row_of[r["broker_addr"]]) for r in mine
                    if r["end_reason"] == reason]
            if ends:
                ax.scatter([e[0] for e in ends], [e[1] for e in ends], marker="|", s=60,
                           color=colour, linewidths=2, zorder=3)
        ax.set_ylim(n_rows - 0.5, -0.5)
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels,
                           fontsize=max(4.0, min(8.0, 420 / n_rows)))
        ax.set_ylabel(ns, fontsize=12, fontweight="bold")
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(axis="y", length=0)
    bottom = axes[-1, 0]
    xs, ys = _counts([(r["start_ms"], r["end_ms"]) for r in disagreement])
    if xs:
        bottom.step([x(v) for v in xs], ys, where="post", color=_DISAGREE, lw=1)
        bottom.fill_between([x(v) for v in xs], ys, step="post", color=_DISAGREE, alpha=0.3)
    bottom.set_ylabel("topics in\ndisagreement")
    since = ("simulated time" if t0 < 946_684_800_000
             else f"time since {format_time(t0, millis=False)} UTC")
    bottom.set_xlabel(f"{since} ({unit_name})")
    bottom.set_xlim(x(t0), x(t1))
    bottom.grid(alpha=0.3)
    handles: list[Any] = [Patch(color=_LIVE, label="live (registered, not yet removed)"),
               Patch(color=_DISAGREE, alpha=0.3, label="name servers disagree on a route")]
    handles += [Line2D([], [], color=c, marker="|", lw=0, markersize=10, markeredgewidth=2,
                       label=f"end: {r.replace('_', ' ')}") for r, c in REASON_COLOURS.items()]
    fig.legend(handles=handles, loc="upper center", ncol=4, frameon=False,
               bbox_to_anchor=(0.5, 1.0), fontsize=9)
    fig.suptitle(title, y=1.0 + 0.35 / fig_h * 2, fontsize=14, fontweight="bold")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.55 / fig_h))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def write_html(summary: Summary, png: Path, path: Path, *,
               title: str = "routing: name-server journals") -> Path:
    """A small self-contained HTML page: key numbers, the worst disagreement windows and
    the timeline PNG (embedded). Returns ``path``."""
    e = html.escape
    picture = base64.b64encode(png.read_bytes()).decode("ascii")
    lat = summary.expiry_latencies_ms
    numbers = [
        ("name servers", str(len(summary.name_servers))),
        ("journal records", f"{summary.records:,}"),
        ("broker sessions", f"{sum(summary.sessions_by_reason.values()):,} ("
         + ", ".join(f"{k} {v}" for k, v in summary.sessions_by_reason.items()) + ")"),
        ("expiries", f"{len(lat):,}" + (f", latency median {format_ms(lat[len(lat) // 2])}, "
                                         f"max {format_ms(lat[-1])}" if lat else "")),
        ("route changes", f"{summary.route_changes:,} over {summary.topics:,} topics"),
        ("disagreement", f"{summary.disagreement_intervals:,} intervals, "
                         f"{format_ms(summary.disagreement_total_ms)} in total"),
        ("rejected lines", f"{summary.rejected_total:,}"),
    ]
    rows = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in numbers)
    worst = "".join(
        f"<tr><td>{e(format_time(r['start_ms']))}</td><td>{e(format_time(r['end_ms']))}</td>"
        f"<td>{e(format_ms(r['duration_ms']))}</td><td>{e(', '.join(r['out_of_step']))}</td>"
        f"<td>{r['topics']} ({e(', '.join(r['sample']))}{', …' if r['topics'] > 3 else ''})"
        f"</td></tr>" for r in summary.worst_disagreement)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ padding: 0.2em 0.8em; text-align: left; border-bottom: 1px solid #ddd; }}
img {{ max-width: 100%; border: 1px solid #ccc; }}
</style></head><body>
<h1>{e(title)}</h1>
<table>{rows}</table>
<h2>Worst disagreement windows</h2>
<table><tr><th>from</th><th>to</th><th>duration</th><th>out of step</th><th>topics</th></tr>
{worst}</table>
<h2>Timeline</h2>
<p>Green: a broker address is live on that name server. Ticks: how its session ended.
Red bands: at least one topic's route differed between name servers.</p>
<img alt="timeline of broker liveness per name server" src="data:image/png;base64,{picture}">
</body></html>
"""
    path.write_text(page, encoding="utf-8")
    return path
