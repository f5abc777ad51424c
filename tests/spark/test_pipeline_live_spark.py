"""``routing watch``'s query (`routing.pipeline._live_spark.start_watch`) on the shared
SparkSession: after the stream has consumed a folder of rotated simulator journals (faults,
a damaged journal, bad files), its tables equal `analyze_local`'s on the same files, row for
row, and every incident was delivered once — also across a crash in the worst place (after
a micro-batch's incidents were written, before Spark committed it) and a restart that finds
new files. Every query is processed with ``availableNow`` (no sleeps) and stopped."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from routing.pipeline import analyze_local
from routing.pipeline._files import EMPTY_REASON
from routing.pipeline._live_spark import start_watch
from routing.pipeline._live_tables import read_live, tables_of
from routing.pipeline._schema import rows_equal
from test_pipeline_live import AT, batch_incidents, in_name_order, sim_folder

pytestmark = pytest.mark.spark


class Crash(RuntimeError):
    """Raised by the test inside the sink."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sim_folder(tmp_path_factory.mktemp("watch"))


@pytest.fixture(scope="module")
def expected(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """The batch tables, less the row about the empty file: Spark's file source never lists
    an empty file (a rotating writer never renames one into place)."""
    tables = analyze_local(folder, at=AT)
    empty = [r for r in tables["rejected"] if r["reason"] == EMPTY_REASON]
    assert len(empty) == 1
    tables["rejected"].remove(empty[0])
    return tables


@pytest.fixture(scope="module")
def incidents(folder: Path) -> list[str]:
    """Every incident of the folder (sorted JSON), from the Python steps fed micro-batches
    of 8 files in modification-time order as Spark's file source forms them: the name
    servers' own, and the topics compared across name servers (`TopicWatch`)."""
    return batch_incidents(folder, 8)


def _run(spark: Any, folder: Path, root: Path, *, max_files: int,
         between: Callable[[int], object] | None = None) -> None:
    query = start_watch(spark, folder, root / "out", root / "checkpoint",
                        incidents=root / "incidents.jsonl", available_now=True,
                        max_files=max_files, between=between)
    try:
        query.awaitTermination()
    finally:
        query.stop()


def _check(root: Path, expected: dict[str, list[dict[str, Any]]], incidents: list[str]) -> None:
    final, statuses = read_live(root / "out")
    got = tables_of(final, statuses.values(), at=AT)
    assert not rows_equal(expected, got), rows_equal(expected, got)
    delivered = (root / "incidents.jsonl").read_text(encoding="utf-8").splitlines()
    assert sorted(delivered) == incidents  # none lost, none twice
    assert {json.loads(i)["event"] for i in incidents} >= {
        "broker_expired", "topic_unwritable", "topic_writable", "disagreement",
        "agreement_restored"}


def test_a_consumed_folder_gives_the_batch_tables_and_every_incident_once(
        spark: Any, folder: Path, expected: dict[str, Any], incidents: list[str],
        tmp_path: Path) -> None:
    _run(spark, folder, tmp_path, max_files=8)
    _check(tmp_path, expected, incidents)
    # several micro-batches, each a name server's files continued from its state
    assert len(list((tmp_path / "out" / "status").glob("batch-*.jsonl"))) >= 6


def test_the_scheduler_keeps_no_job_of_a_finished_micro_batch(
        spark: Any, folder: Path, tmp_path: Path) -> None:
    # Spark 4's scheduler files each job under its SQL execution until the execution ends;
    # toLocalIterator ran its jobs after its execution had ended, and they stayed (with
    # their stages, accumulators and results: the watcher's heap grew a micro-batch at a
    # time). Spark without that map has nothing to keep.
    from py4j.protocol import Py4JError

    scheduler = spark.sparkContext._jsc.sc().dagScheduler()
    try:
        filed = scheduler.jobIdToQueryExecutionId
        before = filed().size()
    except Py4JError:
        pytest.skip("this Spark's scheduler files no job under its SQL execution")
    _run(spark, folder, tmp_path, max_files=4)
    # an RDD job after them: the scheduler handles its events in order, so the executions'
    # clean-ups queued before it are done when it returns
    assert spark.sparkContext.parallelize([1]).count() == 1
    assert len(list((tmp_path / "out" / "status").glob("batch-*.jsonl"))) >= 10
    assert filed().size() == before


def test_a_crash_after_writing_incidents_and_a_restart_lose_and_repeat_nothing(
        spark: Any, folder: Path, expected: dict[str, Any], incidents: list[str],
        tmp_path: Path) -> None:
    def crash(batch_id: int) -> None:
        if batch_id == 3:
            raise Crash("killed after batch 3's incidents were written")

    with pytest.raises(Exception, match="killed after batch 3"):
        _run(spark, folder, tmp_path, max_files=8, between=crash)
    written = (tmp_path / "incidents.jsonl").read_text(encoding="utf-8").splitlines()
    assert 0 < len(written) < len(incidents)  # the crash was mid-stream
    _run(spark, folder, tmp_path, max_files=8)  # Spark runs batch 3 again, then the rest
    _check(tmp_path, expected, incidents)


def test_a_restart_continues_with_files_that_appeared_meanwhile(
        spark: Any, folder: Path, expected: dict[str, Any], incidents: list[str],
        tmp_path: Path) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    files = sorted(folder.iterdir())
    half = len(files) // 2
    for path in files[:half]:
        shutil.copy2(path, watched / path.name)
    _run(spark, watched, tmp_path, max_files=5)
    first = read_live(tmp_path / "out")[1]
    for path in files[half:]:
        shutil.copy2(path, watched / path.name)
    in_name_order(watched)  # the later files are newer
    _run(spark, watched, tmp_path, max_files=5)
    final, statuses = read_live(tmp_path / "out")
    assert statuses != first
    want = analyze_local(folder, at=AT)  # the same files, under the watched folder's name
    got = tables_of(final, statuses.values(), at=AT)
    for table in want.values():
        for row in table:
            if isinstance(row.get("source"), str):
                row["source"] = row["source"].replace(str(folder), str(watched))
    want["rejected"] = [r for r in want["rejected"] if r["reason"] != EMPTY_REASON]
    assert not rows_equal(want, got), rows_equal(want, got)
    delivered = (tmp_path / "incidents.jsonl").read_text(encoding="utf-8").splitlines()
    # the name servers' own incidents do not depend on how files fall into micro-batches
    # (the topics' do: which name servers were active when); none lost, none twice
    assert sorted(i for i in delivered if '"ns": ' in i) == [
        i for i in incidents if '"ns": ' in i]
    assert len(set(delivered)) == len(delivered)
