"""``routing watch``: the click command of the live watcher (``routing.pipeline.start_watch``).

Incidents go to stdout (or ``--incidents FILE``) as JSON lines, progress to stderr; the final
rows go to ``--out``, and when the watcher stops (``--once`` at the end of the folder,
Ctrl-C or SIGTERM otherwise) the ``routing analyze`` tables they add up to are written to
``OUT/tables``.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import click
from rich.console import Console

from .. import InvalidRequest
from ..pipeline import (
    DEFAULT_REORDER_WAIT_MS,
    WATCH_SETTINGS,
    LiveMetrics,
    LiveRelay,
    SparkUnavailable,
    check_pyspark,
    default_master,
    parse_host_port,
    redacted,
    remote_session,
    spark_session,
    start_watch,
    stop_session,
    write_live_tables,
)
from ._analyze import parse_time

__all__ = ["watch_command"]


@click.command("watch")
@click.argument("folder", type=click.Path(exists=True, file_okay=False))
@click.option("--out", "out_dir", required=True,
              help="Folder for the final rows (appended per micro-batch) and, when the "
                   "watcher stops, the routing analyze tables (OUT/tables).")
@click.option("--checkpoint", default=None,
              help="Checkpoint folder: restart from where the last run stopped "
                   "[default: OUT/_checkpoint].")
@click.option("--incidents", default=None, metavar="FILE",
              help="Append incidents (JSON lines) to FILE, each once [default: stdout].")
@click.option("--metrics", default=None, metavar="HOST:PORT",
              help="Serve Prometheus metrics there (needs the metrics extra).")
@click.option("--trigger", "trigger_ms", default=1000, show_default=True, type=int,
              metavar="MS", help="Micro-batch interval (ms); 0: as soon as the last ends.")
@click.option("--max-files", default=None, type=int,
              help="At most this many new files a micro-batch.")
@click.option("--reorder-wait", "reorder_wait_ms", default=None, type=int, metavar="MS",
              help="Hold a name server's rotated file that arrives before an earlier one "
                   "this long (processing time) for the missing file; then the gap is "
                   f"reported. 0: never hold [default: {DEFAULT_REORDER_WAIT_MS}; 0 with "
                   "--once: nothing more will arrive].")
@click.option("--once", is_flag=True,
              help="Process the files there now, write the tables, and stop.")
@click.option("--at", "at", multiple=True,
              help="For the tables: also report every route at this time; repeatable.")
@click.option("--master", default=None, envvar="SPARK_MASTER",
              help="Spark master URL [default: $SPARK_MASTER or local[*,2]].")
@click.option("--remote", default=None, envvar="SPARK_REMOTE", metavar="sc://HOST[:PORT]",
              help="Run on a Spark Connect server instead (it reads FOLDER and writes OUT).")
@click.option("--driver-memory", default=None, help="Spark driver memory, e.g. 2g.")
def watch_command(folder: str, out_dir: str, checkpoint: str | None, incidents: str | None,
                  metrics: str | None, trigger_ms: int, max_files: int | None,
                  reorder_wait_ms: int | None, once: bool,
                  at: Sequence[str], master: str | None, remote: str | None,
                  driver_memory: str | None) -> None:
    """Watch FOLDER of rotated name-server journals on Spark Structured Streaming.

    Each name server is replayed as its new files appear (its state kept in Spark's state
    store), and every incident is written once as a JSON line: broker_expired,
    channel_closed, topic_unwritable, topic_writable, disagreement, agreement_restored.
    """
    err = Console(stderr=True)
    times = [parse_time(t) for t in at]
    if trigger_ms < 0:
        raise click.BadParameter("must be 0 or more", param_hint="--trigger")
    if max_files is not None and max_files < 1:
        raise click.BadParameter("must be 1 or more", param_hint="--max-files")
    if reorder_wait_ms is None:
        reorder_wait_ms = 0 if once else DEFAULT_REORDER_WAIT_MS
    if reorder_wait_ms < 0:
        raise click.BadParameter("must be 0 or more", param_hint="--reorder-wait")
    meter: LiveMetrics | None = None
    if metrics is not None:
        try:
            host, port = parse_host_port(metrics)
        except InvalidRequest as exc:
            raise click.BadParameter(str(exc), param_hint="--metrics") from None
        try:
            meter = LiveMetrics()
        except ImportError:
            raise click.ClickException(
                "--metrics needs prometheus-client: pip install "
                "'rocketmq-routing[metrics]'") from None
        bound = meter.serve(host, port)
        err.print(f"metrics: http://{host}:{bound}/metrics", highlight=False)
    out = Path(out_dir)
    marks = Path(checkpoint) if checkpoint is not None else out / "_checkpoint"
    try:
        if remote is not None:
            where = redacted(remote)
            spark = remote_session(remote)
            owned = True
        else:
            check_pyspark()
            from pyspark.sql import SparkSession

            where = master or default_master()
            owned = SparkSession.getActiveSession() is None
            spark = spark_session(where, app_name="routing-watch",
                                  driver_memory=driver_memory, conf=WATCH_SETTINGS)
    except SparkUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    except InvalidRequest as exc:
        raise click.BadParameter(str(exc), param_hint="--remote") from None
    try:
        _watch(spark, err, folder, out, marks, incidents, meter, trigger_ms, max_files,
               once, where, relayed=remote is not None, reorder_wait_ms=reorder_wait_ms)
        target = write_live_tables(out, at=times)
        err.print(f"tables: {target}", highlight=False, soft_wrap=True)
    finally:
        if meter is not None:
            meter.close()
        if owned:
            stop_session(spark)


def _watch(spark: Any, err: Console, folder: str, out: Path, marks: Path,
           incidents: str | None, meter: LiveMetrics | None, trigger_ms: int,
           max_files: int | None, once: bool, where: str, *, relayed: bool,
           reorder_wait_ms: int) -> None:
    """Run the query until it ends (``once``) or is asked to stop (SIGINT, SIGTERM).
    ``relayed`` (Spark Connect: the sink runs on the server): the sink writes incidents to
    ``--incidents`` or ``CHECKPOINT/incidents.jsonl``, and a `LiveRelay` copies them to
    stdout and feeds the metrics, every half second."""
    relay: LiveRelay | None = None
    if relayed:
        written = incidents if incidents is not None else str(marks / "incidents.jsonl")
        relay = LiveRelay(written, marks, out, metrics=meter,
                          stream=sys.stdout if incidents is None else None)
        incidents, meter = written, None
    query = start_watch(spark, folder, out, marks, incidents=incidents,
                        trigger_ms=trigger_ms or None, available_now=once,
                        max_files=max_files, metrics=meter,
                        reorder_wait_ms=reorder_wait_ms)
    started = time.monotonic()
    err.print(f"watching {folder} on {where} (checkpoint {marks})", highlight=False,
              soft_wrap=True)
    stopping = threading.Event()

    def stop(_signum: int, _frame: FrameType | None) -> None:
        stopping.set()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        while query.isActive and not stopping.is_set():
            query.awaitTermination(0.5)
            if relay is not None:
                relay.poll(query.lastProgress)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        query.stop()
        if relay is not None:
            relay.poll(query.lastProgress)
    failure = query.exception()
    if failure is not None:
        raise click.ClickException(f"the watch query failed: {failure}")
    err.print(f"stopped after {time.monotonic() - started:.1f} s", highlight=False)
