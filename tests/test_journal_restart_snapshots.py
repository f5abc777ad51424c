"""Restarts and snapshots in one journal: an in-process restart (`JournalRecorder.restart`)
and a new process (a second file, tables numbered from 1 again), snapshots before and after
each header. The sequence goes on over headers and snapshots (``after_seq``), or, for a
writer that numbers from 0 again, the reader renumbers the second epoch's snapshots like
its records; the whole replay agrees with every snapshot, a replay starting at any snapshot
ends in the live state, and the pipeline's reference reads it without a rejection, split at
its snapshots or whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import routing as r
from routing.journal import (
    JournalRecorder,
    JournalSnapshot,
    Replayer,
    ReplayEvent,
    last_seq,
    read_journal,
    read_journals,
    replay,
)
from routing.pipeline import analyze_local
from split_replay import analyze_split

CLUSTER = "DefaultCluster"
EVERY_MS = 60_000


def _reg(name: str, counter: int, channel: int) -> r.Registration:
    return r.Registration(
        cluster=CLUSTER, broker_name=name, broker_id=0,
        broker_addr=f"10.0.{ord(name[-1]) - 96}.1:10911",
        data_version=r.DataVersion(counter=counter), channel=channel,
        topics={t: r.TopicConfig(topic_name=t) for t in (name, f"Topic-{counter}")})


def _steps(recorder: JournalRecorder, clock: r.ManualClock, counter: int, n: int) -> None:
    for i in range(n):
        recorder.register(_reg("broker-a", counter, 1))
        if i % 3 != 2:  # broker-b goes quiet now and then: scans remove it
            recorder.register(_reg("broker-b", counter, 2))
        clock.advance(30_000)
        recorder.scan_expired()


def _two_runs(tmp_path: Path, *, continue_seq: bool
              ) -> tuple[list[Path], r.ManagerSnapshot]:
    """Two journal files of ``ns-0``: the first with an in-process restart, the second
    written by a new recorder (``after_seq`` read from the first file, or none: numbered
    from 0 again). Returns the files and the live state at the end."""
    clock = r.ManualClock(start_ms=1_700_000_000_000)
    first, second = tmp_path / "ns-0-1.jsonl", tmp_path / "ns-0-2.jsonl"
    with first.open("w") as sink:
        recorder = JournalRecorder(r.RouteInfoManager(clock=clock), sink,
                                   nameserver_id="ns-0", snapshot_every_ms=EVERY_MS)
        _steps(recorder, clock, 1, 12)
        clock.advance(1_000)
        recorder.restart(r.RouteInfoManager(clock=clock))  # same process, tables kept
        _steps(recorder, clock, 1, 10)
        _steps(recorder, clock, 2, 6)  # new tables after the restart
    clock.advance(5_000)
    after = last_seq(first, "ns-0") if continue_seq else None
    manager = r.RouteInfoManager(clock=clock)
    with second.open("w") as sink:
        recorder = JournalRecorder(manager, sink, nameserver_id="ns-0", after_seq=after,
                                   snapshot_every_ms=EVERY_MS)
        _steps(recorder, clock, 3, 12)  # its tables are numbered from 1 again
        recorder.write_snapshot()
        _steps(recorder, clock, 3, 2)
    return [first, second], r.snapshot_manager(manager)


def _lines(files: list[Path]) -> list[str]:
    return [line for f in files for line in f.read_text().splitlines()]


def _calls(events: list[ReplayEvent]) -> list[tuple[Any, ...]]:
    return [(e.op, e.at_ms, e.change, e.result) for e in events]


@pytest.mark.parametrize("continue_seq", [True, False])
def test_restarts_and_snapshots_read_and_replay_whole(tmp_path, continue_seq):
    files, live = _two_runs(tmp_path, continue_seq=continue_seq)
    raw = [json.loads(line) for line in _lines(files)]
    headers = [i for i, doc in enumerate(raw) if doc["op"] == "header"]
    snaps = [i for i, doc in enumerate(raw) if doc["op"] == "snapshot"]
    assert len(headers) == 3  # start, in-process restart, new process
    for start, end in zip(headers, [*headers[1:], len(raw)], strict=True):
        assert any(start < i < end for i in snaps), "a snapshot after every header"
    if continue_seq:  # the writer's numbers go on over headers and snapshots
        assert [doc["seq"] for doc in raw] == list(range(len(raw)))
    else:  # the new process numbered from 0 again
        assert raw[headers[2]]["seq"] == 0
    read = read_journals(files)
    assert read.ok and not read.rejected and not read.gaps
    seqs = [e.seq for e in read.records]
    assert seqs == list(range(len(raw)))  # one increasing order, snapshots renumbered too
    assert [e.seq for e in read.records if isinstance(e, JournalSnapshot)] == snaps
    player = Replayer()
    events = list(replay(read.records, replayer=player))
    checks = [e.result for e in events if e.op == "snapshot"]
    assert len(checks) == len(snaps) and all(check is True for check in checks)
    assert r.snapshot_manager(player.managers["ns-0"]) == live


@pytest.mark.parametrize("continue_seq", [True, False])
def test_a_replay_starting_at_any_snapshot_ends_in_the_live_state(tmp_path, continue_seq):
    files, live = _two_runs(tmp_path, continue_seq=continue_seq)
    lines = _lines(files)
    whole = list(replay(read_journal(lines).records))
    snaps = [i for i, line in enumerate(lines) if '"op":"snapshot"' in line]
    assert len(snaps) >= 6
    for start in snaps:
        read = read_journal(lines[start:])
        assert read.ok and not read.rejected and not read.gaps, start
        player = Replayer()
        events = list(replay(read.records, replayer=player))
        assert events[0].op == "snapshot" and events[0].result is None  # it starts there
        assert _calls(events[1:]) == _calls(whole[start + 1:]), start
        if continue_seq:  # the numbers are the line's own: equal to the whole read's
            assert [e.seq for e in events] == [e.seq for e in whole[start:]]
        assert r.snapshot_manager(player.managers["ns-0"]) == live, start


def test_the_reference_reads_it_whole_and_split_at_its_snapshots(tmp_path):
    files, _live = _two_runs(tmp_path, continue_seq=True)
    journals = {f.name: f.read_text().splitlines() for f in files}
    whole = analyze_local(journals, at=(1_700_000_600_000,))
    assert whole["rejected"] == []
    split, info = analyze_split(journals, at=(1_700_000_600_000,))
    assert info["ns-0"].segments >= 6 and info["ns-0"].replayed_again == 0
    assert split.keys() == whole.keys()
    for table in whole:
        assert split[table] == whole[table], table
