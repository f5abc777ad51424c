"""The progress bar's task counts (`SparkTasks`) against a real Spark status tracker: after
a run every task of its jobs is done, and a later tracker does not count earlier runs."""

from __future__ import annotations

from typing import Any

from pipeline_scenarios import play
from routing.cli._progress import SparkTasks
from routing.pipeline import analyze


def test_every_task_of_a_finished_run_is_done(spark: Any) -> None:
    tracker = spark.sparkContext.statusTracker()
    tasks = SparkTasks(tracker)
    journals = play([("register", 3, 0, 0, 0, 0, [0, 1], 0, 0, None, False, 4, True),
                     ("advance", 130_000), ("delete", 1, 1, None)], nameservers=2)
    analysis = analyze(spark, journals)
    rows = analysis.collect()
    analysis.unpersist()
    assert rows["availability"]
    done, total = tasks.poll()
    assert total > 0 and done == total
    assert SparkTasks(tracker).poll() == (0, 0)
