"""Timing helpers and report writers shared by every benchmark module.

Rows. Every benchmark module returns a list of flat ``dict`` rows; the keys the report knows
are listed in `ROW_KEYS` and all but ``suite``, ``operation`` and ``size`` are optional:

``suite`` (str), ``operation`` (str), ``size`` (int), ``size_unit`` (str),
``routing_ops_per_s``, ``routing_median_ns``, ``routing_p99_ns``, ``routing_calls``,
``baseline_ops_per_s``, ``baseline_median_ns``, ``baseline_p99_ns``, ``baseline_calls``,
``ratio`` (routing ops/s over baseline ops/s), ``note`` (str). `row_from_timings` also
adds ``*_mean_ops_per_s``.

Ops/s. ``*_ops_per_s`` is 1 / median latency: on a shared machine the mean is dominated by
other processes' bursts, the median is not. The mean throughput is kept beside it.

Latency. `time_op` times batches of calls with ``time.perf_counter_ns``: an operation
faster than `BATCH_FLOOR_NS` is called ``inner`` times per sample so a sample lasts at
least that long, and each sample's per-call latency is the batch mean. Median and p99 are
over those samples; for fast operations p99 therefore reflects batch-level jitter (GC pauses,
scheduler) rather than single-call outliers.
A measurement runs `ROUNDS` rounds and keeps the one with the lowest median.
"""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BATCH_FLOOR_NS",
    "ROW_KEYS",
    "Timing",
    "frozen_heap",
    "machine_info",
    "print_table",
    "row_from_timings",
    "time_op",
    "time_with_setup",
    "write_json",
    "write_plot",
]

#: A sample of a fast operation lasts at least this long (the timer costs ~50-100 ns).
BATCH_FLOOR_NS = 20_000

ROW_KEYS = (
    "suite", "operation", "size", "size_unit",
    "routing_ops_per_s", "routing_median_ns", "routing_p99_ns", "routing_calls",
    "baseline_ops_per_s", "baseline_median_ns", "baseline_p99_ns", "baseline_calls",
    "ratio", "note",
)

Row = dict[str, Any]


@dataclass(frozen=True)
class Timing:
    """What one measurement found: calls made, total timed ns and per-call latencies."""

    calls: int
    total_ns: int
    median_ns: float
    p99_ns: float

    @property
    def ops_per_s(self) -> float:
        """Calls per second at the median latency (robust to other processes' bursts)."""
        return 1e9 / self.median_ns if self.median_ns else math.inf

    @property
    def mean_ops_per_s(self) -> float:
        """Calls per second of total timed time (includes every stall)."""
        return self.calls * 1e9 / self.total_ns if self.total_ns else math.inf


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


def _timing(samples: list[float], calls: int, total_ns: int) -> Timing:
    return Timing(calls=calls, total_ns=total_ns, median_ns=statistics.median(samples),
                  p99_ns=_percentile(samples, 0.99))


#: Each measurement is split into this many rounds and the round with the lowest median is
#: kept (as ``timeit`` keeps the best repeat): other processes on a shared 2-core machine
#: then inflate one round rather than the result.
ROUNDS = 3


def _best(rounds: list[Timing]) -> Timing:
    return min(rounds, key=lambda t: t.median_ns)


def time_op(fn: Callable[..., object], args: tuple[Any, ...] = (), *, budget_s: float,
            min_samples: int = 5, max_samples: int = 2_000) -> Timing:
    """Time ``fn(*args)`` for about ``budget_s`` seconds (at least ``min_samples`` samples per
    round, best of `ROUNDS` rounds).

    The operation must leave the state as it found it (or reach a steady state), since it is
    called many times in a row.
    """
    return _best([_time_op(fn, args, budget_s / ROUNDS, min_samples, max_samples)
                  for _ in range(ROUNDS)])


