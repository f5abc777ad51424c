"""``routing analyze``: the click command (click and rich, the ``cli`` extra, are imported only
under `routing.cli`)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from .. import InvalidRequest
from ..pipeline import (
    DEFAULT_INCIDENT_GAP_MS,
    InputCheck,
    InputError,
    RejectedRecords,
    SparkUnavailable,
    Summary,
    analyze_local_to,
    check_inputs,
    check_pyspark,
    default_master,
    draw_timeline,
    plural,
    redacted,
    remote_session,
    render_summary,
    spark_session,
    stop_session,
    summarize_rows,
    write_report,
)
from ..pipeline import summary_json as summary_json_of
from ._progress import RunProgress, counted_sources, spark_progress

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


def _stdout_console() -> Console:
    """The summary's console: as wide as needed when stdout is not a terminal (a file or a
    pipe gets whole names, never ``DefaultClu…``)."""
    console = Console()
    return console if console.is_terminal else Console(width=1000)


def _check(journals: Sequence[str], err: Console) -> InputCheck:
    """Check the inputs before anything starts; say what was skipped (on stderr)."""
    try:
        check = check_inputs(journals)
    except InputError as exc:
        raise click.ClickException(str(exc)) from None
    for path, why in check.skipped:
        err.print(f"skipped {path}: {why}", highlight=False, soft_wrap=True)
    return check


def _check_pyarrow() -> None:
    """``--local`` writes its tables as Parquet with pyarrow, which only the ``spark``
    extra brings: say so before anything runs (a ``[cli]``-only install has no pyarrow)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise click.ClickException(
            "--local writes the tables as Parquet with pyarrow, which is not installed: "
            "pip install pyarrow (or 'rocketmq-routing[spark]', which has it)") from None


def _outputs(out: Path, summary: Summary, rows: Mapping[str, Sequence[dict[str, Any]]],
             console: Console, *, report: bool, summary_json: str | None,
             title: str = "routing analyze") -> None:
    if summary_json is not None:
        target = Path(summary_json)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(summary_json_of(summary), indent=1) + "\n",
                          encoding="utf-8")
        console.print(f"summary JSON: {target}", highlight=False, soft_wrap=True)
    if report:
        png = draw_timeline(rows["sessions"], rows["disagreement"], rows["name_servers"],
                            out / "timeline.png")
        page = write_report(rows, summary, out / "report.html", title=title)
        console.print(f"report: {page} (picture: {png})", highlight=False, soft_wrap=True)


def _remote(remote: str | None, *, local_engine: bool, master: str | None,
            driver_memory: str | None) -> str | None:
    """The Spark Connect URL to run on, or None. The command line wins over the
    environment: ``--remote`` beside ``--local``, ``--master`` or ``--driver-memory`` given
    on the command line is an error; a ``$SPARK_REMOTE`` beside them yields (and is
    dropped from this process's environment, or pyspark's builder would open a Connect
    session anyway); ``--remote`` (or ``$SPARK_REMOTE``) wins over a ``$SPARK_MASTER``."""
    if remote is None:
        return None
    source = click.get_current_context().get_parameter_source

    def given(name: str, value: object) -> bool:
        return bool(value) and source(name) is click.core.ParameterSource.COMMANDLINE

    if not (local_engine or given("master", master) or given("driver_memory", driver_memory)):
        return remote
    if source("remote") is click.core.ParameterSource.ENVIRONMENT:
        os.environ.pop("SPARK_REMOTE", None)
        return None
    raise click.UsageError("--remote runs on a Spark Connect server: drop --local, "
                           "--master and --driver-memory (the server's settings)")


@click.command("analyze")
@click.argument("journals", nargs=-1, required=True)
@click.option("--out", "out_dir", default=None,
              help="Folder for the Parquet tables (any path Spark writes).")
@click.option("--master", default=None, envvar="SPARK_MASTER",
              help="Spark master URL [default: $SPARK_MASTER or local[*,2]: all cores, a "
                   "failed task retried once].")
@click.option("--remote", default=None, envvar="SPARK_REMOTE", metavar="sc://HOST[:PORT]",
              help="Run on a Spark Connect server instead (needs the connect extra; the "
                   "server reads the journal paths) [default: $SPARK_REMOTE].")
@click.option("--at", "at", multiple=True,
              help="Also report every route at this time (ms, T+H:MM:SS or ISO date-time); "
                   "repeatable.")
@click.option("--strict", is_flag=True, help="Fail if any journal line is rejected.")
@click.option("--partition", type=click.Choice(["ns", "ns-whole", "group"]), default="ns",
              show_default=True,
              help="ns: replay each name server's segments between snapshots as tasks of "
                   "their own (each name server whole when its journal has no snapshot); "
                   "ns-whole: each name server in one task; group: per broker-group set.")
@click.option("--local", "local_engine", is_flag=True,
              help="Run the pure-Python reference in this process instead of Spark.")
@click.option("--to-parquet", "to_parquet_dir", default=None,
              help="Only copy the journals to Parquet in this folder (fast re-reading).")
@click.option("--report", "--timeline", "report", is_flag=True,
              help="Also write report.html (interactive, self-contained) and timeline.png "
                   "into --out (a local folder).")
@click.option("--summary-json", default=None, metavar="FILE",
              help="Also write every number of the summary (and every incident) as JSON.")
@click.option("--incident-gap", default=DEFAULT_INCIDENT_GAP_MS, show_default=True, type=int,
              metavar="MS", help="Disagreement windows closer than this (ms) are one "
                                 "incident.")
