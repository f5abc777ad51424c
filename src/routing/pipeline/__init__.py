"""routing.pipeline — name-server journals turned into answers, on PySpark or in one process.

Two engines run the same stages — **read** the journals' lines, **replay** each name server
(``_read_replay.py``: one loop for both), **sweep** each topic's answers, **write** the
tables, **summarize** — and return the same rows (the differential tests compare them):

* `analyze` runs on a `SparkSession` (embedded ``local[*,2]`` from `spark_session`, any
  cluster, a Spark Connect server through `remote_session`) and returns an `Analysis`
  (the tables as DataFrames: `Analysis.write`, `Analysis.summary_rows`);
* `analyze_local` (and `analyze_local_to`, which writes Parquet) computes them in this
  process: the reference.

`start_watch` (``routing watch``) runs the same read→replay loop live, on Spark Structured
Streaming over a folder of rotated journals: incidents as they happen, the final rows
appended per micro-batch; `live_tables` (`write_live_tables`: as Parquet) are the tables
they add up to (equal to the batch run's once a folder is consumed); `LiveMetrics` its
Prometheus metrics (`parse_host_port` reads ``--metrics``); on Spark Connect, `LiveRelay`
copies the delivered incidents and metrics to the client; `WATCH_SETTINGS` the Spark
settings a long-running watcher's session starts with (bounded memory).

`TABLES` describes every table (``docs/pipeline.md`` too). `check_inputs` checks journal
paths before any work starts; `summarize_rows`, `render_summary`, `summary_json`,
`write_report` and `draw_timeline` turn either engine's rows into the summary, its JSON,
the report page and its picture. Every error raised on purpose is a `routing.RoutingError`
(`InputError`, `RejectedRecords`, `SparkUnavailable`, `WatchUnsupported`,
`routing.InvalidRequest`).

Each name's docstring states its cost. pyspark is imported only when a Spark function runs
(`analyze`, `Analysis` and `to_parquet` load their modules on first use), so
``import routing.pipeline`` and `analyze_local` work without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._connect import redacted, remote_session
from ._errors import (
    InputError,
    JournalNotFound,
    RejectedRecords,
    SparkUnavailable,
    WatchUnsupported,
)
from ._files import InputCheck, check_inputs
from ._incidents import DEFAULT_INCIDENT_GAP_MS
from ._live_metrics import LiveMetrics, parse_host_port
from ._live_order import DEFAULT_REORDER_WAIT_MS
from ._live_relay import LiveRelay
from ._live_spark import WATCH_SETTINGS, live_tables, start_watch, write_live_tables
from ._reference import analyze_local, analyze_local_to
from ._report import write_report
from ._schema import TABLES, Column, Table
from ._session import (
    check_java,
    check_pyspark,
    default_master,
    is_connect,
    spark_session,
    stop_session,
)
from ._summary import Summary, plural, render_summary, summarize_rows, summary_json
from ._timeline import draw_timeline

if TYPE_CHECKING:
    from ._spark import analyze
    from ._spark_lines import to_parquet
    from ._spark_tables import Analysis

__all__ = (
    "DEFAULT_INCIDENT_GAP_MS",
    "DEFAULT_REORDER_WAIT_MS",
    "TABLES",
    "WATCH_SETTINGS",
    "Analysis",
    "Column",
    "InputCheck",
    "InputError",
    "LiveMetrics",
    "LiveRelay",
    "JournalNotFound",
    "RejectedRecords",
    "SparkUnavailable",
    "Summary",
    "Table",
    "WatchUnsupported",
    "analyze",
    "analyze_local",
    "analyze_local_to",
    "check_inputs",
    "check_java",
    "check_pyspark",
    "default_master",
    "draw_timeline",
    "is_connect",
    "live_tables",
    "parse_host_port",
    "plural",
    "redacted",
    "remote_session",
    "render_summary",
    "spark_session",
    "start_watch",
    "stop_session",
    "summarize_rows",
    "summary_json",
    "to_parquet",
    "write_live_tables",
    "write_report",
)

def __getattr__(name: str) -> Any:
    """The Spark engine's names, loaded on first use (their modules import no pyspark at
    the top either)."""
    if name == "analyze":
        from ._spark import analyze

        return analyze
    if name == "Analysis":
        from ._spark_tables import Analysis

        return Analysis
    if name == "to_parquet":
        from ._spark_lines import to_parquet

        return to_parquet
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
