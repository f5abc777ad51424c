"""The Spark progress bar's counts (`routing.cli._progress.SparkTasks`) on a fake status
tracker that plays Spark's answers step by step: a job's stages all count when it starts,
a stage shared by two jobs counts once, a skipped stage drops out when its job ends, a job
that started and ended between two polls still counts, and jobs of earlier runs do not."""

from __future__ import annotations

from typing import NamedTuple

from routing.cli._progress import ConnectTasks, SparkTasks


class _Job(NamedTuple):
    jobId: int
    stageIds: list[int]
    status: str


class _Stage(NamedTuple):
    stageId: int
    numTasks: int
    numCompletedTasks: int


class _Tracker:
    """The parts of pyspark's ``StatusTracker`` that `SparkTasks` reads."""

    def __init__(self) -> None:
        self.jobs: dict[int, _Job] = {}
        self.stages: dict[int, _Stage] = {}

    def job(self, jid: int, stages: dict[int, int], status: str = "RUNNING") -> None:
        self.jobs[jid] = _Job(jid, list(stages), status)
        for sid, n in stages.items():
            self.stages.setdefault(sid, _Stage(sid, n, 0))

    def run(self, sid: int, done: int) -> None:
        self.stages[sid] = self.stages[sid]._replace(numCompletedTasks=done)

    def end(self, jid: int) -> None:
        self.jobs[jid] = self.jobs[jid]._replace(status="SUCCEEDED")

    def getJobIdsForGroup(self, group: str | None = None) -> list[int]:
        return list(self.jobs)

    def getJobInfo(self, jid: int) -> _Job | None:
        return self.jobs.get(jid)

    def getStageInfo(self, sid: int) -> _Stage | None:
        return self.stages.get(sid)


def test_a_jobs_stages_count_from_its_start_and_earlier_runs_do_not() -> None:
    t = _Tracker()
    t.job(0, {0: 5}, "SUCCEEDED")  # an earlier run on the same session
    t.run(0, 5)
    tasks = SparkTasks(t)
    assert tasks.poll() == (0, 0)
    # a job of three stages: 8 read tasks, then 2 + 2 after shuffles, not started yet
    t.job(1, {1: 8, 2: 2, 3: 2})
    assert tasks.poll() == (0, 12)
    t.run(1, 5)
    assert tasks.poll() == (5, 12)
    t.run(1, 8)
    t.run(2, 2)
    assert tasks.poll() == (10, 12)  # the total did not grow while the job ran
    t.run(3, 2)
    t.end(1)
    assert tasks.poll() == (12, 12)


def test_shared_and_skipped_stages_and_jobs_shorter_than_a_poll() -> None:
    t = _Tracker()
    tasks = SparkTasks(t)
    t.job(1, {1: 4, 2: 2})
    t.run(1, 4)
    t.run(2, 2)
    t.end(1)
    # a later job reuses stage 1's shuffle output: Spark lists the stage, skips it
    t.job(2, {1: 4, 3: 3})
    assert tasks.poll() == (6, 9)  # stage 1 counts once
    # a job that started and ended before this poll, with a stage Spark skipped
    t.job(3, {4: 6, 5: 1})
    t.run(5, 1)
    t.end(3)
    assert tasks.poll() == (7, 10)  # stage 4 never ran: not in the total
    t.run(3, 3)
    t.end(2)
    assert tasks.poll() == (10, 10)


def test_a_stage_whose_info_went_missing_keeps_what_it_did() -> None:
    t = _Tracker()
    tasks = SparkTasks(t)
    t.job(1, {1: 4})
    t.run(1, 3)
    assert tasks.poll() == (3, 4)
    del t.stages[1]  # the status store let it go (weak consistency, retained stages)
    assert tasks.poll() == (3, 4)
    t.end(1)
    assert tasks.poll() == (3, 3)


# --------------------------------------------------------------------------- Spark Connect


class _StageInfo(NamedTuple):
    """The fields of pyspark's Connect ``StageInfo`` that `ConnectTasks` reads."""

    stage_id: int
    num_tasks: int
    num_completed_tasks: int
    num_bytes_read: int = 0
    done: bool = False


def test_connect_operations_count_their_stages_once_and_skipped_ones_drop_out() -> None:
    tasks = ConnectTasks()
    assert tasks.poll() == (0, 0)
    # an operation of two stages, reported while it runs
    tasks([_StageInfo(0, 8, 3), _StageInfo(1, 4, 0)], 2, "op-a", False)
    assert tasks.poll() == (3, 12)
    # a second operation, from another thread, shares stage 1 (counted once)
    tasks([_StageInfo(1, 4, 1), _StageInfo(2, 2, 0)], 1, "op-b", False)
    assert tasks.poll() == (4, 14)
    # a report never lowers what was seen completed
    tasks([_StageInfo(0, 8, 2)], 2, "op-a", False)
    assert tasks.poll() == (4, 14)
    # op-a ends; stage 1 still counts whole, as op-b (running) shares it
    tasks([_StageInfo(0, 8, 8), _StageInfo(1, 4, 1)], 0, "op-a", True)
    assert tasks.poll() == (9, 14)
    # op-b ends: stage 1 ran 1 of its tasks here, stage 2 was skipped (never ran): both
    # count what ran, so the bar ends full
    tasks([_StageInfo(1, 4, 1), _StageInfo(2, 2, 0)], 0, "op-b", True)
    assert tasks.poll() == (9, 9)


def test_connect_reports_without_stages_change_nothing() -> None:
    tasks = ConnectTasks()
    tasks(None, 0, None, False)
    tasks([], 0, "op", True)
    assert tasks.poll() == (0, 0)
