"""Differential tests: the Spark pipeline returns, row for row, what the pure-Python
reference (`routing.pipeline.analyze_local`) computes.

Inputs: simulator journals (three seeds, heavy faults, renamed so they can be read
together), hypothesis-generated operation sequences with damaged lines, gzip files, a
Parquet copy and a file split into many Spark partitions. Every Spark run is a few seconds,
so each test analyzes one combined input.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_scenarios import bad_folder, damage, operations, play
from routing import ManualClock
from routing.cli._analyze import analyze_command
from routing.pipeline import (
    RejectedRecords,
    _spark_lines,
    _spark_sweep,
    analyze,
    analyze_local,
    to_parquet,
)
from routing.pipeline._schema import TABLES, rows_equal, sort_rows
from routing.pipeline._session import default_master
from routing.pipeline._spark_lines import read_lines
from routing.pipeline._spark_rows import KILL_WORKER_ENV
from routing.pipeline._summary import summarize_analysis, summarize_rows
from routing.sim import LivePacing, SimConfig, simulate

pytestmark = pytest.mark.spark

AT = (600_000, 1_800_000)


def _diff(expected: dict[str, list[dict[str, Any]]], got: dict[str, list[dict[str, Any]]]
          ) -> str:
    """A readable account of the first difference per table."""
    lines = []
    for name in rows_equal(expected, got):
        want, have = expected[name], got[name]
        missing = [r for r in want if r not in have][:2]
        extra = [r for r in have if r not in want][:2]
        lines.append(f"{name}: {len(want)} rows expected, {len(have)} got; "
                     f"missing {missing}; unexpected {extra}")
    return "\n".join(lines)


def _renamed(lines: list[str], prefix: str) -> list[str]:
    return [line.replace('"ns-', f'"{prefix}-ns-') for line in lines]


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three seeds (heavy faults) as nine name servers in one folder; one seed gzipped;
    one journal damaged with bad lines."""
    root = tmp_path_factory.mktemp("sim")
    for seed in (1, 2, 3):
        result = simulate(SimConfig(groups=4, slaves=1, nameservers=3, duration_ms=2_100_000,
                                    seed=seed, faults="heavy"))
        for ns, text in sorted(result.journal_texts.items()):
            lines = _renamed(text.splitlines(), f"s{seed}")
            if seed == 2 and ns == "ns-1":
                lines = damage({"x": lines}, seed)["x"]
            name = f"s{seed}-{ns}.jsonl"
            if seed == 3:
                with gzip.open(root / f"{name}.gz", "wt", encoding="utf-8") as out:
                    out.write("\n".join(lines) + "\n")
            else:
                (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def sim_expected(sim_dir: Path) -> dict[str, list[dict[str, Any]]]:
    return analyze_local(sim_dir, at=AT)


def test_simulator_journals_split_by_broker_group_equal_the_reference(
        spark: Any, sim_dir: Path, sim_expected: dict[str, list[dict[str, Any]]]) -> None:
    analysis = analyze(spark, [str(sim_dir)], at=AT, partition="group")
    got = analysis.collect()
    summary = summarize_analysis(analysis)
    analysis.unpersist()
    assert not rows_equal(sim_expected, got), _diff(sim_expected, got)
    # the summary (incidents, life availability, rejected by file) from Spark's collected
    # rows equals the reference's
    assert summary == summarize_rows(sim_expected)
    assert summary.incidents and summary.rejected_by_file
    # the comparison is not vacuous: several replay partitions, every kind of row
    assert max(analysis.partitions.values()) > 1
    reasons = {r["end_reason"] for r in sim_expected["sessions"]}
    assert {"expired", "open", "restart"} <= reasons
    assert sim_expected["expiries"] and sim_expected["disagreement"]
    # availability over a topic's life: topics deleted on purpose and real outages
    assert any(r["deletions"] for r in sim_expected["availability"])
    assert any(r["outages"] and not r["deletions"] for r in sim_expected["availability"])
    assert {r["stage"] for r in sim_expected["rejected"]} == {"read", "replay"}
    assert {r["at_ms"] for r in sim_expected["routes_at"]} == set(AT)


def test_simulator_journals_split_by_name_server_equal_the_reference(
        spark: Any, sim_dir: Path, sim_expected: dict[str, list[dict[str, Any]]]) -> None:
    analysis = analyze(spark, str(sim_dir), at=AT, partition="ns")
    got = analysis.collect()
    analysis.unpersist()
    assert not rows_equal(sim_expected, got), _diff(sim_expected, got)
    assert set(analysis.partitions.values()) == {1}


@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.tuples(operations(min_size=20, max_size=100), st.integers(0, 2),
                          st.booleans()), min_size=5, max_size=5))
