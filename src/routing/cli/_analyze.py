"""``routing analyze``: the click command (click and rich, the ``cli`` extra, are imported only
under `routing.cli`)."""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from ..pipeline._schema import write_local_tables
from ..pipeline._session import SparkUnavailable, default_master, spark_session
from ..pipeline._summary import Summary, render, summarize_analysis, summarize_rows
from ..pipeline.reference import RejectedRecords, analyze_local

__all__ = ["analyze_command", "parse_time", "spark_progress"]


def parse_time(text: str) -> int:
    """An ``--at`` time as epoch ms: an integer (ms), ``T+H:MM:SS[.mmm]`` (ms since 0, the
    simulator's clock), or an ISO-8601 date-time (UTC unless it names a zone).

    >>> parse_time("90000"), parse_time("T+1:00:00"), parse_time("1970-01-01T00:00:01.5")
    (90000, 3600000, 1500)
    """
    value = text.strip()
    if re.fullmatch(r"\d+", value):
        return int(value)
    m = re.fullmatch(r"T\+(\d+):(\d{1,2}):(\d{1,2})(?:\.(\d{1,3}))?", value)
    if m:
        h, mi, s = int(m.group(1)), int(m.group(2)), int(m.group(3))
        milli = int((m.group(4) or "0").ljust(3, "0"))
        return ((h * 60 + mi) * 60 + s) * 1000 + milli
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected ms, T+H:MM:SS or an ISO date-time",
                                 param_hint="--at") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return round(when.timestamp() * 1000)


@contextmanager
def spark_progress(console: Console, spark: Any = None) -> Iterator[Callable[[str], None]]:
    """A step reporter for `analyze`: on a terminal, a live line with the step, Spark's
    active tasks (polled from the status tracker) and the elapsed time; elsewhere one
    printed line per step."""
    started = time.monotonic()
    if not console.is_terminal:
        def say(step: str) -> None:
            console.print(f"[{time.monotonic() - started:7.1f} s] {step}")
        yield say
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    stop = threading.Event()
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                  transient=True) as bar:
        task = bar.add_task("starting", total=None)

        def poll() -> None:
            tracker = spark.sparkContext.statusTracker() if spark is not None else None
            while tracker is not None and not stop.wait(0.5):
                try:
                    infos = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
                except Exception:  # the context is shutting down
                    return
                infos = [i for i in infos if i is not None]
                if infos:
                    bar.update(task, total=sum(i.numTasks for i in infos),
                               completed=sum(i.numCompletedTasks for i in infos))

        thread = threading.Thread(target=poll, daemon=True)
        thread.start()

        def say(step: str) -> None:
            console.print(f"[dim][{time.monotonic() - started:7.1f} s][/dim] {step}")
            bar.update(task, description=step, total=None, completed=0)

        try:
            yield say
        finally:
            stop.set()
            thread.join(timeout=2)


def _timeline(out: Path, summary: Summary, tables: dict[str, list[dict[str, Any]]],
              console: Console) -> None:
    from ..pipeline._timeline import draw_timeline, write_html

    png = draw_timeline(tables["sessions"], tables["disagreement"], tables["name_servers"],
                        out / "timeline.png")
    page = write_html(summary, png, out / "timeline.html")
    console.print(f"timeline: {page} ({png})")


@click.command("analyze")
@click.argument("journals", nargs=-1, required=True)
@click.option("--out", "out_dir", default=None,
              help="Folder for the Parquet tables (any path Spark writes).")
@click.option("--master", default=None, envvar="SPARK_MASTER",
              help="Spark master URL [default: $SPARK_MASTER or local[*]].")
@click.option("--at", "at", multiple=True,
              help="Also report every route at this time (ms, T+H:MM:SS or ISO date-time); "
                   "repeatable.")
@click.option("--strict", is_flag=True, help="Fail if any journal line is rejected.")
@click.option("--partition", type=click.Choice(["ns", "group"]), default="ns",
              show_default=True,
              help="Read and replay per name server, or replay per broker-group set.")
@click.option("--local", "local_engine", is_flag=True,
              help="Run the pure-Python reference in this process instead of Spark.")