def _time_op(fn: Callable[..., object], args: tuple[Any, ...], budget_s: float,
             min_samples: int, max_samples: int) -> Timing:
    perf = time.perf_counter_ns
    fn(*args)  # warm up (first-call caches, lazy snapshots)
    t0 = perf()
    fn(*args)
    one = max(1, perf() - t0)
    inner = max(1, min(10_000, BATCH_FLOOR_NS // one))
    samples: list[float] = []
    calls = 0
    total = 0
    deadline = perf() + int(budget_s * 1e9)
    loop = range(inner)
    while len(samples) < max_samples and (len(samples) < min_samples or perf() < deadline):
        t0 = perf()
        for _ in loop:
            fn(*args)
        elapsed = perf() - t0
        samples.append(elapsed / inner)
        calls += inner
        total += elapsed
    return _timing(samples, calls, total)


def time_with_setup(setup: Callable[[], object], op: Callable[[], object], *, budget_s: float,
                    min_samples: int = 5, max_samples: int = 2_000) -> Timing:
    """Time single calls of ``op()``, each after an untimed ``setup()`` (destructive ops);
    best of `ROUNDS` rounds."""
    return _best([_time_with_setup(setup, op, budget_s / ROUNDS, min_samples, max_samples)
                  for _ in range(ROUNDS)])


def _time_with_setup(setup: Callable[[], object], op: Callable[[], object], budget_s: float,
                     min_samples: int, max_samples: int) -> Timing:
    perf = time.perf_counter_ns
    samples: list[float] = []
    total = 0
    deadline = perf() + int(budget_s * 1e9)
    while len(samples) < max_samples and (len(samples) < min_samples or perf() < deadline):
        setup()
        t0 = perf()
        op()
        elapsed = perf() - t0
        samples.append(float(elapsed))
        total += elapsed
    return _timing(samples, len(samples), total)


class frozen_heap:
    """Collect, then move every live object out of the collector's generations while timing.

    A benchmark state of 10^5 topics is long-lived; without `gc.freeze` the full collections
    it triggers would land on whichever operation happens to allocate at that moment.
    """

    def __enter__(self) -> None:
        gc.collect()
        gc.freeze()

    def __exit__(self, *exc: object) -> None:
        gc.unfreeze()


def row_from_timings(suite: str, operation: str, size: int, size_unit: str,
                     routing: Timing | None, baseline: Timing | None, note: str = "") -> Row:
    """One flat report row (see the module docstring)."""
    row: Row = {"suite": suite, "operation": operation, "size": size, "size_unit": size_unit}
    for side, timing in (("routing", routing), ("baseline", baseline)):
        if timing is not None:
            row[f"{side}_ops_per_s"] = timing.ops_per_s
            row[f"{side}_mean_ops_per_s"] = timing.mean_ops_per_s
            row[f"{side}_median_ns"] = timing.median_ns
            row[f"{side}_p99_ns"] = timing.p99_ns
            row[f"{side}_calls"] = timing.calls
    if routing is not None and baseline is not None:
        row["ratio"] = routing.ops_per_s / baseline.ops_per_s
    if note:
        row["note"] = note
    return row


def machine_info() -> dict[str, Any]:
    """The machine the run happened on, read from the running process."""
    return {
        "nproc": os.cpu_count(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "loadavg_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


# --------------------------------------------------------------------------- formatting


def fmt_rate(value: object) -> str:
    """Ops/s with a k/M suffix."""
    if not isinstance(value, int | float) or math.isnan(value):
        return "—"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M"
    if value >= 1e3:
        return f"{value / 1e3:.1f} k"
    return f"{value:.1f}"


def fmt_ns(value: object) -> str:
    """A latency with a unit."""
    if not isinstance(value, int | float) or math.isnan(value):
        return "—"
    if value >= 1e6:
        return f"{value / 1e6:.2f} ms"
    if value >= 1e3:
        return f"{value / 1e3:.2f} µs"
    return f"{value:.0f} ns"


def fmt_ratio(value: object) -> str:
    """A speed ratio like ``1234×``."""
    if not isinstance(value, int | float) or math.isnan(value):
        return "—"
    if value >= 100:
        return f"{value:,.0f}×"
    return f"{value:.2f}×"


def table_lines(rows: Iterable[Row]) -> list[list[str]]:
    """The report table as strings: one list of cells per row (used for Markdown too)."""
    lines = []
    for row in rows:
        lines.append([
            str(row.get("suite", "")), str(row.get("operation", "")),
            f"{row.get('size', '')} {row.get('size_unit', '')}".strip(),
            fmt_rate(row.get("routing_ops_per_s")), fmt_ns(row.get("routing_median_ns")),
            fmt_ns(row.get("routing_p99_ns")),
            fmt_rate(row.get("baseline_ops_per_s")), fmt_ns(row.get("baseline_median_ns")),
            fmt_ns(row.get("baseline_p99_ns")), fmt_ratio(row.get("ratio")),
            str(row.get("note", "")),
        ])
    return lines


TABLE_HEADER = ("suite", "operation", "size", "routing ops/s", "routing median",
                "routing p99", "baseline ops/s", "baseline median", "baseline p99", "ratio",
                "note")


def print_table(rows: Sequence[Row], title: str) -> None:
    """Print the rows with rich (falls back to plain text if rich is missing)."""
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover - rich is in the cli extra
        print(title)
        print(" | ".join(TABLE_HEADER))
        for cells in table_lines(rows):
            print(" | ".join(cells))
        return
    table = Table(title=title, show_lines=False)
    for name in TABLE_HEADER:
        table.add_column(name, justify="right" if name not in ("suite", "operation", "note")
                         else "left", overflow="fold")
    for cells in table_lines(rows):
        table.add_row(*cells)
    Console(width=200).print(table)


def markdown_table(rows: Sequence[Row]) -> str:
    """The rows as a GitHub Markdown table."""
    out = ["| " + " | ".join(TABLE_HEADER) + " |",
           "|" + "|".join("---" for _ in TABLE_HEADER) + "|"]
    out.extend("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
               for cells in table_lines(rows))
    return "\n".join(out)


def write_json(path: Path, document: dict[str, Any]) -> None:
    """Write the report document as indented JSON (NaN/inf become null)."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(clean(document), indent=2, sort_keys=False) + "\n")


def _cost_us(row: Row, side: str) -> tuple[float | None, bool]:
    """A row's cost in µs for one side: the median per call, or else 1 / throughput (rows
    of the pipeline and simulator suites report only items per second). The flag says
    which."""
    median = row.get(f"{side}_median_ns")
    if isinstance(median, int | float) and not isinstance(median, bool):
        return median / 1e3, False
    rate = row.get(f"{side}_ops_per_s")
    if isinstance(rate, int | float) and not isinstance(rate, bool) and rate > 0:
        return 1e6 / rate, True
    return None, False


def write_plot(path: Path, rows: Sequence[Row], title: str) -> bool:
    """A log-log plot of median cost per call against size, one panel per operation.

    Only operations measured at two sizes or more are drawn. Returns False (and writes
    nothing) if matplotlib is missing or there is nothing to draw.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - matplotlib is in the cli extra
        return False
    series: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        series.setdefault((str(row.get("suite")), str(row.get("operation"))), []).append(row)
    panels = [(key, sorted(group, key=lambda r: r["size"])) for key, group in series.items()
              if len({r["size"] for r in group}) >= 2
              and any(_cost_us(r, side)[0] is not None for r in group
                      for side in ("routing", "baseline"))]
    if not panels:
        return False
    cols = 3
    nrows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 3.6 * nrows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, ((suite, operation), group) in zip(axes.flat, panels, strict=False):
        derived = False
        for side, style in (("routing", "o-"), ("baseline", "s--")):
            points = []
            for r in group:
                cost, from_throughput = _cost_us(r, side)
                if cost is not None:
                    points.append((r["size"], cost))
                    derived |= from_throughput
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, style, label=side)
        ax.set_xscale("log")
        ax.set_yscale("log")
        unit = group[0].get("size_unit", "size")
        ax.set_xlabel(str(unit))
        ax.set_ylabel("µs per item (1 / throughput)" if derived else "median µs per call")
        ax.set_title(operation if suite == "core" else f"{suite}: {operation}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.98))  # leave the suptitle its own line
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def replace_block(path: Path, name: str, text: str) -> bool:
    """Replace the text between ``<!-- name:start -->`` and ``<!-- name:end -->`` in a
    Markdown file; False (nothing written) when the file or the markers are missing."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if not path.exists():
        return False
    doc = path.read_text()
    i, j = doc.find(start), doc.find(end)
    if i < 0 or j < i:
        return False
    path.write_text(doc[:i + len(start)] + "\n" + text.strip() + "\n" + doc[j:])
    return True