def test_generated_operation_sequences_equal_the_reference(
        spark: Any, batch: list[tuple[list[Any], int, bool]]) -> None:
    journals: dict[str, list[str]] = {}
    for i, (ops, config, damaged) in enumerate(batch):
        played = play(ops, nameservers=3, config=config, prefix=f"x{i}")
        journals.update(damage(played, i) if damaged else played)
    expected = analyze_local(journals, at=(50_000, 400_000))
    analysis = analyze(spark, journals, at=(50_000, 400_000))
    got = analysis.collect()
    analysis.unpersist()
    assert not rows_equal(expected, got), _diff(expected, got)


def test_a_parquet_copy_reads_like_the_original_files(
        spark: Any, sim_dir: Path, tmp_path: Path,
        sim_expected: dict[str, list[dict[str, Any]]]) -> None:
    copy = tmp_path / "journals.parquet"
    lines = to_parquet(spark, [str(sim_dir)], str(copy))
    assert lines == sum(1 for _ in read_lines(spark, str(sim_dir)).toLocalIterator())
    assert analyze_local(copy, at=AT) == sim_expected  # the reference reads the copy too
    analysis = analyze(spark, str(copy), at=AT, partition="ns")
    got = analysis.collect()
    analysis.unpersist()
    assert not rows_equal(sim_expected, got), _diff(sim_expected, got)


def test_a_killed_python_worker_is_retried_and_the_tables_do_not_change(
        spark: Any, sim_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        sim_expected: dict[str, list[dict[str, Any]]]) -> None:
    """Fault injection: the first replay task exits its Python worker after sending its
    first batch; Spark (``local[N,2]``, as the default master) runs the task again and
    every table equals the reference's: no row is lost or counted twice."""
    assert default_master() == "local[*,2]" or "SPARK_MASTER" in os.environ
    assert spark.sparkContext.master == "local[2,2]"
    marker = tmp_path / "killed"
    monkeypatch.setenv(KILL_WORKER_ENV, str(marker))
    analysis = analyze(spark, str(sim_dir), at=AT)
    got = analysis.collect()
    analysis.unpersist()
    assert marker.exists()  # a worker did die
    assert not rows_equal(sim_expected, got), _diff(sim_expected, got)


def test_line_numbers_survive_files_split_into_many_partitions(
        spark: Any, tmp_path: Path) -> None:
    text = [json.dumps({"n": i, "pad": "x" * (i % 97)}) for i in range(3_000)]
    text[1234] = "\r"  # a lone carriage return is not a line break (only \n is)
    text[2000] = b"\xff\xfe{\xc3".decode("utf-8", errors="replace")  # not UTF-8
    plain = tmp_path / "a.jsonl"
    plain.write_bytes(("\n".join(text) + "\n").encode("utf-8").replace(
        text[2000].encode("utf-8"), b"\xff\xfe{\xc3"))
    with gzip.open(tmp_path / "b.jsonl.gz", "wt", encoding="utf-8") as out:
        out.write("\n".join(text[:500]))  # no final newline
    old = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "20000")
    try:
        df = read_lines(spark, [str(plain), str(tmp_path / "b.jsonl.gz")])
        assert df.rdd.getNumPartitions() > 5
        got = df.collect()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        spark.conf.set("spark.sql.files.maxPartitionBytes", old)
    # a line that is not UTF-8 travels as bytes (its text null): Python decodes it
    assert [(r["line"], bytes(r["raw"])) for r in got if r["raw"] is not None] == [
        (2001, b"\xff\xfe{\xc3")]
    rows = sorted((r["source"], r["line"], r["text"] if r["raw"] is None else
                   bytes(r["raw"]).decode("utf-8", "replace")) for r in got)
    expected = sorted([(str(plain), i + 1, t) for i, t in enumerate(text)]
                      + [(str(tmp_path / "b.jsonl.gz"), i + 1, t)
                         for i, t in enumerate(text[:500])])
    assert rows == expected


