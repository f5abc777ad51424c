"""Rotating journals (`routing.journal.RotatingJournal`, docs/journal.md "Rotation"): the
files hold exactly the unrotated journal's lines, each appears complete under a name that
sorts in sequence order, a snapshot starts a file, and a folder whose first files were
deleted reads clean from a snapshot on, or is rejected line by line with a clear reason."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from routing.journal import (
    JournalRecorder,
    Replayer,
    RotatingJournal,
    finish_open_files,
    journal_file_name,
    parse_journal_file_name,
    read_journal,
    read_journals,
    replay,
    rotated_files,
)

NS = "ns-0"


def _reg(group: int, counter: int = 1) -> r.Registration:
    name = f"broker-{group}"
    return r.Registration(cluster="c", broker_name=name, broker_id=0,
                          broker_addr=f"10.0.0.{group + 1}:10911", channel=group,
                          data_version=r.DataVersion(counter=counter),
                          topics={t: r.TopicConfig(topic_name=t) for t in (name, "T")})


class _Tee:
    """Writes every line to the rotating journal and to an unrotated copy in memory."""

    def __init__(self, *sinks: Any) -> None:
        self.sinks = sinks

    def write(self, text: str) -> None:
        for sink in self.sinks:
            sink.write(text)


#: An operation of a recorded life: (kind, argument).
_OPS = st.lists(st.tuples(
    st.sampled_from(["register", "register", "heartbeat", "scan", "advance", "advance",
                     "snapshot", "restart"]),
    st.integers(min_value=0, max_value=3)), min_size=1, max_size=60)


def _record(ops: list[tuple[str, int]], sink: Any, clock: r.ManualClock,
            snapshot_every_ms: int | None = None) -> JournalRecorder:
    ns = JournalRecorder(r.RouteInfoManager(clock=clock), sink, nameserver_id=NS,
                         snapshot_every_ms=snapshot_every_ms)
    for kind, arg in ops:
        if kind == "register":
            ns.register(_reg(arg, counter=1 + arg % 2))
        elif kind == "heartbeat":
            ns.heartbeat(cluster="c", broker_addr=f"10.0.0.{arg + 1}:10911")
        elif kind == "scan":
            ns.scan_expired()
        elif kind == "advance":
            clock.advance(arg * 20_000 + 1_000)
        elif kind == "snapshot":
            ns.write_snapshot()
        else:
            ns.restart(r.RouteInfoManager(clock=clock))
    return ns


def _first_seq(line: str) -> int:
    return int(json.loads(line)["seq"])


@settings(max_examples=60, deadline=None)
@given(ops=_OPS, every=st.sampled_from([None, 0, 1, 15_000, 60_000]),
       size=st.sampled_from([None, 0, 1, 300, 2_000]), gz=st.booleans())
def test_rotated_files_hold_the_unrotated_journal_in_name_order(
        ops: list[tuple[str, int]], every: int | None, size: int | None, gz: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        clock = r.ManualClock(start_ms=1_000)
        whole = io.StringIO()
        appeared: dict[Path, str] = {}

        def seen(path: Path) -> None:
            assert path.exists() and not path.name.startswith(".")
            appeared[path] = hashlib.sha256(path.read_bytes()).hexdigest()

        rotating = RotatingJournal(folder, NS, clock=clock, rotate_every_ms=every,
                                   rotate_bytes=size, gzip=gz, on_close=seen)
        _record(ops, _Tee(rotating, whole), clock)
        hidden = [p.name for p in Path(folder).iterdir() if p.name.startswith(".")]
        assert hidden == ([rotating.current_path.name] if rotating.current_path else [])
        rotating.close()
        files = rotated_files(folder, NS)
        assert sorted(Path(folder).iterdir()) == files  # nothing hidden is left
        assert files == sorted(appeared)  # every file announced once, as it appeared
        for path, digest in appeared.items():  # and never changed after it appeared
            assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
        texts = []
        for path in files:
            with r.journal.open_journal(path) as handle:
                texts.append(handle.read())
        assert "".join(texts) == whole.getvalue()  # the same lines, in the same order
        lines = [t.splitlines() for t in texts]
        for path, file_lines in zip(files, lines, strict=True):
            assert path.name == journal_file_name(NS, _first_seq(file_lines[0]), gzip=gz)
            assert path.name.endswith(".jsonl.gz" if gz else ".jsonl")
            # a snapshot line is always the first of its file
            assert all('"op":"snapshot"' not in line for line in file_lines[1:])
            if size:  # closed at the first line written at or over the limit
                assert len("\n".join(file_lines[:-1]).encode()) < size
        if every:  # a line written once a file's time was up went into the next one
            for file_lines in lines:
                stamps = [json.loads(x)["ts"] for x in file_lines]
                assert max(stamps) - stamps[0] < every
        read = read_journals(files)
        alone = read_journal(whole.getvalue().splitlines())
        assert read.ok and read.records == alone.records


def test_a_quiet_file_is_closed_when_its_time_is_up() -> None:
    with tempfile.TemporaryDirectory() as folder:
        clock = r.ManualClock(start_ms=0)
        sink = RotatingJournal(folder, NS, clock=clock, rotate_every_ms=10_000)
        JournalRecorder(r.RouteInfoManager(clock=clock), sink, nameserver_id=NS)
        assert not sink.rotate_if_due() and rotated_files(folder, NS) == []
        clock.advance(9_999)
        assert not sink.rotate_if_due()
        clock.advance(1)
        assert sink.rotate_if_due()
        assert [p.name for p in rotated_files(folder, NS)] == [journal_file_name(NS, 0)]
        assert sink.current_path is None and not sink.rotate()
        sink.close()
        assert sink.files_closed == 1 and sink.closed
        with pytest.raises(r.InvalidRequest, match="closed"):
            sink.write('{"ns":"ns-0","seq":1,"ts":1,"op":"scan"}\n')


def test_a_killed_writers_file_is_finished_and_its_cut_line_rejected(tmp_path: Path) -> None:
    clock = r.ManualClock(start_ms=0)
    sink = RotatingJournal(tmp_path, NS, clock=clock, rotate_every_ms=None,
                           line_buffered=True)
    ns = JournalRecorder(r.RouteInfoManager(clock=clock), sink, nameserver_id=NS)
    ns.register(_reg(0))
    hidden = sink.current_path
    assert hidden is not None and hidden.name == "." + journal_file_name(NS, 0)
    with open(hidden, "a", encoding="utf-8") as cut:  # a kill in the middle of a line
        cut.write('{"ns":"ns-0","seq":2,"ts":0,"op":"sc')
    (tmp_path / ("." + journal_file_name("ns-1", 7))).touch()  # an empty leftover
    (tmp_path / ".other").write_text("x")  # not a journal: left alone
    assert finish_open_files(tmp_path, "ns-2") == []
    assert finish_open_files(tmp_path) == [tmp_path / journal_file_name(NS, 0)]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other", journal_file_name(NS, 0)]
    read = read_journals(rotated_files(tmp_path, NS))
    assert len(read.records) == 2
    assert [(x.line_number, x.reason.split(":")[0]) for x in read.rejected] == [
        (3, "malformed JSON")]
    (tmp_path / ("." + journal_file_name(NS, 0))).write_text("{}\n")
    with pytest.raises(r.InvalidRequest, match="exists already"):
        finish_open_files(tmp_path)


def test_file_names_sort_in_sequence_order_and_parse_back() -> None:
    names = [journal_file_name("127.0.0.1:9876", s) for s in (0, 9, 10, 99_999, 10**15)]
    assert names == sorted(names)
    assert names[0] == "127.0.0.1_9876.0000000000000000.jsonl"
    assert [parse_journal_file_name(n) for n in names] == [
        ("127.0.0.1_9876", s) for s in (0, 9, 10, 99_999, 10**15)]
    for other in ("ns-0.jsonl", ".ns-0.0000000000000000.jsonl", "_ns-0.0000000000000000.jsonl",
                  "ns-0.000000000000001.jsonl", "ns-0.0000000000000000.json", "summary.json"):
        assert parse_journal_file_name(other) is None


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"rotate_every_ms": -1}, "rotate_every_ms"),
    ({"rotate_bytes": -5}, "rotate_bytes"),
    ({"rotate_every_ms": 1.5}, "rotate_every_ms"),
])
def test_bad_settings_name_the_field(tmp_path: Path, kwargs: dict[str, Any],
                                     field: str) -> None:
    with pytest.raises(r.InvalidRequest) as caught:
        RotatingJournal(tmp_path, NS, clock=r.ManualClock(), **kwargs)
    assert caught.value.field == field
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_and_a_line_without_seq_are_refused(tmp_path: Path) -> None:
    with pytest.raises(r.InvalidRequest) as caught:
        RotatingJournal(tmp_path / "missing", NS, clock=r.ManualClock())
    assert caught.value.field == "directory"
    sink = RotatingJournal(tmp_path, NS, clock=r.ManualClock())
    with pytest.raises(r.InvalidRequest) as bad:
        sink.write("hello\n")
    assert bad.value.field == "line"
    assert list(tmp_path.iterdir()) == []  # no partial write
    sink.write('{"ns":"ns-0","seq":3,"ts":0,"op":"scan"}\n')
    with pytest.raises(r.InvalidRequest, match="exists already") as twice:
        RotatingJournal(tmp_path, NS, clock=r.ManualClock()).write(
            '{"ns":"ns-0","seq":3,"ts":0,"op":"scan"}\n')
    assert twice.value.field == "seq"


# --------------------------------------------------------------------------- retention


def _journal_with_snapshots(folder: Path) -> tuple[list[Path], Replayer]:
    """A name server journal rotated every minute with a snapshot every 5 minutes; the
    whole replay's `Replayer`."""
    clock = r.ManualClock(start_ms=1_000)
    sink = RotatingJournal(folder, NS, clock=clock, rotate_every_ms=60_000)
    ns = JournalRecorder(r.RouteInfoManager(clock=clock), sink, nameserver_id=NS,
                         snapshot_every_ms=300_000)
    for step in range(40):  # 20 min: registrations every 30 s, one broker dies at 10 min
        for group in range(3 if step < 20 else 2):
            ns.register(_reg(group, counter=1 + step // 10))
        ns.scan_expired()
        clock.advance(30_000)
    sink.close()
    files = rotated_files(folder, NS)
    whole = Replayer()
    read = read_journals(files)
    assert read.ok
    list(replay(read.records, replayer=whole))
    return files, whole


def test_files_kept_from_a_snapshot_on_read_clean_and_replay_to_the_same_state(
        tmp_path: Path) -> None:
    files, whole = _journal_with_snapshots(tmp_path)
    starts = [p for p in files if '"op":"snapshot"' in p.read_text().split("\n", 1)[0]]
    assert len(starts) == 3  # at 5, 10 and 15 minutes
    for start in starts:
        kept = files[files.index(start):]
        read = read_journals(kept)
        assert read.ok, (read.rejected[:1], read.gaps)
        tail = Replayer()
        events = list(replay(read.records, replayer=tail))
        assert events[0].op == "snapshot"  # it starts the name server
        # and every later one agrees with the state replayed from it
        assert [e.result for e in events[1:] if e.op == "snapshot"] == [True] * (
            len(starts) - 1 - starts.index(start))
        assert r.snapshot_manager(tail.managers[NS]) == r.snapshot_manager(whole.managers[NS])


def test_files_kept_from_elsewhere_are_rejected_line_by_line_until_a_snapshot(
        tmp_path: Path) -> None:
    files, _ = _journal_with_snapshots(tmp_path)
    kept = files[1:]  # the operator deleted the first file only: it does not start at one
    assert '"op":"snapshot"' not in kept[0].read_text().split("\n", 1)[0]
    first_snapshot = next(i for i, p in enumerate(kept)
                          if '"op":"snapshot"' in p.read_text().split("\n", 1)[0])
    before = sum(len(p.read_text().splitlines()) for p in kept[:first_snapshot])
    read = read_journals(kept)
    assert len(read.rejected) == before > 0  # counted, every one
    assert {x.reason for x in read.rejected} == {
        "no header for name server 'ns-0' before this record (nor a snapshot: the journal's "
        "start is missing, e.g. older files were deleted; keep a name server's files from "
        "one that starts with a snapshot)"}
    assert read.rejected[0].source == os.fspath(kept[0]) and read.rejected[0].line_number == 1
    assert read.records[0].op == "snapshot" and not read.gaps
