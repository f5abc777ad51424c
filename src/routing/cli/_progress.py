"""Progress of a run, on stderr only (stdout keeps the summary, so ``> summary.txt`` and pipes
get nothing else).

On a terminal: one live rich bar for the whole run — the step, done of total (Spark tasks,
polled from Spark's status tracker, see `SparkTasks`, or reported by a Spark Connect
server, `ConnectTasks`; or journal bytes read by ``--local``'s reader, a total known from
the start), the rate and the time left; each step is also printed as a line with the
elapsed time. Elsewhere (a file, a pipe, cron, CI): one
plain line per step, ``[  12.3 s] step``, and nothing else.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from rich.console import Console

from ..pipeline import InputCheck, is_connect

__all__ = ["RunProgress", "SparkTasks", "counted_sources", "spark_progress"]


class RunProgress:
    """The run's reporter: `step` names the current step, `update` moves the bar."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.started = time.monotonic()
        self.live = console.is_terminal
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> RunProgress:
        if self.live:
            from rich.progress import (
                BarColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=24),
                TextColumn("{task.fields[done]}"), TextColumn("{task.fields[rate]}"),
                TextColumn("left"), TimeRemainingColumn(), console=self.console,
                transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task("starting", total=None, done="", rate="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def step(self, text: str) -> None:
        """A new step: a plain line (kept above the bar on a terminal)."""
        stamp = f"[{self.elapsed():7.1f} s]"
        if self._bar is None:
            self.console.print(f"{stamp} {text}", highlight=False, soft_wrap=True)
        else:
            self.console.print(f"[dim]{stamp}[/dim] {text}", highlight=False)
            # the bar's label is short (the whole step is the line printed above it)
            short = text if len(text) <= 24 else text[:23] + "…"
            self._bar.update(self._task, description=short)

    def update(self, done: float, total: float | None, unit: str, scale: float = 1.0) -> None:
        """The bar at ``done`` of ``total`` (shown in ``unit`` after dividing by ``scale``)."""
        if self._bar is None:
            return
        task = self._bar.tasks[0]
        speed = task.speed
        self._bar.update(
            self._task, completed=done, total=total,
            done=f"{done / scale:,.1f}/{(total or 0) / scale:,.1f} {unit}" if scale != 1
            else f"{done:,.0f}/{total or 0:,.0f} {unit}",
            rate=f"{(speed or 0) / scale:,.1f} {unit}/s" if speed else "")


class SparkTasks:
    """Tasks done and to do of the Spark jobs started since it was made, from Spark's
    status tracker (``spark.sparkContext.statusTracker()``).

    A job's stages are all known when it starts (``getJobInfo(...).stageIds``, the pending
    ones included), so the total does not grow while a job runs; a stage shared by several
    jobs counts once; once a job has ended, its stages count the tasks that ran (a stage
    Spark skipped, its output already there, drops out). Jobs are found among all known
    jobs (not only the active ones), so one that starts and ends between two polls still
    counts. What cannot be known: the jobs the pipeline has not started yet (it starts
    them one after another, some depending on the results of earlier ones), so the total
    grows when a new job starts."""

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker
        self.before = set(tracker.getJobIdsForGroup(None))  # jobs of earlier runs
        self.completed: dict[int, int] = {}  # most completed tasks seen per stage
        self.sizes: dict[int, int] = {}  # tasks per stage, as last seen

    def poll(self) -> tuple[int, int]:
        """(done, total) tasks of this run's jobs so far."""
        totals: dict[int, int] = {}
        for job in sorted(set(self.tracker.getJobIdsForGroup(None)) - self.before):
            info = self.tracker.getJobInfo(job)
            if info is None:
                continue
            ended = info.status in ("SUCCEEDED", "FAILED")
            for sid in info.stageIds:
                stage = self.tracker.getStageInfo(sid)
                ran = self.completed.get(sid, 0)
                if stage is not None:  # None: the status store let it go; keep what it said
                    ran = self.completed[sid] = max(ran, stage.numCompletedTasks)
                    self.sizes[sid] = stage.numTasks
                planned = ran if ended else max(ran, self.sizes.get(sid, 0))
                totals[sid] = max(totals.get(sid, 0), planned)
        done = sum(min(self.completed.get(sid, 0), n) for sid, n in totals.items())
        return done, sum(totals.values())


class ConnectTasks:
    """Tasks done and to do of a Spark Connect session's operations since it was
    registered (``spark.registerProgressHandler(tasks)``): the server reports each
    operation's stages (tasks, completed tasks) as it runs, every
    ``spark.connect.progress.reportInterval``. The counts follow `SparkTasks`'s rules: a
    stage counts once whatever operations share it, its total is its tasks while its
    operation runs and the tasks that ran once the operation has ended (a skipped stage
    drops out). Thread-safe: operations run from several threads (the background sweep)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stages: dict[int, tuple[int, int]] = {}  # stage id: (tasks, most completed)
        self._operations: dict[int, set[str]] = {}  # stage id: operations reporting it
        self._ended: set[str] = set()  # operations that have ended

    def __call__(self, stages: Any, inflight_tasks: int, operation_id: str | None,
                 done: bool) -> None:
        operation = operation_id or ""
        with self._lock:
            for stage in stages or ():
                ran = max(self._stages.get(stage.stage_id, (0, 0))[1],
                          stage.num_completed_tasks)
                self._stages[stage.stage_id] = (stage.num_tasks, ran)
                self._operations.setdefault(stage.stage_id, set()).add(operation)
            if done:
                self._ended.add(operation)

    def poll(self) -> tuple[int, int]:
        """(done, total) tasks of the operations reported so far."""
        with self._lock:
            done = sum(min(ran, n) for n, ran in self._stages.values())
            total = sum(ran if self._operations[sid] <= self._ended else max(n, ran)
                        for sid, (n, ran) in self._stages.items())
        return done, total


@contextmanager
def spark_progress(console: Console, spark: Any = None) -> Iterator[Callable[[str], None]]:
    """A step reporter for a Spark run (see the module's doc); yields ``say(step)``. The
    bar counts the tasks of the Spark jobs started so far (`SparkTasks`; on Spark Connect,
    which has no status tracker for the client, those the server reports: `ConnectTasks`)."""
    with RunProgress(console) as progress:
        stop = threading.Event()

        def poll(tasks: SparkTasks | ConnectTasks) -> None:
            while not stop.wait(0.3):
                try:
                    done, total = tasks.poll()
                except Exception:  # the context is shutting down
                    return
                if total:
                    progress.update(done, total, "tasks so far")

        thread = None
        handler: ConnectTasks | None = None
        if progress.live and spark is not None:
            tasks: SparkTasks | ConnectTasks
            if is_connect(spark):  # no status tracker: the server reports progress
                tasks = handler = ConnectTasks()
                spark.registerProgressHandler(handler)
            else:  # before the first step: the jobs known now belong to earlier runs
                tasks = SparkTasks(spark.sparkContext.statusTracker())
            thread = threading.Thread(target=poll, args=(tasks,), daemon=True)
            thread.start()
        try:
            yield progress.step
        finally:
            stop.set()
            if thread is not None:
                thread.join(timeout=2)
            if handler is not None:
                spark.removeProgressHandler(handler)


def counted_sources(check: InputCheck, progress: RunProgress
                    ) -> Mapping[str, Any] | None:
    """``{source: lines}`` for `analyze_local` that moves the bar as its reader goes (MB of
    the journals read so far, of `InputCheck.total_bytes`; at most every 0.2 s), or None
    when a Parquet copy is among them (then the paths are read directly; the bar only shows
    the steps). Lines and their numbers are those of the paths themselves
    (`InputCheck.counted_lines`)."""
    last = [0.0]

    def report(done: int) -> None:
        now = time.monotonic()
        if now - last[0] > 0.2 or done >= check.total_bytes:
            last[0] = now
            progress.update(done, check.total_bytes, "MB", 1e6)

    return check.counted_lines(report)
