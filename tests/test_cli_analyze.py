"""``routing analyze`` as an operator meets it: inputs checked before Spark starts, progress
on stderr only, the summary whole on stdout, ``--summary-json`` and the report files."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline_scenarios import play
from routing.cli import _analyze
from routing.cli._analyze import analyze_command
from routing.pipeline import InputError, check_inputs


@pytest.fixture
def journals(tmp_path: Path) -> Path:
    folder = tmp_path / "journals"
    folder.mkdir()
    ops = [("register", 3, 0, g, 0, g, [0, 1], g % 4, 0, None, False, 4, True)
           for g in range(3)]
    ops += [("advance", 20_000), ("heartbeat", 3, 0, 0), ("advance", 130_000),
            ("register", 1, 0, 1, 0, 1, [0, 1], 1, 0, None, False, 4, True),
            ("advance", 5_000), ("restart", 1), ("advance", 5_000)]
    for name, lines in play(ops, nameservers=2).items():
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(_analyze, "spark_session", refuse)


@pytest.mark.usefixtures("no_spark")
def test_bad_inputs_fail_before_any_spark_session_starts(tmp_path: Path) -> None:
    missing = CliRunner().invoke(analyze_command, [str(tmp_path / "nosuchdir"), "--out",
                                                   str(tmp_path / "out")])
    assert missing.exit_code == 1
    assert f"no such journal file or folder: {tmp_path / 'nosuchdir'}" in missing.stderr
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("not a journal\n")
    (tmp_path / "notes" / "data.csv").write_text('{"a": 1}\n')
    empty = CliRunner().invoke(analyze_command, [str(tmp_path / "notes"), "--out",
                                                 str(tmp_path / "out")])
    assert empty.exit_code == 1
    assert "no journal found" in empty.stderr and "data.csv" in empty.stderr


def test_which_files_are_journals(journals: Path) -> None:
    (journals / "notes.txt").write_text("hello\n")
    with gzip.open(journals / "ns-9.jsonl.gz", "wt") as zipped:
        zipped.write((journals / "ns-0.jsonl").read_text())
    check = check_inputs([journals])
    assert [Path(f.path).name for f in check.journals] == ["ns-0.jsonl", "ns-1.jsonl",
                                                           "ns-9.jsonl.gz"]
    assert [(Path(p).name, why) for p, why in check.skipped] == [
        ("notes.txt", "not a journal: the first line is not JSON")]
    assert check.total_bytes > 0
    assert check_inputs(["hdfs://nn/journals"]).remote == ("hdfs://nn/journals",)
    with pytest.raises(InputError, match="no such journal"):
        check_inputs([journals / "gone.jsonl"])


@pytest.mark.usefixtures("no_spark")
def test_local_run_keeps_progress_on_stderr_and_the_summary_whole_on_stdout(
        journals: Path, tmp_path: Path) -> None:
    (journals / "notes.txt").write_text("hello\n")
    out, summary = tmp_path / "tables", tmp_path / "summary.json"
    result = CliRunner().invoke(analyze_command, [
        str(journals), "--out", str(out), "--local", "--report", "--summary-json",
        str(summary), "--incident-gap", "0"])
    assert result.exit_code == 0, result.output
    assert re.search(r"^\[ +\d+\.\d s\] reading 2 journal files", result.stderr, re.M)
    assert "skipped" in result.stderr and "notes.txt" in result.stderr
    assert "[" not in result.stdout.split("\n")[0] and " s] " not in result.stdout
    assert "2 name servers" in result.stdout and "…" not in result.stdout
    doc = json.loads(summary.read_text())
    assert doc["disagreement"]["incident_gap_ms"] == 0
    assert doc["records"] == sum(r["records"] for r in doc["name_servers"])
    assert f"{doc['sessions']['total']:,}" in result.stdout
    assert (out / "report.html").stat().st_size > 1_000_000  # plotly.js is inside
    assert (out / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "sessions").is_dir()


def test_the_local_reader_moves_a_live_bar_by_the_bytes_it_read(journals: Path) -> None:
    import io

    from rich.console import Console

    from routing.cli._progress import RunProgress, counted_sources

    check = check_inputs([journals])
    screen = io.StringIO()
    with RunProgress(Console(file=screen, force_terminal=True, width=120)) as progress:
        assert progress.live
        sources = counted_sources(check, progress)
        assert sources is not None
        lines = {name: list(text) for name, text in sources.items()}
        task = progress._bar.tasks[0]
        assert (task.completed, task.total) == (check.total_bytes, check.total_bytes)
        assert task.fields["done"].endswith(" MB")
    for f in check.journals:  # the lines are the files' own
        assert lines[f.path] == Path(f.path).read_text().splitlines()
    quiet = io.StringIO()
    with RunProgress(Console(file=quiet, width=120)) as progress:  # not a terminal
        assert not progress.live
        progress.step("replaying")
        progress.update(5, 10, "MB")
    assert re.fullmatch(r"\[ +\d+\.\d s\] replaying\n", quiet.getvalue())