def test_lines_whose_name_server_spark_misreads_are_re_read_with_python_keys(
        spark: Any) -> None:
    journals = play([("register", 3, 0, 0, 0, 0, [0, 1], 0, 0, None, False, 4, True),
                     ("advance", 130_000), ("heartbeat", 1, 0, 0)], nameservers=2)
    # "journal": null makes Python's reader look for "nameserver" (the key is present), while
    # the JVM's parse sees a null journal and takes "ns"
    forged = json.loads(journals["ns-0.jsonl"][-1])
    forged.update(seq=forged["seq"] + 10, journal=None, nameserver="ns-1")
    journals["ns-0.jsonl"].append(json.dumps(forged))
    steps: list[str] = []
    analysis = analyze(spark, journals, progress=steps.append)
    got = analysis.collect()
    analysis.unpersist()
    expected = analyze_local(journals)
    assert not rows_equal(expected, got), _diff(expected, got)
    assert any("Python's keys" in s for s in steps)


def test_strict_mode_fails_on_rejected_lines_and_counts_them(spark: Any) -> None:
    journals = damage(play([("register", 3, 0, 0, 0, 0, [0, 1], 0, 0, None, False, 4, True),
                            ("advance", 5_000)], nameservers=2), seed=7)
    expected = analyze_local(journals)["rejected"]
    with pytest.raises(RejectedRecords) as caught:
        analyze(spark, journals, strict=True, partition="ns")
    assert caught.value.total == len(expected) > 5
    assert [r["line"] for r in caught.value.rows] == [r["line"] for r in expected[:5]]


def test_the_cli_writes_every_table_as_parquet(
        spark: Any, sim_dir: Path, tmp_path: Path,
        sim_expected: dict[str, list[dict[str, Any]]]) -> None:
    import pyarrow.parquet as pq

    out = tmp_path / "out"
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        result = CliRunner().invoke(analyze_command, [
            str(sim_dir), "--out", str(out), "--master", "local[2]", "--at", "600000",
            "--at", "T+0:30:00", "--partition", "ns"])
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    assert result.exit_code == 0, result.output
    assert "Worst disagreement incidents" in result.stdout
    for name, table in TABLES.items():
        rows = pq.read_table(out / name).to_pylist()
        assert sort_rows(table, rows) == sim_expected[name], name
    assert pq.read_table(out / "sessions").schema.names == list(TABLES["sessions"].names)


