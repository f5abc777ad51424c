"""One `analyze` run on the Spark driver: what its stages share.

`SparkRun` holds the session, the progress callback, the fault-injection marker of the
tests (`KILL_WORKER_ENV`) and the frames the stages persisted (``DISK_ONLY``: no partition
is ever held in the JVM heap; `Analysis.unpersist` releases them). `in_background` runs a
Spark action in a thread of its own (the topic sweep's job, started as `analyze` returns).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["KILL_WORKER_ENV", "Progress", "SparkRun", "in_background"]

#: Told the name of each step as it starts.
Progress = Callable[[str], None]

#: Testing only (fault injection): a file path. The first replay task that runs while it is
#: set creates that file (atomically: one task wins) after handing its first batch to Spark,
#: then kills its own Python worker (``os._exit``); Spark must retry the task and the tables
#: must not change. Read on the driver when `analyze` starts, so it needs no worker setup.
KILL_WORKER_ENV = "ROUTING_TEST_KILL_WORKER_ONCE"


class SparkRun:
    """The session, progress and persisted frames of one `analyze` call. O(1) to make."""

    def __init__(self, spark: Any, progress: Progress | None = None) -> None:
        self.spark = spark
        self.say: Progress = progress or (lambda _step: None)
        #: the marker path of `KILL_WORKER_ENV`, or None
        self.kill = os.environ.get(KILL_WORKER_ENV) or None
        self.persisted: list[Any] = []

    def keep(self, df: Any) -> Any:
        """``df`` persisted on disk (computed once, whatever reads it), to be released by
        `Analysis.unpersist`. Planning only, no job."""
        from pyspark import StorageLevel

        df = df.persist(StorageLevel.DISK_ONLY)
        self.persisted.append(df)
        return df

    def drop(self, *frames: Any) -> None:
        """Release persisted ``frames`` now (a read stage that is redone)."""
        for df in frames:
            df.unpersist()
            self.persisted.remove(df)


def in_background(job: Callable[[], Any], context: Any, pool: str) -> Future[Any]:
    """``job()`` run in a daemon thread (a Spark action: the session runs jobs from
    several threads at once), its jobs in scheduler ``pool`` (a thread's own property:
    PySpark pins each Python thread to a JVM thread; no ``context``, as on Spark Connect:
    the default pool); its result or error in the future. O(1) here; the job's own cost
    runs in the thread."""
    future: Future[Any] = Future()

    def run() -> None:
        if future.set_running_or_notify_cancel():
            try:
                if context is not None:
                    context.setLocalProperty("spark.scheduler.pool", pool)
                future.set_result(job())
            except BaseException as exc:  # handed to whoever waits
                future.set_exception(exc)

    threading.Thread(target=run, name="routing-sweep", daemon=True).start()
    return future
