"""Spark's own task metrics of the read-and-replay tasks, from an event log: how much the
replay spreads (total task time ÷ longest task) and the wall time it would take on more
cores.

Enable the event log (``spark.eventLog.enabled=true``, ``spark.eventLog.dir=DIR``: for
``routing analyze`` a ``spark-defaults.conf`` in ``$SPARK_CONF_DIR``), run, then
``python -m benchmarks.task_metrics DIR_OR_FILE`` prints one JSON document. The replay
tasks are those of the jobs described as ``routing.pipeline._spark_rows.REPLAY_JOB`` (the
segment tasks of ``partition="ns"``, the whole-file or per-name-server tasks otherwise).

A task's time is its wall time in Spark (``Finish Time - Launch Time``). *Work* is their
sum, *span* the longest. On P cores the replay takes at least ``max(span, work / P)``
(the bound); ``greedy`` is the list schedule Spark's FIFO scheduler makes: the tasks in
launch order, each on the core that frees first. ``measured`` is the replay stages' own
wall time (first launch to last finish) on the cores this run had, beside the greedy
projection for that many cores: the check of the model.
"""

from __future__ import annotations

import heapq
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from routing.pipeline._spark_rows import REPLAY_JOB

CORES = (2, 8, 32, 128)


def _log_files(path: Path) -> list[Path]:
    """The files of the newest application's log under ``path`` (a plain log file, or
    Spark 4's rolling ``eventlog_v2_*`` folder of ``events_<n>_*`` files, in order)."""
    if path.is_dir() and not path.name.startswith("eventlog_v2_"):
        entries = [p for p in path.iterdir() if not p.name.startswith(".")]
        if not entries:
            return []
        path = max(entries, key=lambda p: p.stat().st_mtime)
    if not path.is_dir():
        return [path]
    parts = [p for p in path.iterdir() if p.name.startswith("events_")]
    return sorted(parts, key=lambda p: int(p.name.split("_")[1]))


def _events(path: Path) -> Iterable[dict[str, Any]]:
    for file in _log_files(path):
        with open(file, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    yield json.loads(line)


def replay_tasks(path: Path) -> list[tuple[int, int]]:
    """(launch, finish) ms of every successful task of the replay jobs, in launch order."""
    stages: set[int] = set()
    tasks: list[tuple[int, int]] = []
    for event in _events(path):
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            described = (event.get("Properties") or {}).get("spark.job.description")
            if described == REPLAY_JOB:
                stages.update(event.get("Stage IDs", []))
        elif kind == "SparkListenerTaskEnd" and event.get("Stage ID") in stages:
            info = event["Task Info"]
            if not info.get("Failed") and not info.get("Killed"):
                tasks.append((int(info["Launch Time"]), int(info["Finish Time"])))
    return sorted(tasks)


def greedy(durations: Sequence[float], cores: int) -> float:
    """The makespan of ``durations`` in order, each on the core that frees first."""
    free = [0.0] * cores
    for d in durations:
        heapq.heapreplace(free, free[0] + d)
    return max(free) if durations else 0.0


def summary(tasks: Sequence[tuple[int, int]], cores: Sequence[int] = CORES) -> dict[str, Any]:
    """Work, span, their ratio and the projections (seconds)."""
    durations = [(b - a) / 1000 for a, b in tasks]
    if not durations:
        return {"tasks": 0}
    work, span = sum(durations), max(durations)
    return {
        "tasks": len(durations), "work_s": round(work, 2), "span_s": round(span, 2),
        "work_over_span": round(work / span, 2) if span else None,
        "measured_wall_s": round((max(b for _a, b in tasks) - min(a for a, _b in tasks))
                                 / 1000, 2),
        "projected_s": {str(p): {"bound": round(max(span, work / p), 2),
                                 "greedy": round(greedy(durations, p), 2)} for p in cores}}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m benchmarks.task_metrics EVENT_LOG_DIR_OR_FILE", file=sys.stderr)
        return 2
    print(json.dumps(summary(replay_tasks(Path(args[0])))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