@click.option("--driver-memory", default=None, help="Spark driver memory, e.g. 2g.")
def analyze_command(journals: Sequence[str], out_dir: str | None, master: str | None,
                    remote: str | None, at: Sequence[str], strict: bool, partition: str,
                    local_engine: bool, to_parquet_dir: str | None, report: bool,
                    summary_json: str | None, incident_gap: int,
                    driver_memory: str | None) -> None:
    """Analyze name-server JOURNALS (files or folders: JSON Lines, .gz, or Parquet copies).

    Writes the tables sessions, expiries, route_changes, routes_at, disagreement,
    disagreement_totals, availability, rejected and name_servers as Parquet under --out,
    and prints a summary. Bad lines never fail the run (unless --strict); they are in the
    rejected table with file, line and reason.
    """
    console = _stdout_console()
    err = Console(stderr=True)
    times = [parse_time(t) for t in at]
    if to_parquet_dir is None and out_dir is None:
        raise click.UsageError("--out is required (or --to-parquet to copy only)")
    if incident_gap < 0:
        raise click.BadParameter("must be 0 or more", param_hint="--incident-gap")
    if local_engine and to_parquet_dir is not None:
        raise click.UsageError("--to-parquet needs Spark; drop --local")
    remote = _remote(remote, local_engine=local_engine, master=master,
                     driver_memory=driver_memory)
    check = _check(journals, err)  # before any Spark session starts
    # Files skipped for their name are skipped by the readers too and listed in `rejected`;
    # a journal-named file that is not a journal is left out here instead.
    sources = list(journals) if check.skipped_by_name_only else check.paths()
    outputs: dict[str, Any] = {"report": report, "summary_json": summary_json}
    if local_engine:
        assert out_dir is not None
        _check_pyarrow()
        with RunProgress(err) as progress:
            progress.step(f"reading {plural(len(check.journals), 'journal file')} "
                          f"({check.total_bytes / 1e6:,.1f} MB) and replaying them")
            counted = (counted_sources(check, progress)
                       if not check.skipped else None)  # (skipped files: read the paths)
            try:
                rows = analyze_local_to(
                    out_dir, counted if counted is not None else sources, at=times,
                    strict=strict, before_writing=lambda: progress.step(
                        f"writing Parquet to {out_dir}"))
            except (RejectedRecords, InputError, FileNotFoundError) as exc:
                raise click.ClickException(str(exc)) from None
            progress.step("summarising")
            summary = summarize_rows(rows, gap_ms=incident_gap)
            elapsed = progress.elapsed()
        render_summary(summary, console, title="routing analyze --local")
        console.print(f"tables: {out_dir} ({elapsed:.1f} s)", highlight=False, soft_wrap=True)
        _outputs(Path(out_dir), summary, rows, console, **outputs)
        return
    master = master or default_master()
    try:
        if remote is not None:
            master = redacted(remote)  # what the output names: no token
            owned = True  # a Connect session of our own: stop() ends it on the server
            try:
                spark = remote_session(remote)
            except InvalidRequest as exc:  # not a Spark Connect URL
                raise click.BadParameter(str(exc), param_hint="--remote") from None
        else:
            check_pyspark()  # a [cli]-only install: one sentence, not a traceback
            from pyspark.sql import SparkSession

            owned = SparkSession.getActiveSession() is None  # stop it at the end if ours
            spark = spark_session(master, driver_memory=driver_memory)
    except SparkUnavailable as exc:
        raise click.ClickException(f"{exc} (or use --local to run without Spark)") from None
    try:
        _run_spark(spark, console, err, master, sources, out_dir, times, strict, partition,
                   to_parquet_dir, incident_gap, outputs)
    finally:
        if owned:  # a clean stop: local-cluster executors otherwise die noisily at exit
            stop_session(spark)


def _run_spark(spark: Any, console: Console, err: Console, master: str,
               journals: Sequence[str], out_dir: str | None, times: list[int], strict: bool,
               partition: str, to_parquet_dir: str | None, incident_gap: int,
               outputs: dict[str, Any]) -> None:
    from ..pipeline import analyze, to_parquet

    started = time.monotonic()
    if to_parquet_dir is not None:
        with spark_progress(err, spark) as say:
            say(f"copying the journals to Parquet in {to_parquet_dir}")
            try:
                n = to_parquet(spark, list(journals), to_parquet_dir)
            except Exception as exc:  # pyspark's AnalysisException, classic or Connect
                if "PATH_ALREADY_EXISTS" not in str(exc):
                    raise
                raise click.ClickException(
                    f"--to-parquet {to_parquet_dir} already exists: remove it or name "
                    "another folder") from None
        console.print(f"wrote {n:,} lines to {to_parquet_dir} in "
                      f"{time.monotonic() - started:.1f} s", highlight=False, soft_wrap=True)
        return
    assert out_dir is not None
    with spark_progress(err, spark) as say:
        try:
            analysis = analyze(spark, list(journals), at=times, strict=strict,
                               partition=partition, progress=say)
        except (RejectedRecords, InputError, FileNotFoundError) as exc:
            raise click.ClickException(str(exc)) from None
        say(f"writing Parquet to {out_dir}")
        analysis.write(out_dir)
        say("summarising")
        rows = analysis.summary_rows(written=out_dir)
        summary = summarize_rows(rows, gap_ms=incident_gap)
    render_summary(summary, console, title=f"routing analyze on {master}")
    console.print(f"tables: {out_dir} ({time.monotonic() - started:.1f} s on {master}, "
                  f"replay partitions per name server: "
                  f"{dict(sorted(analysis.partitions.items()))})", highlight=False,
                  soft_wrap=True)
    _outputs(Path(out_dir), summary, rows, console, **outputs)
    analysis.unpersist()