@click.option("--to-parquet", "to_parquet_dir", default=None,
              help="Only copy the journals to Parquet in this folder (fast re-reading).")
@click.option("--timeline", is_flag=True,
              help="Also draw timeline.png and timeline.html into --out (local folder).")
@click.option("--driver-memory", default=None, help="Spark driver memory, e.g. 2g.")
def analyze_command(journals: Sequence[str], out_dir: str | None, master: str | None,
                    at: Sequence[str], strict: bool, partition: str, local_engine: bool,
                    to_parquet_dir: str | None, timeline: bool,
                    driver_memory: str | None) -> None:
    """Analyze name-server JOURNALS (files or folders: JSON Lines, .gz, or Parquet copies).

    Writes the tables sessions, expiries, route_changes, routes_at, disagreement,
    disagreement_totals, availability, rejected and name_servers as Parquet under --out,
    and prints a summary. Bad lines never fail the run (unless --strict); they are in the
    rejected table with file, line and reason.
    """
    console = Console()
    times = [parse_time(t) for t in at]
    if to_parquet_dir is None and out_dir is None:
        raise click.UsageError("--out is required (or --to-parquet to copy only)")
    if local_engine:
        if to_parquet_dir is not None:
            raise click.UsageError("--to-parquet needs Spark; drop --local")
        assert out_dir is not None
        started = time.monotonic()
        try:
            rows = analyze_local(list(journals), at=times, strict=strict)
        except RejectedRecords as exc:
            raise click.ClickException(str(exc)) from None
        except FileNotFoundError as exc:
            raise click.ClickException(str(exc)) from None
        write_local_tables(rows, Path(out_dir))
        summary = summarize_rows(rows)
        render(summary, console, title="routing analyze --local")
        console.print(f"tables: {out_dir} ({time.monotonic() - started:.1f} s)")
        if timeline:
            _timeline(Path(out_dir), summary, rows, console)
        return
    master = master or default_master()
    from pyspark.sql import SparkSession

    owned = SparkSession.getActiveSession() is None  # stop it at the end only if ours
    try:
        spark = spark_session(master, driver_memory=driver_memory)
    except SparkUnavailable as exc:
        raise click.ClickException(f"{exc} (or use --local to run without Spark)") from None
    try:
        _run_spark(spark, console, master, journals, out_dir, times, strict, partition,
                   to_parquet_dir, timeline)
    finally:
        if owned:  # a clean stop: local-cluster executors otherwise die noisily at exit
            spark.stop()


def _run_spark(spark: Any, console: Console, master: str, journals: Sequence[str],
               out_dir: str | None, times: list[int], strict: bool, partition: str,
               to_parquet_dir: str | None, timeline: bool) -> None:
    from ..pipeline._spark import analyze, to_parquet

    started = time.monotonic()
    if to_parquet_dir is not None:
        n = to_parquet(spark, list(journals), to_parquet_dir)
        console.print(f"wrote {n:,} lines to {to_parquet_dir} in "
                      f"{time.monotonic() - started:.1f} s")
        return
    assert out_dir is not None
    with spark_progress(console, spark) as say:
        try:
            analysis = analyze(spark, list(journals), at=times, strict=strict,
                               partition=partition, progress=say)
        except RejectedRecords as exc:
            raise click.ClickException(str(exc)) from None
        except FileNotFoundError as exc:
            raise click.ClickException(str(exc)) from None
        say(f"writing Parquet to {out_dir}")
        analysis.write(out_dir)
        say("summarising")
        summary = summarize_analysis(analysis)
    render(summary, console, title=f"routing analyze on {master}")
    console.print(f"tables: {out_dir} ({time.monotonic() - started:.1f} s on {master}, "
                  f"replay partitions per name server: "
                  f"{dict(sorted(analysis.partitions.items()))})")
    if timeline:
        small = {name: [r.asDict(recursive=True) for r in analysis[name].collect()]
                 for name in ("sessions", "disagreement", "name_servers")}
        _timeline(Path(out_dir), summary, small, console)
    analysis.unpersist()
