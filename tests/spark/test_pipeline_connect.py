"""`routing analyze --remote sc://HOST`: the pipeline on a Spark Connect server.

A real server (the session's ``connect_url``, ``conftest.py``) is started from the pyspark
package's own jars on a free loopback port. The client runs as users
run it, in child processes: the CLI itself, and a script asking a Python worker where its
``routing`` came from (the artifact the client shipped, not the server's install). A Connect
session cannot share a process with a classic one (the test of that is the one in-process
call here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from routing.pipeline import TABLES, analyze_local
from routing.pipeline._connect import is_connect, remote_session, session_master
from routing.pipeline._schema import sort_rows
from routing.pipeline._session import SparkUnavailable
from routing.sim import SimConfig, simulate

pytest.importorskip("grpc", reason="needs pyspark's connect extra (grpcio)")

AT = 900_000


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("journals")
    result = simulate(SimConfig(groups=4, slaves=1, nameservers=3, duration_ms=1_800_000,
                                seed=11, faults="heavy"))
    for ns, text in result.journal_texts.items():
        (root / f"{ns}.jsonl").write_text(text, encoding="utf-8")
    (root / "summary.json").write_text("{}\n")  # skipped by the folder rule, as locally
    return root


@pytest.mark.parametrize("partition", ["ns", "group"])
def test_the_cli_on_a_connect_server_writes_the_reference_tables(
        connect_url: str, journals: Path, tmp_path: Path, partition: str) -> None:
    out = tmp_path / "out"
    env = dict(os.environ)
    env.pop("SPARK_MASTER", None)
    done = subprocess.run(
        [sys.executable, "-c", "from routing.cli import main; main()", "analyze",
         str(journals), "--out", str(out), "--remote", connect_url, "--at", str(AT),
         "--summary-json", str(tmp_path / "s.json"), "--partition", partition],
        capture_output=True, text=True, timeout=600, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"on {connect_url}" in done.stdout
    import pyarrow.parquet as pq

    # the CLI says on stderr what it skipped, and reads the folder as the reference does:
    # summary.json is listed in `rejected` with stage `skipped` (docs/pipeline.md)
    assert "skipped" in done.stderr and "summary.json" in done.stderr
    expected = analyze_local(str(journals), at=[AT])
    assert [(Path(r["source"]).name, r["stage"]) for r in expected["rejected"]] == [
        ("summary.json", "skipped")]
    for name, table in TABLES.items():
        rows = pq.read_table(out / name).to_pylist()
        assert sort_rows(table, rows) == expected[name], name
    summary = json.loads((tmp_path / "s.json").read_text())
    assert [ns["ns"] for ns in summary["name_servers"]] == ["ns-0", "ns-1", "ns-2"]


_WHERE = """
import sys
from routing.pipeline._connect import is_connect, remote_session, session_master
from routing.pipeline._spark_lines import _expand, task_slots

spark = remote_session(sys.argv[1])
assert is_connect(spark)
from routing.cli._progress import ConnectTasks

tasks = ConnectTasks()  # what the CLI's bar counts on a terminal
spark.registerProgressHandler(tasks)
spark.range(0, 1000, 1, 6).selectExpr("id % 7 AS k").groupBy("k").count().collect()
spark.removeProgressHandler(tasks)
print("tasks", *tasks.poll())
print("master", session_master(spark), "slots", task_slots(spark))

def where(batches):
    import pyarrow as pa
    import routing
    for _ in batches:
        yield pa.RecordBatch.from_pylist([{"file": routing.__file__}])

print("worker", spark.range(1).mapInArrow(where, "file string").collect()[0]["file"])
# a URI is listed by the server (no JVM in this process), with the local rules
print("listed", " ".join(f"{f.kind}:{f.path.rsplit('/', 1)[1]}"
                         for f in _expand(spark, ["file://" + sys.argv[2]])))
try:
    _expand(spark, ["file://" + sys.argv[2] + "/nothing-here"])
except FileNotFoundError as exc:
    print("missing", exc)
import os, tempfile
root = tempfile.mkdtemp()
os.makedirs(root + "/nested/a/b")
os.makedirs(root + "/empty")
with open(root + "/nested/a/b/x.jsonl", "w") as f:
    f.write("{}" + chr(10))
given = "file://" + root
print("nested", *[f.path[len(given):] for f in _expand(spark, [given + "//nested/"])])
print("empty", len(_expand(spark, ["file://" + root + "/empty"])))
# local[*] on a server means the server's cores: asked with a job, not this machine's
import routing.pipeline._connect as connect
connect.session_master = lambda session: "local[*]"
print("asked", connect.session_parallelism(spark))
spark.stop()
"""


def test_the_server_replays_with_the_code_the_client_shipped(
        connect_url: str, journals: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _WHERE, connect_url, str(journals)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines["master"] == "local[2,2] slots 2"
    ran, planned = map(int, lines["tasks"].split())
    assert ran == planned >= 6, lines["tasks"]  # the server reported the job's stages
    assert "routing-pipeline.zip" in lines["worker"], lines["worker"]
    assert lines["listed"] == ("text:ns-0.jsonl text:ns-1.jsonl text:ns-2.jsonl "
                               "skipped:summary.json")
    assert lines["missing"].startswith("no such journal file or folder: file://")
    assert lines["nested"] == "//nested/a/b/x.jsonl"  # as given, normalised when compared
    assert lines["empty"] == "0"
    assert lines["asked"] == "2"  # the server's local[2,2]


def test_a_classic_session_is_not_a_connect_session(spark: Any) -> None:
    assert not is_connect(spark)
    assert session_master(spark) == "local[2,2]"


def test_a_connect_session_next_to_a_classic_one_is_refused_in_one_sentence(
        spark: Any, connect_url: str) -> None:
    # (pyspark would otherwise turn this process's functions into Connect's: the classic
    # session's next query would fail)
    with pytest.raises(SparkUnavailable, match="needs a process of its own"):
        remote_session(connect_url)
    from pyspark.sql import functions as F

    assert spark.range(7).select(F.sum(F.col("id"))).first()[0] == 21  # still classic
