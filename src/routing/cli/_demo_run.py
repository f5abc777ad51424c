"""``routing demo`` (``make demo``): simulate, analyze on the embedded Spark, print, draw.

`run_demo` simulates 30 broker groups (a master and a slave each) and 3 name servers for 6
simulated hours with the default fault profile (crashes, partitions, name-server restarts,
failovers, topic changes, degraded links), writes the journals, analyzes them with
`routing.pipeline.analyze`, writes the tables as Parquet, prints the summary and draws the
report: ``report.html`` (interactive, self-contained) and ``timeline.png``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console

from ..pipeline import (
    default_master,
    draw_timeline,
    plural,
    render_summary,
    spark_session,
    stop_session,
    summarize_rows,
    write_report,
)
from ..sim import LivePacing, SimConfig, simulate
from ._analyze import _stdout_console
from ._demo_live import run_live_demo
from ._progress import spark_progress

__all__ = ["DEMO_CONFIG", "run_demo"]

#: 30 groups x (master + slave), 3 name servers, 6 simulated hours, default faults.
DEMO_CONFIG = SimConfig(groups=30, slaves=1, nameservers=3, duration_ms=6 * 3_600_000,
                        seed=2024, faults="default")


def run_demo(out_dir: Path, *, master: str | None = None, config: SimConfig | None = None,
             console: Any = None, live: bool = True, live_pacing: LivePacing | None = None
             ) -> None:
    """Run the whole chain; everything goes under ``out_dir``:
    ``journals/`` (JSON Lines), ``tables/`` (Parquet), ``report.html``, ``timeline.png``;
    then, with ``live``, the live part (``_demo_live``: ``live/``, about 25 s on the same
    session; ``live_pacing`` as `run_live_demo`'s ``pacing``).
    Progress goes to stderr (or to ``console`` when one is given), the summary to stdout.

    ``master`` defaults to ``$SPARK_MASTER`` or the embedded ``local[*]``. Raises
    `routing.pipeline.SparkUnavailable` (with what to install) when Java 17+ or pyspark is missing.
    """
    err = console or Console(stderr=True)
    console = console or _stdout_console()
    config = config or DEMO_CONFIG
    out_dir = Path(out_dir)
    journals = out_dir / "journals"
    journals.mkdir(parents=True, exist_ok=True)
    for stale in journals.glob("ns-*.jsonl*"):
        stale.unlink()
    hours = config.duration_ms / 3_600_000
    heading = (f"[bold]routing demo[/bold]: {plural(config.groups, 'broker group')} × "
               f"{plural(1 + config.slaves, 'broker')}, "
               f"{plural(config.nameservers, 'name server')}, "
               f"{hours:g} simulated hours, faults: {config.faults}")
    if console.is_terminal:
        console.rule(heading)
    else:
        console.print(heading)
    page = out_dir / "report.html"
    console.print(f"report: {page} (written at the end)", highlight=False, soft_wrap=True)
    started = time.monotonic()
    result = _simulate(config, journals, err)
    lines = sum(result.stats.journal_lines.values())
    console.print(f"simulated in {time.monotonic() - started:.1f} s: {lines:,} journal lines "
                  f"in {journals}")

    master = master or default_master()
    err.print(f"starting Spark ({master}) …")
    from pyspark.sql import SparkSession

    owned = SparkSession.getActiveSession() is None  # stop it at the end only if ours
    spark = spark_session(master, app_name="routing-demo")
    try:
        from ..pipeline import analyze

        started = time.monotonic()
        tables_dir = out_dir / "tables"
        with spark_progress(err, spark) as say:
            analysis = analyze(spark, [str(journals)], at=[config.duration_ms // 2],
                               progress=say)
            say(f"writing Parquet to {tables_dir}")
            analysis.write(str(tables_dir))
            say("summarising")
            rows = analysis.summary_rows(written=tables_dir)
            summary = summarize_rows(rows)
            say("drawing the report")
            png = draw_timeline(rows["sessions"], rows["disagreement"], rows["name_servers"],
                                out_dir / "timeline.png",
                                title=f"Broker liveness per name server — "
                                      f"{plural(config.groups, 'group')}, "
                                      f"{plural(config.nameservers, 'name server')}, "
                                      f"{hours:g} h, seed {config.seed}")
            write_report(rows, summary, page,
                         title=f"routing demo: {plural(config.groups, 'broker group')}, "
                               f"{plural(config.nameservers, 'name server')}, {hours:g} "
                               f"simulated hours")
        render_summary(summary, console, title=f"routing demo on {master}")
        console.print(f"analyzed in {time.monotonic() - started:.1f} s "
                      f"({lines / max(1e-9, time.monotonic() - started):,.0f} lines/s)")
        analysis.unpersist()
        if live:
            run_live_demo(spark, out_dir, console, pacing=live_pacing)
    finally:
        if owned:
            stop_session(spark)
    console.print(f"tables:   {tables_dir}/<table>/*.parquet")
    console.print(f"report:   {page}  (picture: {png})", highlight=False, soft_wrap=True)


def _simulate(config: SimConfig, journals: Path, console: Any) -> Any:
    if not console.is_terminal:
        return simulate(config, out_dir=journals)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.percentage:>3.0f} %"),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task("sim", total=config.duration_ms)

        def progress(now_ms: int, end_ms: int) -> None:
            bar.update(task, completed=now_ms, total=end_ms)

        return simulate(config, out_dir=journals, progress=progress)



