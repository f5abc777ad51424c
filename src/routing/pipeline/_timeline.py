"""The picture: broker liveness per name server, with the disagreement incidents marked.

`draw_timeline` writes a PNG (matplotlib, from the ``cli`` extra, imported here only) for
reports and CI artefacts; the interactive page is ``_report.py``. One panel per name server
has a row per broker address labelled ``group #id address`` (above `MAX_BROKER_ROWS`
addresses, a row per broker group: the bar shows when at least one of its brokers was
live, the detail is in the page); a bar for each session, a tick at its end coloured by the
end reason. Red bands, drawn over the bars, mark the instants when the name servers
answered differently for at least one topic; the bottom panel counts those topics. The
figure grows with the rows (a fixed height per row), so labels never overlap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._incidents import union
from ._schema import Row
from ._summary import format_time

__all__ = ["MAX_BROKER_ROWS", "REASON_COLOURS", "broker_rows", "draw_timeline"]


#: End-reason colours (the bar itself is green while the broker is live).
REASON_COLOURS: Mapping[str, str] = {
    "expired": "#d62728", "channel_closed": "#ff7f0e", "unregistered": "#7f7f7f",
    "replaced": "#1f77b4", "restart": "#9467bd",
}
_LIVE = "#2ca02c"
_DISAGREE = "#d62728"
#: Above this many broker addresses the PNG draws one row per broker group.
MAX_BROKER_ROWS = 120
_ROW_IN = 0.15  # inches per row (16.5 px at 110 dpi)


def broker_rows(sessions: Sequence[Row]) -> list[tuple[str, str]]:
    """(address, label) per broker address, sorted by group, id, address; the label is
    ``group #id address`` (``#0/1`` when the address held several ids)."""
    held: dict[str, tuple[str, set[int]]] = {}
    for r in sorted(sessions, key=lambda r: (r["start_ms"], r["ns"])):
        _name, ids = held.setdefault(r["broker_addr"], (r["broker_name"], set()))
        ids.add(r["broker_id"])
    order = sorted(held, key=lambda a: (held[a][0], min(held[a][1]), a))
    return [(a, f"{held[a][0]} #{'/'.join(map(str, sorted(held[a][1])))} {a}")
            for a in order]


def _union(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    return union(intervals)


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
    """Draw the timeline PNG to ``path``; returns ``path``. Cost: O(sessions + windows)
    with matplotlib, seconds (4–9 s for the demo's 60 brokers, ``docs/pipeline.md``)."""
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

    rows = broker_rows(sessions)
    by_group = len(rows) > MAX_BROKER_ROWS
    if by_group:
        groups = sorted({r["broker_name"] for r in sessions})
        counts = {g: sum(1 for a, label in rows if label.startswith(g + " ")) for g in groups}
        labels = [f"{g} ({counts[g]} brokers)" for g in groups]
        row_of = {r["broker_addr"]: groups.index(r["broker_name"]) for r in sessions}
    else:
        labels = [label for _a, label in rows]
        row_of = {a: i for i, (a, _label) in enumerate(rows)}
    n_rows = max(1, len(labels))
    panel_h = 0.55 + _ROW_IN * n_rows
    fig_h = panel_h * len(servers) + 1.6 + 0.9
    fig, axes = plt.subplots(
        len(servers) + 1, 1, sharex=True, figsize=(16, fig_h), layout="constrained",
        gridspec_kw={"height_ratios": [panel_h] * len(servers) + [1.6]}, squeeze=False)
    spans = _union((r["start_ms"], r["end_ms"]) for r in disagreement)
    minimum = max(1, (t1 - t0) // 1500)  # at least a pixel wide
    for ax, ns in zip(axes[:, 0], servers, strict=False):
        mine = [r for r in sessions if r["ns"] == ns]
        by_row: dict[int, list[tuple[int, int]]] = {}
        for r in mine:
            by_row.setdefault(row_of[r["broker_addr"]], []).append((r["start_ms"], r["end_ms"]))
        for row, bars in by_row.items():
            live = _union(bars) if by_group else bars
            ax.broken_barh([(x(a), max(x(b) - x(a), 1e-4)) for a, b in live],
                           (row - 0.38, 0.76), facecolors=_LIVE, lw=0, zorder=2)
        for reason, colour in REASON_COLOURS.items():
            ends = [(x(r["end_ms"]), row_of[r["broker_addr"]]) for r in mine
                    if r["end_reason"] == reason]
            if ends:
                ax.scatter([e[0] for e in ends], [e[1] for e in ends], marker="|", s=70,
                           color=colour, linewidths=2, zorder=3)
        for a, b in spans:  # over the bars, so they stay visible; solid red on top
            ax.axvspan(x(a), x(max(b, a + minimum)), color=_DISAGREE, alpha=0.5, lw=0.6,
                       ec=_DISAGREE, zorder=4)
            ax.axvspan(x(a), x(max(b, a + minimum)), ymin=1 - 0.12 / panel_h, ymax=1,
                       color=_DISAGREE, lw=0, zorder=5)
        ax.set_ylim(n_rows - 0.5, -0.5)
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels, fontsize=7.5, family="monospace")
        ax.set_title(f"name server {ns}", loc="left", fontsize=11, fontweight="bold")
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(axis="y", length=0)
    bottom = axes[-1, 0]
    xs, ys = _counts([(r["start_ms"], r["end_ms"]) for r in disagreement])
    if xs:
        bottom.step([x(v) for v in xs], ys, where="post", color=_DISAGREE, lw=1)
        bottom.fill_between([x(v) for v in xs], ys, step="post", color=_DISAGREE, alpha=0.3)
    bottom.set_ylabel("topics\nanswered\ndifferently", fontsize=9)
    since = ("simulated time" if t0 < 946_684_800_000
             else f"time since {format_time(t0, millis=False)} UTC")
    bottom.set_xlabel(f"{since} ({unit_name})")
    bottom.set_xlim(x(t0), x(t1))
    bottom.grid(alpha=0.3)
    handles: list[Any] = [Patch(color=_LIVE, label="live (registered, not yet removed)"),
                          Patch(color=_DISAGREE,
                                label="red: name servers disagree on a route (solid above "
                                      "the rows, a tint over them)")]
    handles += [Line2D([], [], color=c, marker="|", lw=0, markersize=10, markeredgewidth=2,
                       label=f"end: {r.replace('_', ' ')}") for r, c in REASON_COLOURS.items()]
    fig.suptitle(title, fontsize=14, fontweight="bold")
    fig.legend(handles=handles, loc="outside lower center", ncol=4, frameon=False,
               fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