def test_the_demo_simulates_analyzes_prints_and_draws(spark: Any, tmp_path: Path) -> None:
    import pyarrow.parquet as pq
    from rich.console import Console

    from routing.cli._demo_run import run_demo

    out = io.StringIO()
    config = SimConfig(groups=3, slaves=1, nameservers=2, duration_ms=1_200_000, seed=5,
                       faults="heavy")
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    wall = ManualClock(start_ms=1_700_000_000_000)  # the live part without real sleeps
    try:
        run_demo(tmp_path, config=config, console=Console(file=out, width=150),
                 live_pacing=LivePacing(speed=60, clock=wall, sleep=wall.advance,
                                        wall_times=True))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    text = out.getvalue()
    for heading in ("Broker sessions", "Expiries", "Worst disagreement incidents", "report:"):
        assert heading in text
    assert (tmp_path / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    assert 'id="tl-ns-0"' in (tmp_path / "report.html").read_text()
    expected = analyze_local(tmp_path / "journals", at=[600_000])
    for name in ("sessions", "expiries", "disagreement"):
        got = pq.read_table(tmp_path / "tables" / name).to_pylist()
        assert sort_rows(TABLES[name], got) == expected[name], name
    assert spark.range(3).count() == 3  # the shared session was not stopped
    # the live part: every expiry of its journals delivered as an incident, and printed
    live = analyze_local(tmp_path / "live" / "journals")
    assert live["expiries"] and min(r["detected_ms"] for r in live["expiries"]) > 1.7e12
    assert f"broker_expired {len(live['expiries'])}" in text
    assert "broker_expired" in text.split("watched as the files appear")[1].split("\nlive: ")[0]


def test_the_session_is_set_up_as_the_notes_require(spark: Any) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.ui.enabled") == "false"
    assert conf.get("spark.ui.showConsoleProgress") == "false"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert "TieredStopAtLevel=1" in conf.get("spark.driver.extraJavaOptions")
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    # pools: the topic sweep's jobs do not queue behind the small tables' writes
    assert conf.get("spark.scheduler.mode") == "FAIR"
    # the driver's classes come from (or go to) the class-data-sharing archive
    if os.environ.get("ROUTING_SPARK_CLASS_ARCHIVE", "1") != "0":
        assert "-XX:SharedArchiveFile=" in conf.get("spark.driver.extraJavaOptions") or (
            "-XX:ArchiveClassesAtExit=" in conf.get("spark.driver.extraJavaOptions"))


def test_bad_inputs_are_reported_alike_on_both_engines(spark: Any, tmp_path: Path) -> None:
    """Issue 12's bad inputs in one folder: files that are not journals (skipped), an empty
    journal, a byte that is not UTF-8, a gzip file cut short; then a sequence gap and a
    far-future record under --strict."""
    folder = bad_folder(tmp_path)
    expected = analyze_local(folder)
    analysis = analyze(spark, str(folder))
    got = analysis.collect()
    analysis.unpersist()
    assert not rows_equal(expected, got), _diff(expected, got)
    assert {r["stage"] for r in got["rejected"]} == {"skipped", "read"}
    journals = play([("register", 3, 0, 0, 0, 0, [0, 1], 0, 0, None, False, 4, True),
                     ("advance", 40_000), ("heartbeat", 3, 0, 0)], nameservers=2)
    del journals["ns-0.jsonl"][2]
    far = json.loads(journals["ns-1.jsonl"][2])
    journals["ns-1.jsonl"][2] = json.dumps(dict(far, ts=far["ts"] + 10**11))
    expected = analyze_local(journals)
    analysis = analyze(spark, journals)
    got = analysis.collect()
    analysis.unpersist()
    assert not rows_equal(expected, got), _diff(expected, got)
    with pytest.raises(RejectedRecords) as caught:
        analyze(spark, journals, strict=True)
    assert caught.value.total == 1 and "clock jump" in caught.value.rows[0]["reason"]
    assert caught.value.gaps and caught.value.gaps[0].startswith("ns-0: 1 gap(s)")


def test_one_task_per_journal_file_when_each_file_holds_one_name_server(
        spark: Any, tmp_path: Path) -> None:
    """The recorder's layout (one file per name server) is read without a shuffle; a file
    that also holds another name server's lines sends the run down the shuffled path."""
    result = simulate(SimConfig(groups=3, slaves=1, nameservers=3, duration_ms=1_500_000,
                                seed=4, faults="heavy"))
    clean = tmp_path / "clean"
    clean.mkdir()
    texts = dict(sorted(result.journal_texts.items()))
    for i, (ns, text) in enumerate(texts.items()):
        if i == 2:
            with gzip.open(clean / f"{ns}.jsonl.gz", "wt", encoding="utf-8") as out:
                out.write(text)
        else:
            (clean / f"{ns}.jsonl").write_text(text, encoding="utf-8")
    for folder, shuffled in (("clean", False), ("mixed", True)):
        if folder == "mixed":
            mixed = tmp_path / "mixed"
            mixed.mkdir()
            lines = [t.splitlines() for t in texts.values()]
            (mixed / "a.jsonl").write_text("\n".join(lines[0] + lines[1][:40]) + "\n")
            (mixed / "b.jsonl").write_text("\n".join(lines[1][40:]) + "\n")
            (mixed / "c.jsonl").write_text("\n".join(lines[2]) + "\n")
        expected = analyze_local(tmp_path / folder, at=AT)
        steps: list[str] = []
        # a tiny open cost: without the whole-file settings Spark would cut these files
        # into several ranges (bytes per core), and numbering them in Python would be wrong
        old = spark.conf.get("spark.sql.files.openCostInBytes")
        spark.conf.set("spark.sql.files.openCostInBytes", "1000")
        try:
            analysis = analyze(spark, str(tmp_path / folder), at=AT, progress=steps.append)
            got = analysis.collect()
            analysis.unpersist()
        finally:
            spark.conf.set("spark.sql.files.openCostInBytes", old)
        assert not rows_equal(expected, got), _diff(expected, got)
        assert any("one task per journal file" in s for s in steps), steps
        assert any("one task per name server" in s for s in steps) == shuffled, steps
        assert expected["sessions"] and expected["route_changes"]


def _tasks_of_group(spark: Any, group: str) -> list[int]:
    """Tasks per stage of the jobs of a job group (Spark's status tracker)."""
    tracker = spark.sparkContext.statusTracker()
    tasks = []
    for job in sorted(tracker.getJobIdsForGroup(group)):
        info = tracker.getJobInfo(job)
        for stage in sorted(info.stageIds if info else ()):
            stage_info = tracker.getStageInfo(stage)
            if stage_info is not None:
                tasks.append(stage_info.numTasks)
    return tasks


def test_one_large_file_is_read_in_byte_ranges_and_gzip_in_one_task(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer files than cores, one larger than the split size: the file is read by at least
    8 tasks (byte ranges), then one task replays its name server; a gzip file cannot be cut
    and is read whole. Sizes are scaled down (1 kB ranges instead of 1 MB)."""
    result = simulate(SimConfig(groups=4, slaves=1, nameservers=1, duration_ms=1_800_000,
                                seed=6, faults="heavy"))
    text = result.journal_texts["ns-0"]
    for folder in ("plain", "gzip"):
        (tmp_path / folder).mkdir()
    (tmp_path / "plain" / "ns-0.jsonl").write_text(text, encoding="utf-8")
    with gzip.open(tmp_path / "gzip" / "ns-0.jsonl.gz", "wt", encoding="utf-8") as out:
        out.write(text)
    size = len(text.encode("utf-8"))
    monkeypatch.setattr(_spark_lines, "SPLIT_READ_BYTES", size // 4)
    monkeypatch.setattr(_spark_lines, "SPLIT_MIN_BYTES", 1024)
    monkeypatch.setattr(_spark_sweep, "SWEEP_TASKS_PER_SLOT", 1)  # only the read has many tasks
    expected = analyze_local(tmp_path / "plain", at=AT)
    assert expected == analyze_local(tmp_path / "gzip", at=AT)
    old = spark.conf.get("spark.sql.files.maxPartitionBytes")
    try:
        for folder, step in (("plain", "byte ranges"), ("gzip", "one task per journal file")):
            steps: list[str] = []
            spark.sparkContext.setJobGroup(f"split-{folder}", folder)
            analysis = analyze(spark, str(tmp_path / folder), at=AT, progress=steps.append)
            got = analysis.collect()
            analysis.unpersist()
            assert not rows_equal(expected, got), _diff(expected, got)
            assert any(step in s for s in steps), steps
            tasks = _tasks_of_group(spark, f"split-{folder}")
            assert (max(tasks) >= 8) == (folder == "plain"), tasks
            assert analysis.read_tasks == (max(tasks) if folder == "plain" else 1)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        spark.conf.set("spark.sql.files.maxPartitionBytes", old)


def test_the_cli_copies_to_parquet_once_and_refuses_an_existing_folder(
        spark: Any, sim_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        args = [str(sim_dir), "--to-parquet", str(copy), "--master", "local[2]"]
        first = CliRunner().invoke(analyze_command, args)
        again = CliRunner().invoke(analyze_command, args)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    assert first.exit_code == 0, first.output
    assert "wrote " in first.stdout and str(copy) in first.stdout
    assert again.exit_code == 1
    assert f"--to-parquet {copy} already exists" in again.output
    assert "Traceback" not in again.output


def test_summary_rows_read_the_long_tables_back_from_the_written_files(
        spark: Any, sim_dir: Path, tmp_path: Path) -> None:
    """With the folder `Analysis.write` wrote, ``route_changes`` and ``routes_at`` come back
    as rows read from their Parquet files (not fetched whole to the driver), equal to the
    fetched rows; every other table is fetched as before; a folder that is not there
    (a URI, a table never written) falls back to fetching."""
    from routing.pipeline import analyze
    from routing.pipeline._spark_tables import READ_BACK
    from routing.pipeline._store import ParquetRows
    from routing.pipeline._summary import summarize_rows

    analysis = analyze(spark, [str(sim_dir)], at=[600_000])
    try:
        analysis.write(str(tmp_path / "out"))
        fetched = analysis.summary_rows()
        read_back = analysis.summary_rows(written=tmp_path / "out")
        elsewhere = analysis.summary_rows(written="s3a://bucket/out")
    finally:
        analysis.unpersist()
    assert set(fetched) == set(read_back) == set(elsewhere)
    for name, rows in read_back.items():
        assert isinstance(rows, ParquetRows) == (name in READ_BACK), name
        assert not isinstance(elsewhere[name], ParquetRows), name

        def key(row: dict[str, Any]) -> str:
            return repr(sorted(row.items()))
        assert sorted(rows, key=key) == sorted(fetched[name], key=key), name
    assert len(read_back["route_changes"]) == len(fetched["route_changes"]) > 0
    assert summarize_rows(read_back) == summarize_rows(fetched)
