"""``routing watch --remote sc://HOST``: the live watcher on a Spark Connect server (the
session's ``connect_url``). The client runs in child processes, as users run it (a Connect
session cannot share a process with the test run's classic one).

On Connect the query's sink runs in a Python process of the server: it writes incidents to
a file, and the client relays them to stdout (``_live_relay.LiveRelay``). After the stream
has consumed a folder of rotated simulator journals (faults, a damaged journal, bad files),
stdout holds exactly the incidents the embedded watcher delivers, and ``OUT/tables`` equal
the batch run's, row for row; a second ``--once`` on the same checkpoint relays nothing
again. Every query runs with ``availableNow`` (``--once``): no sleeps.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from routing.pipeline import analyze_local
from routing.pipeline._files import EMPTY_REASON
from routing.pipeline._schema import TABLES, rows_equal, sort_rows
from test_pipeline_live import AT, batch_incidents, sim_folder

pytestmark = pytest.mark.spark


def _client(*args: str) -> subprocess.CompletedProcess[str]:
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("SPARK_MASTER", None)
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=600, check=False)


def _watch(folder: Path, out: Path, url: str) -> subprocess.CompletedProcess[str]:
    return _client("-c", "from routing.cli import main; main()", "watch", str(folder),
                   "--out", str(out), "--once", "--max-files", "8", "--remote", url,
                   *(a for t in AT for a in ("--at", str(t))))


def test_the_watcher_on_a_connect_server_relays_every_incident_once_and_the_batch_tables(
        connect_url: str, tmp_path: Path) -> None:
    folder = sim_folder(tmp_path)
    out = tmp_path / "out"
    done = _watch(folder, out, connect_url)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"on {connect_url}" in done.stderr
    # the embedded watcher's incidents for micro-batches of 8 files (none lost, none twice)
    delivered = done.stdout.splitlines()
    assert sorted(delivered) == batch_incidents(folder, 8)
    assert (out / "_checkpoint" / "incidents.jsonl").read_text(
        encoding="utf-8").splitlines() == delivered  # the server's sink wrote them there
    expected = analyze_local(folder, at=AT)
    expected["rejected"] = [r for r in expected["rejected"] if r["reason"] != EMPTY_REASON]
    got = {name: sort_rows(TABLES[name], pq.read_table(out / "tables" / name).to_pylist())
           for name in TABLES}
    assert not rows_equal(expected, got), rows_equal(expected, got)
    assert expected["expiries"] and expected["disagreement"]  # not vacuous
    # the same checkpoint again: nothing new to read, nothing relayed twice
    again = _watch(folder, out, connect_url)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout == ""
    got = {name: sort_rows(TABLES[name], pq.read_table(out / "tables" / name).to_pylist())
           for name in TABLES}
    assert not rows_equal(expected, got), rows_equal(expected, got)


_REFUSED = """
import sys
from routing.pipeline import WatchUnsupported, remote_session, start_watch

spark = remote_session(sys.argv[1])
for options in ({}, {"incidents": sys.stdout}, {"incidents": sys.argv[2] + "/i.jsonl",
                                                "metrics": object()}):
    try:
        start_watch(spark, sys.argv[2], sys.argv[2] + "/out", sys.argv[2] + "/cp", **options)
    except WatchUnsupported as exc:
        print(exc.field, isinstance(exc, ValueError), str(exc).split(":")[0])
spark.stop()
"""


def test_a_stream_or_metrics_in_the_connect_sink_are_refused_naming_the_option(
        connect_url: str, tmp_path: Path) -> None:
    done = _client("-c", _REFUSED, connect_url, str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "incidents True on Spark Connect, incidents must go to a file (the sink runs on "
        "the server)"] * 2 + [
        "metrics True on Spark Connect, metrics are updated by the client"]
    assert not (tmp_path / "cp").exists()  # refused before anything was written
