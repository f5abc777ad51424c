"""``routing watch`` as a process: SIGKILLed mid-stream in the worst place (a micro-batch's
incidents written, not yet marked delivered nor committed by Spark), then restarted with
``--once`` on the same checkpoint: no incident lost or repeated, and ``OUT/tables`` equal
the batch run's. The kill is injected (`KILL_AT_BATCH_ENV`): no sleeps, no timing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from routing.pipeline import analyze_local
from routing.pipeline._files import EMPTY_REASON
from routing.pipeline._live_spark import KILL_AT_BATCH_ENV
from routing.pipeline._schema import TABLES, rows_equal, sort_rows
from test_pipeline_live import AT, sim_folder

pytestmark = pytest.mark.spark


def _watch(folder: Path, out: Path, incidents: Path,
           **env: str) -> subprocess.CompletedProcess[str]:
    src = Path(__file__).resolve().parents[2] / "src"
    return subprocess.run(
        [sys.executable, "-c", "from routing.cli import main; main()", "watch", str(folder),
         "--out", str(out), "--incidents", str(incidents), "--once", "--max-files", "8",
         "--master", "local[2,2]", *(a for t in AT for a in ("--at", str(t)))],
        env={**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
             **env},
        capture_output=True, text=True, timeout=600, check=False)


def test_sigkill_mid_stream_then_restart_loses_and_repeats_nothing(tmp_path: Path) -> None:
    folder = sim_folder(tmp_path)
    out, incidents = tmp_path / "out", tmp_path / "incidents.jsonl"
    killed = _watch(folder, out, incidents, **{KILL_AT_BATCH_ENV: "2"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    cut = incidents.read_text(encoding="utf-8").splitlines()
    assert cut and not (out / "tables").exists()
    whole = _watch(folder, out, incidents)
    assert whole.returncode == 0, whole.stderr[-2000:]
    delivered = incidents.read_text(encoding="utf-8").splitlines()
    assert len(delivered) > len(cut) and len(set(delivered)) == len(delivered)
    # the lines written before the kill are still the first ones (the batch cut short by
    # the kill was written again in its place, not after a copy of itself)
    assert delivered[:len(cut)] == cut
    # a clean run of the same files in a fresh place delivers the same incidents
    fresh = tmp_path / "fresh"
    clean = _watch(folder, fresh / "out", fresh / "incidents.jsonl")
    assert clean.returncode == 0, clean.stderr[-2000:]
    assert delivered == (fresh / "incidents.jsonl").read_text(encoding="utf-8").splitlines()
    # OUT/tables equal the batch run (but the empty file, which Spark's file source never lists)
    expected = analyze_local(folder, at=AT)
    expected["rejected"] = [r for r in expected["rejected"] if r["reason"] != EMPTY_REASON]
    got = {name: sort_rows(TABLES[name], pq.read_table(out / "tables" / name).to_pylist())
           for name in TABLES}
    assert not rows_equal(expected, got), rows_equal(expected, got)
    assert any(json.loads(i)["event"] == "broker_expired" for i in delivered)
