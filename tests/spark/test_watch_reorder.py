"""``routing watch`` (`start_watch`, ``availableNow``) when a name server's rotated files
arrive out of order (copied in parallel from remote hosts): an early file is held in the
name server's state until the missing one arrives, so the tables equal the batch run's and
the name servers' incidents are those of in-order arrival; a file that never arrives is
given up on once the hold's bound has passed, and the gap is reported as in batch. The
bound passing is a second run with ``reorder_wait_ms=0`` on the same checkpoint (no
sleeps)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from routing.pipeline import analyze_local
from routing.pipeline._live_spark import start_watch
from routing.pipeline._live_tables import STATUS_DIR, read_live, tables_of
from routing.pipeline._schema import rows_equal
from routing.sim import SimConfig, simulate
from test_pipeline_live import batch_incidents, in_name_order

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10 simulated minutes of 3 groups, 3 name servers, crashes and partitions, a new
    file every simulated minute (about 11 files a name server)."""
    out = tmp_path_factory.mktemp("reorder")
    simulate(SimConfig(groups=3, slaves=1, nameservers=3, duration_ms=600_000, seed=3,
                       faults="crash,partition"), out_dir=out, rotate_every_ms=60_000)
    return out


def _arrive(folder: Path, names: list[str]) -> None:
    """Modification times in the order of ``names``, one second apart (Spark's file source
    takes new files in that order)."""
    for i, name in enumerate(names):
        os.utime(folder / name, (1_700_000_000 + i, 1_700_000_000 + i))


def _copy(journals: Path, into: Path, names: list[str]) -> Path:
    into.mkdir()
    for name in names:
        shutil.copy2(journals / name, into / name)
    _arrive(into, names)
    return into


def _run(spark: Any, folder: Path, root: Path, wait_ms: int) -> None:
    query = start_watch(spark, folder, root / "out", root / "checkpoint",
                        incidents=root / "incidents.jsonl", available_now=True,
                        max_files=3, reorder_wait_ms=wait_ms)
    try:
        query.awaitTermination()
    finally:
        query.stop()


def _held(root: Path, ns: str) -> list[int]:
    """The held files in each status of ``ns``, batch by batch."""
    return [json.loads(line)["status"]["held_files"]
            for part in sorted((root / "out" / STATUS_DIR).glob("batch-*.jsonl"))
            for line in part.read_text(encoding="utf-8").splitlines()
            if json.loads(line)["key"] == ns]


def _own(lines: list[str]) -> list[str]:
    """The name servers' own incidents (the topics' depend on how files fall into
    micro-batches), sorted."""
    return sorted(i for i in lines if '"ns": ' in i)


def test_files_out_of_order_across_micro_batches_give_the_in_order_results(
        spark: Any, journals: Path, tmp_path: Path) -> None:
    names = sorted(p.name for p in journals.iterdir())
    ns1 = [n for n in names if n.startswith("ns-1.")]
    late = ns1[3]  # arrives four files of ns-1 later: micro-batches after its successors
    order = [n for n in names if n != late]
    order.insert(order.index(ns1[7]) + 1, late)
    folder = _copy(journals, tmp_path / "watched", order)
    _run(spark, folder, tmp_path, 600_000)
    final, statuses = read_live(tmp_path / "out")
    expected = analyze_local(folder)
    assert not rows_equal(expected, tables_of(final, statuses.values()))
    assert expected["expiries"] and not any(r["gaps"] for r in expected["name_servers"])
    held = _held(tmp_path, "ns-1")  # ns-1's files 4 and 5 waited a micro-batch for file 3
    assert max(held) >= 2 and held[-1] == 0
    in_order = _copy(journals, tmp_path / "in-order", names)
    in_name_order(in_order)
    delivered = (tmp_path / "incidents.jsonl").read_text(encoding="utf-8").splitlines()
    assert _own(delivered) == _own([i.replace(str(in_order), str(folder))
                                    for i in batch_incidents(in_order, 3)])
    assert len(set(delivered)) == len(delivered)


def test_a_file_that_never_arrives_is_given_up_on_after_the_bound(
        spark: Any, journals: Path, tmp_path: Path) -> None:
    names = sorted(p.name for p in journals.iterdir())
    ns1 = [n for n in names if n.startswith("ns-1.")]
    missing, last = ns1[3], ns1[-1]
    first = [n for n in names if n not in (missing, last)]
    folder = _copy(journals, tmp_path / "watched", first)
    _run(spark, folder, tmp_path, 600_000)  # within the bound: held, counted
    held = len(ns1) - 5  # the files of ns-1 after the missing one, but the last
    assert _held(tmp_path, "ns-1")[-1] == held
    final, statuses = read_live(tmp_path / "out")
    assert statuses["ns-1"]["name_servers"][0]["gaps"] == 0
    assert statuses["ns-1"]["name_servers"][0]["last_ms"] < max(
        r["last_ms"] for r in statuses["ns-0"]["name_servers"]) - 5 * 60_000
    shutil.copy2(journals / last, folder / last)  # ns-1's next file, after the bound
    _arrive(folder, [*first, last])
    _run(spark, folder, tmp_path, 0)
    assert _held(tmp_path, "ns-1")[-1] == 0
    final, statuses = read_live(tmp_path / "out")
    assert statuses["ns-1"]["released_files"] == 1
    expected = analyze_local(folder)  # the batch run of the same files: the gap reported
    assert not rows_equal(expected, tables_of(final, statuses.values()))
    ns = {r["ns"]: r for r in expected["name_servers"]}
    assert ns["ns-1"]["gaps"] == 1 and ns["ns-0"]["gaps"] == 0


def test_a_negative_wait_is_refused_naming_it(tmp_path: Path) -> None:
    from routing import InvalidRequest

    with pytest.raises(InvalidRequest, match="reorder_wait_ms") as info:
        start_watch(object(), tmp_path, tmp_path / "out", tmp_path / "cp", reorder_wait_ms=-1)
    assert info.value.field == "reorder_wait_ms" and info.value.value == -1
    assert not (tmp_path / "out").exists()  # refused before anything was written
