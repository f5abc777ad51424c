"""``routing watch`` on Spark Structured Streaming: a folder of rotated journals, watched.

The query (`start_watch`):

1. **source**: Spark's ``binaryFile`` file source on the folder — one row per new complete
   file (its path and bytes); names starting with ``.`` or ``_`` are ignored (a file being
   written), ``maxFilesPerTrigger`` bounds a micro-batch;
2. **split** (``mapInPandas``, stateless): `_live.split_file` — each file's lines grouped
   by the name server they name, read with the batch rules;
3. **replay** (``groupBy(ns).applyInPandasWithState``): one `_live.LiveReplay` per name
   server, restored from Spark's state store (the default HDFS-backed provider; the state
   is one binary column, `_live.dump_state`), fed the micro-batch's files of that name
   server in name order (early ones held: `_live.LiveReplay.admit`), and stored again:
   O(new lines + state) a micro-batch, never the whole journal;
4. **sink** (``foreachBatch``, `LiveSink`): final rows appended as Parquet and statuses
   (``_live_tables.py``), the topics compared across name servers in event time
   (``_live_topics.TopicWatch``, its state kept per micro-batch in the checkpoint folder),
   incidents delivered once (`IncidentLog`), metrics updated (``_live_metrics.py``).

A checkpoint folder (Spark's offsets, commits and state, plus the incident log's marker)
makes a restart continue where the last committed micro-batch ended; a micro-batch Spark
runs again after a crash produces the same rows and incidents, which the sink writes to
the same files and does not deliver twice. A name server's files are read in name order
within a micro-batch, and a rotated file that arrives before an earlier one is held in
its state for it, up to ``reorder_wait_ms`` (``_live_order.py``). On Spark Connect the
sink runs on the server: incidents go to a file, relayed by the client
(``_live_relay.py``). All times are ms.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from .._validate import check_int
from ._connect import is_connect, session_parallelism
from ._errors import WatchUnsupported
from ._files import kind_in_folder
from ._live import INCIDENT, STATUS, LiveReplay, dump_state, load_state, split_file
from ._live_order import DEFAULT_REORDER_WAIT_MS
from ._live_relay import DELIVERED_MARKER
from ._live_tables import read_live, tables_of, write_atomic, write_batch_tables, write_status
from ._live_topics import TopicWatch
from ._schema import Row

__all__ = ["KILL_AT_BATCH_ENV", "WATCH_SETTINGS", "IncidentLog", "LiveSink", "live_tables",
           "start_watch", "write_live_tables"]

#: Spark settings for a session that runs a watcher for hours (``routing watch`` starts its
#: session with them; they must be set before the session starts). Spark keeps the data
#: of its status pages (jobs, stages, tasks, SQL executions) even with the UI off, up to
#: 1 000 jobs, stages and executions and 100 000 tasks: a watcher runs about 1 job, 2
#: stages, 7 tasks and 2 executions a micro-batch, so that store alone grew for the first
#: ~500 micro-batches (10–25 kB each); here it keeps the last 50. The context cleaner
#: removes a finished micro-batch's shuffle files and accumulators only once a collection
#: has found them unreachable, and the old generation is collected rarely (its own
#: periodic collection: every 30 min by default): every 5 min here (cost: one full
#: collection of the watcher's ~100 MB heap, a fraction of a second). Each micro-batch
#: reads its new files through a file index that caches their listing under a key of its
#: own (never looked up again) in Spark's shared file-status cache, which keeps it up to
#: 250 MB: about 1 kB a file, kept 60 s here.
WATCH_SETTINGS: dict[str, str] = {
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
    "spark.ui.retainedTasks": "500",
    "spark.sql.ui.retainedExecutions": "50",
    "spark.ui.dagGraph.retainedRootRDDs": "50",
    "spark.cleaner.periodicGC.interval": "5min",
    "spark.sql.metadataCacheTTLSeconds": "60",
}

#: Testing only (fault injection): a micro-batch id. The watcher SIGKILLs its own process
#: right after that batch's incidents are written, before they are marked delivered and
#: before Spark commits the batch (the worst place to die).
KILL_AT_BATCH_ENV = "ROUTING_TEST_WATCH_KILL_AT_BATCH"

#: The ``binaryFile`` source's columns (a stream must be given its schema).
_FILE_SCHEMA = "path string, modificationTime timestamp, length long, content binary"
_SPLIT_SCHEMA = "key string, source string, part long, payload binary"
_OUT_SCHEMA = "kind string, key string, body string"
_STATE_SCHEMA = "state binary"


def _local_source(uri: str, folder: str, root: str) -> str:
    """The ``source`` the batch read gives a file of ``folder``: the folder as given joined
    with the file's path inside it (Spark names files by URI)."""
    path = urllib.parse.unquote(urllib.parse.urlparse(uri).path)
    return os.path.join(folder, os.path.relpath(path, root))


