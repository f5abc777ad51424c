"""``routing watch`` (`start_watch`, ``availableNow``) over a folder the simulator itself
wrote with rotation (``simulate(..., rotate_every_ms=...)``, as ``routing simulate
--rotate-every``): files named ``ns-<i>.<first seq>.jsonl`` that start without a header,
snapshot lines that start a file, name-server restarts. After the stream has consumed the
folder — in one go, or in two steps on one checkpoint (half the files, then the rest) — its
tables equal `analyze_local`'s row for row, and its incidents agree with those tables:
every ``broker_expired`` is an ``expiries`` row and back, every ``disagreement`` a topic
of the ``disagreement`` table. No sleeps: every query runs with ``availableNow``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from routing.journal import parse_journal_file_name
from routing.pipeline import analyze_local
from routing.pipeline._live_spark import start_watch
from routing.pipeline._live_tables import read_live, tables_of
from routing.pipeline._schema import rows_equal
from routing.sim import SimConfig, simulate
from test_pipeline_live import in_name_order

pytestmark = pytest.mark.spark

AT = (600_000, 1_500_000)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 simulated minutes of 4 groups (8 brokers), 3 name servers, crashes, partitions,
    a failover and name-server restarts every ~2 min, a snapshot every 5 min, a new file
    every simulated minute."""
    out = tmp_path_factory.mktemp("simrot")
    simulate(SimConfig(groups=4, slaves=1, nameservers=3, duration_ms=1_800_000, seed=3,
                       faults="crash,partition,ns_restart,failover",
                       fault_interval_ms=120_000, snapshot_every_ms=300_000),
             out_dir=out, rotate_every_ms=60_000)
    in_name_order(out)
    return out


@pytest.fixture(scope="module")
def expected(folder: Path) -> dict[str, list[dict[str, Any]]]:
    tables = analyze_local(folder, at=AT)
    # what makes this folder worth watching: restarts and snapshots inside rotated files
    assert sum(r["restarts"] for r in tables["name_servers"]) >= 1
    assert not tables["rejected"] and tables["expiries"]
    return tables


def test_the_folder_is_the_simulators_rotation(folder: Path) -> None:
    names = sorted(p.name for p in folder.iterdir() if parse_journal_file_name(p.name))
    assert len(names) >= 3 * 25  # a file per simulated minute and name server, and more
    starts = [(folder / n).read_text(encoding="utf-8").split("\n", 1)[0] for n in names]
    assert any('"op":"snapshot"' in s for s in starts)  # a snapshot starts a file
    assert sum('"op":"header"' in s for s in starts) < len(starts)  # most start headless


def _watch(spark: Any, folder: Path, root: Path) -> None:
    query = start_watch(spark, folder, root / "out", root / "checkpoint",
                        incidents=root / "incidents.jsonl", available_now=True, max_files=7)
    try:
        query.awaitTermination()
    finally:
        query.stop()


def _check(root: Path, expected: dict[str, list[dict[str, Any]]]) -> None:
    final, statuses = read_live(root / "out")
    got = tables_of(final, statuses.values(), at=AT)
    assert not rows_equal(expected, got), rows_equal(expected, got)
    delivered = [json.loads(x) for x in
                 (root / "incidents.jsonl").read_text(encoding="utf-8").splitlines()]
    expired = sorted((i["ns"], i["broker_addr"], i["at_ms"], i["last_heartbeat_ms"],
                      i["detection_delay_ms"]) for i in delivered
                     if i["event"] == "broker_expired")
    assert expired == sorted((r["ns"], r["broker_addr"], r["detected_ms"],
                              r["last_heartbeat_ms"], r["latency_ms"])
                             for r in expected["expiries"])
    topics = {r["topic"] for r in expected["disagreement"]}
    opened = [i for i in delivered if i["event"] == "disagreement"]
    assert opened and {i["topic"] for i in opened} <= topics
    lines = [json.dumps(i, sort_keys=True) for i in delivered]
    assert len(set(lines)) == len(lines)  # none twice


def test_a_consumed_simulator_folder_gives_the_batch_tables(
        spark: Any, folder: Path, expected: dict[str, Any], tmp_path: Path) -> None:
    _watch(spark, folder, tmp_path)
    _check(tmp_path, expected)


def test_files_arriving_in_two_steps_give_the_same_tables(
        spark: Any, folder: Path, expected: dict[str, Any], tmp_path: Path) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    # the first half in time: each name server's earlier files (by first seq)
    files = sorted(folder.iterdir(), key=lambda p: (parse_journal_file_name(p.name) or
                                                    ("", 0))[1])
    for path in files[:len(files) // 2]:
        shutil.copy2(path, watched / path.name)
    _watch(spark, watched, tmp_path)
    first = read_live(tmp_path / "out")[1]
    for path in files[len(files) // 2:]:
        shutil.copy2(path, watched / path.name)
    in_name_order(watched)
    _watch(spark, watched, tmp_path)
    assert read_live(tmp_path / "out")[1] != first
    for table in expected.values():  # the same files, under the watched folder's name
        for row in table:
            if isinstance(row.get("source"), str):
                row["source"] = row["source"].replace(str(folder), str(watched))
    try:
        _check(tmp_path, expected)
    finally:
        for table in expected.values():
            for row in table:
                if isinstance(row.get("source"), str):
                    row["source"] = row["source"].replace(str(watched), str(folder))