def _split(folder: str, root: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def split(frames: Iterator[Any]) -> Iterator[Any]:
        import pickle

        import pandas as pd

        for frame in frames:
            out: list[tuple[str, str, int, bytes]] = []
            for uri, content in zip(frame["path"], frame["content"], strict=True):
                source = _local_source(uri, folder, root)
                journal = kind_in_folder(os.path.basename(source)) == "text"
                for key, piece in split_file(source, bytes(content), journal=journal).items():
                    out.append((key, source, len(out), pickle.dumps(piece, protocol=5)))
            yield pd.DataFrame(out, columns=["key", "source", "part", "payload"])
    return split


def _replay(wait_ms: int) -> Callable[[tuple[Any, ...], Iterator[Any], Any], Iterator[Any]]:
    def replay(key: tuple[Any, ...], frames: Iterator[Any], state: Any) -> Iterator[Any]:
        """One name server's files of the micro-batch, replayed after its stored state:
        in name order, early rotated files held (``_live_order.py``; the hold's bound is
        checked when the name server's next files arrive: no Spark timeout, which would
        keep an ``availableNow`` query from ending)."""
        import pickle

        import pandas as pd

        pieces: list[tuple[str, int, bytes]] = []
        for frame in frames:
            pieces += zip(frame["source"], frame["part"], frame["payload"], strict=True)
        replay = load_state(bytes(state.get[0])) if state.exists else LiveReplay()
        now = int(state.getCurrentProcessingTimeMs())
        name = key[0]
        if name:
            batches = replay.admit(pieces, now, wait_ms)
        else:  # lines naming no name server, rows about whole files: never held
            batches = [pickle.loads(p[2]) for p in sorted(pieces, key=lambda p: (p[0], p[1]))]
        out: list[tuple[str, str, str]] = []
        for lines, notes in batches:
            for table, row in replay.feed(lines, notes):
                out.append((table, name, json.dumps(row)))
        out.append((STATUS, name, json.dumps(replay.status())))
        state.update((dump_state(replay),))
        yield pd.DataFrame(out, columns=["kind", "key", "body"])
    return replay


class IncidentLog:
    """Incidents delivered once per micro-batch, in order, to ``out`` (a file path, or a
    stream such as stdout). A marker file in the checkpoint folder names the last batch
    delivered; for a file it also records its length before the batch being written, so a
    batch cut short by a crash is cut off and written again (exactly once). To a stream,
    a crash between writing and marking can repeat that batch (at least once)."""

    def __init__(self, out: str | os.PathLike[str] | IO[str], marker: Path) -> None:
        self.out = out
        self.marker = marker

    def _mark(self) -> dict[str, int]:
        if self.marker.exists():
            doc: dict[str, int] = json.loads(self.marker.read_text(encoding="utf-8"))
            return doc
        return {"done": -1, "pending": -1, "length": 0}

    def _write_mark(self, done: int, pending: int, length: int) -> None:
        write_atomic(self.marker, json.dumps(
            {"done": done, "pending": pending, "length": length}).encode())

    def deliver(self, batch_id: int, incidents: list[Row],
                between: Callable[[], object] | None = None) -> bool:
        """Write ``incidents`` (JSON lines) unless batch ``batch_id`` was delivered; True
        if written. ``between`` runs after the write, before the marker (tests crash
        there)."""
        mark = self._mark()
        if batch_id <= mark["done"]:
            return False
        text = "".join(json.dumps(i, sort_keys=True) + "\n" for i in incidents)
        if isinstance(self.out, str | os.PathLike):
            path = Path(self.out)
            length = path.stat().st_size if path.exists() else 0
            if mark["pending"] == batch_id:
                length = mark["length"]
            self._write_mark(mark["done"], batch_id, length)
            with open(path, "ab") as handle:
                handle.truncate(length)
                handle.write(text.encode())
                handle.flush()
                os.fsync(handle.fileno())
        else:
            self.out.write(text)
            self.out.flush()
        if between is not None:
            between()
        self._write_mark(batch_id, -1, 0)
        return True


class LiveSink:
    """The ``foreachBatch`` sink: one micro-batch's rows to the output folder, the
    incident log and the metrics (see the module docstring). O(rows of the batch)."""

    def __init__(self, out_dir: Path, incidents: IncidentLog, metrics: Any = None, *,
                 topics: Path, between: Callable[[int], object] | None = None) -> None:
        self.out_dir = out_dir
        self.topics = topics
        self.incidents = incidents
        self.metrics = metrics
        self.between = between
        self.batches = 0

    def __call__(self, frame: Any, batch_id: int) -> None:
        started = time.monotonic()
        final: dict[str, list[Row]] = {}
        statuses: dict[str, Row] = {}
        incidents: list[Row] = []
        # collect(), not toLocalIterator(): Spark 4's scheduler files each job under its
        # SQL execution (``DAGScheduler.activeQueryToJobs``, for rollbacks) and forgets
        # them when the execution ends; toLocalIterator's execution ends as soon as its
        # socket is served, and the jobs it then runs (one a partition) are filed after
        # that and never forgotten, each with its stages, accumulators and result: about
        # 0.75 MB of heap a micro-batch (docs/performance.md, the watcher's memory)
        for kind, key, body in frame.select("kind", "key", "body").collect():
            row = json.loads(body)
            if kind == STATUS:
                statuses[key] = row
            elif kind == INCIDENT:
                incidents.append(row)
            else:
                final.setdefault(kind, []).append(row)
        write_batch_tables(self.out_dir, batch_id, final)
        write_status(self.out_dir, batch_id, statuses)
        watch = TopicWatch.load_before(self.topics, batch_id)
        incidents += watch.batch(final.get("route_changes", ()), statuses)
        watch.save(self.topics, batch_id)
        incidents.sort(key=lambda i: (i["at_ms"], json.dumps(i, sort_keys=True)))
        between = self.between
        delivered = self.incidents.deliver(
            batch_id, incidents, None if between is None else (lambda: between(batch_id)))
        if self.metrics is not None:
            self.metrics.batch(statuses, incidents if delivered else [],
                               disagreeing=watch.disagreeing,
                               seconds=time.monotonic() - started)
        self.batches += 1


def _killer(batch: int) -> Callable[[int], None]:
    def kill(batch_id: int) -> None:
        if batch_id == batch:
            os.kill(os.getpid(), signal.SIGKILL)
    return kill


def live_tables(out_dir: str | os.PathLike[str], *, at: Sequence[int] = ()
                ) -> dict[str, list[Row]]:
    """Every ``routing analyze`` table from a watcher's output folder, as `analyze_local`
    returns them (``_live_tables.tables_of`` of `read_live`). O(rows log rows)."""
    final, statuses = read_live(out_dir)
    return tables_of(final, statuses.values(), at=at)


def write_live_tables(out_dir: str | os.PathLike[str], *, at: Sequence[int] = ()) -> Path:
    """Write `live_tables` as Parquet into ``OUT/tables`` (``<table>/part-00000.parquet``,
    the layout of ``routing analyze --local``), replacing it whole: written under a hidden
    name first, then renamed. Returns the folder. O(rows log rows)."""
    from ._store import write_local_tables

    out = Path(out_dir)
    target, hidden = out / "tables", out / ".tables.tmp"
    shutil.rmtree(hidden, ignore_errors=True)
    write_local_tables(live_tables(out, at=at), hidden)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(hidden, target)
    return target


def _check_connect(incidents: object, metrics: object) -> None:
    """On Spark Connect the sink runs in a server-side process: incidents must go to a
    file and metrics be relayed by the client (`_live_relay.LiveRelay`)."""
    if not isinstance(incidents, str | os.PathLike):
        raise WatchUnsupported(
            "on Spark Connect, incidents must go to a file (the sink runs on the server): "
            "relay them to a stream with routing.pipeline.LiveRelay",
            field="incidents", value=repr(incidents))
    if metrics is not None:
        raise WatchUnsupported(
            "on Spark Connect, metrics are updated by the client: pass metrics to "
            "routing.pipeline.LiveRelay instead", field="metrics", value=repr(metrics))


def start_watch(spark: Any, folder: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                checkpoint: str | os.PathLike[str], *,
                incidents: str | os.PathLike[str] | IO[str] | None = None,
                trigger_ms: int | None = None, available_now: bool = False,
                max_files: int | None = None, metrics: Any = None,
                reorder_wait_ms: int | None = None,
                between: Callable[[int], object] | None = None) -> Any:
    """Start watching ``folder`` on ``spark``; return the ``StreamingQuery`` (stop it, or
    wait: `available_now` processes what is there and ends).

    ``out_dir`` receives the final rows and statuses (``_live_tables.read_live``,
    ``tables_of``), ``checkpoint`` Spark's checkpoint and the incident marker; incidents
    go to ``incidents`` (a path, appended; or a text stream; default stdout).
    ``trigger_ms``: the micro-batch interval (default: as soon as the last one ends);
    ``max_files``: at most this many new files a micro-batch. ``reorder_wait_ms``: how long
    (processing time) a name server's rotated file that arrives before an earlier one is
    held for it (``_live_order.py``; 0: never held, the gap reported at once; default
    `DEFAULT_REORDER_WAIT_MS`, 0 with ``available_now``: nothing more will arrive);
    `routing.InvalidRequest` naming it if negative.
    ``between`` (tests) runs after a batch's incidents are written, before they are
    marked delivered.

    Cost a micro-batch: O(new lines) of Python work (one JSON parse a line to split, the
    batch engine's replay, about 5 µs a record on its steady lane) plus O(state) per name
    server it touches (its state unpickled and pickled again: about 3 ms for 20 broker
    groups), a shuffle of the split lines by name server, and the sink's O(rows) writes."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    if reorder_wait_ms is None:
        reorder_wait_ms = 0 if available_now else DEFAULT_REORDER_WAIT_MS
    check_int("reorder_wait_ms", reorder_wait_ms, low=0)
    connect = is_connect(spark)
    if connect:
        _check_connect(incidents, metrics)
    kill_at = os.environ.get(KILL_AT_BATCH_ENV)
    if between is None and kill_at is not None:
        between = _killer(int(kill_at))
    given = os.fspath(folder)
    root = str(Path(given).resolve())
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    marks = Path(checkpoint)
    marks.mkdir(parents=True, exist_ok=True)
    log = IncidentLog(sys.stdout if incidents is None else incidents,
                      marks / DELIVERED_MARKER)
    if connect and not (marks / "spark").exists():
        # a new query's state partitions (Connect servers default to 200 a batch)
        spark.conf.set("spark.sql.shuffle.partitions", str(2 * session_parallelism(spark)))
    reader = spark.readStream.format("binaryFile").schema(_FILE_SCHEMA)
    if max_files is not None:
        reader = reader.option("maxFilesPerTrigger", max_files)
    files = reader.load(root).select("path", "content")
    lines = files.mapInPandas(_split(given, root), _SPLIT_SCHEMA)
    rows = lines.groupBy("key").applyInPandasWithState(
        _replay(reorder_wait_ms), _OUT_SCHEMA, _STATE_SCHEMA, "append",
        GroupStateTimeout.NoTimeout)
    sink = LiveSink(out, log, metrics, topics=marks / "topics", between=between)
    writer = rows.writeStream.foreachBatch(sink).queryName("routing-watch") \
        .option("checkpointLocation", str(marks / "spark"))
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif trigger_ms is not None:
        writer = writer.trigger(processingTime=f"{int(trigger_ms)} milliseconds")
    return writer.start()
