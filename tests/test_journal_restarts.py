"""A name server's journal across its restarts, clean or killed: every whole line is read.

A restarted ``routing serve --journal DIR`` writes a new file into DIR. Before 0.2 each file
numbered its lines from 0 again, and the reader rejected every line after the first file
(``seq 0 ... is not after the last accepted seq``). Now the writer goes on with the numbers
of the newest earlier file (`last_seq`), and the reader still reads the older journals: a
header that numbers from the start again, later than every accepted line, opens a new
epoch. Time only moves through `ManualClock`; the processes are real only where a kill is.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from routing.journal import (
    JournalHeader,
    JournalReader,
    JournalRecorder,
    Replayer,
    iter_journal,
    journal_file_name,
    last_seq,
    last_seq_of_files,
    read_journal,
    read_journals,
    replay,
    rotated_files,
)
from routing.pipeline import analyze_local
from routing.remoting import ResponseCode, serve
from test_remoting_host_ops import _start_serve, _stop
from test_remoting_server import TIMEOUT_S, Client, register, run

NS = "ns-a"


def _registration(group: int, counter: int = 1) -> r.Registration:
    name = f"broker-{group}"
    return r.Registration(
        cluster="c1", broker_name=name, broker_id=0, broker_addr=f"10.0.0.{group + 1}:10911",
        data_version=r.DataVersion(timestamp=1_700_000_000_000, counter=counter),
        topics={t: r.TopicConfig(topic_name=t) for t in (name, f"T{group % 3}", "Shared")},
        channel=f"conn-{group}")


def _life(directory: Path, clock: r.ManualClock, run_index: int, *, resume: bool,
          killed: bool, ns_id: str = NS) -> tuple[r.RouteInfoManager, int]:
    """One run of a name server into ``directory``: a new file, registrations (tables
    numbered from 1 again), heartbeats, scans; then a clean stop (an unregister) or a kill
    in the middle of a line. Returns the run's manager and its whole lines."""
    manager = r.RouteInfoManager(clock=clock)
    path = directory / f"{ns_id}-{clock.now_ms()}.jsonl"
    after = (last_seq_of_files(sorted(directory.glob(f"{ns_id}-*.jsonl"), reverse=True), ns_id)
             if resume else None)
    with open(path, "x", encoding="utf-8") as sink:
        ns = JournalRecorder(manager, sink, nameserver_id=ns_id, after_seq=after)
        groups = [run_index % 4, 4 + run_index % 3, 7]
        for g in groups:
            assert ns.register(_registration(g, counter=1 + run_index % 2)).accepted
        for _ in range(3):
            clock.advance(10_000)
            for g in groups:
                ns.register(_registration(g, counter=1 + run_index % 2))  # by table id
                ns.heartbeat(cluster="c1", broker_addr=f"10.0.0.{g + 1}:10911")
            ns.scan_expired()
        if killed:
            sink.write(f'{{"ns":"{ns_id}","seq":{ns.seq + 1},"ts":{clock.now_ms()},"op":"reg')
        else:
            ns.unregister(cluster="c1", broker_addr="10.0.0.8:10911", broker_name="broker-7",
                          broker_id=0)
    clock.advance(2_000)  # the restart takes time
    return manager, len(path.read_text().splitlines()) - int(killed)


def _restarted_journals(directory: Path, kills: list[bool], *, resume: bool,
                        ns_id: str = NS) -> tuple[r.RouteInfoManager, int]:
    """A name server's journal files over ``len(kills)`` runs (see `_life`)."""
    clock = r.ManualClock(start_ms=1_700_000_000_000)
    whole = 0
    manager = None
    for i, killed in enumerate(kills):
        manager, lines = _life(directory, clock, i, resume=resume, killed=killed,
                               ns_id=ns_id)
        whole += lines
    assert manager is not None
    return manager, whole


def _files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.jsonl"))


def _observable(manager: Any) -> dict[str, Any]:
    topics = sorted(manager.all_topics())
    return {"live": sorted(str(a) for a in manager.live_brokers()),
            "routes": {t: manager.pickup_route(t) for t in topics}}


KILLS = [False, True, False, True, True, False, False, True, False, True, False]


@pytest.mark.parametrize("resume", [False, True], ids=["numbered-from-0", "continued"])
def test_ten_restarts_clean_and_killed_every_whole_line_is_read(
        tmp_path: Path, resume: bool) -> None:
    live, whole = _restarted_journals(tmp_path, KILLS, resume=resume)
    files = _files(tmp_path)
    assert len(files) == 11
    result = read_journals(files)
    # only the line each kill cut short is set aside; nothing is missing
    assert len(result.records) == whole
    assert [(Path(b.source).name, b.reason.split(":")[0]) for b in result.rejected] == [
        (f.name, "malformed JSON") for f, killed in zip(files, KILLS, strict=True) if killed]
    assert result.gaps == ()
    headers = [e for e in result.records if isinstance(e, JournalHeader)]
    assert len(headers) == 11
    # one increasing order per name server over every file
    seqs = [e.seq for e in result.records]
    assert seqs == list(range(len(seqs)))
    if resume:  # the writer went on with the numbers: the entries carry the lines' own
        assert seqs == [json.loads(line)["seq"] for f in files
                        for line in f.read_text().splitlines() if line.endswith("}")]
    # the reader without its memory of known lines gives the same verdicts
    slow = JournalReader(remember=False)
    fed = [item for f in files for item in iter_journal(f, reader=slow)]
    assert [getattr(i, "seq", None) for i in fed if not hasattr(i, "reason")] == seqs
    # the replay of the last run equals the live manager after it
    player = Replayer()
    for _ in replay(result.records, replayer=player):
        pass
    assert _observable(player.managers[NS]) == _observable(live)
    # the pipeline counts the restarts and only the cut lines as rejected
    tables = analyze_local(tmp_path)
    (row,) = tables["name_servers"]
    assert (row["restarts"], row["gaps"], row["records"]) == (10, 0, whole - 11)
    # (a cut line names no name server it could be counted for)
    assert [(Path(x["source"]).name, x["line"]) for x in tables["rejected"]] == [
        (b.source.rpartition("/")[2], b.line_number) for b in result.rejected]
    assert {r_["end_reason"] for r_ in tables["sessions"]} >= {"restart", "unregistered"}


@settings(max_examples=25, deadline=None)
@given(kills=st.lists(st.booleans(), min_size=1, max_size=6),
       resume=st.lists(st.booleans(), min_size=6, max_size=6))
def test_any_restart_history_reads_whole(kills: list[bool], resume: list[bool]) -> None:
    """Runs that continue the numbers and runs that start them again, in any mix (an old
    name server upgraded in the middle, or back): every whole line read, one order."""
    import tempfile

    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        clock = r.ManualClock(start_ms=1_700_000_000_000)
        whole, live = 0, None
        for i, killed in enumerate(kills):
            live, lines = _life(directory, clock, i, resume=resume[i], killed=killed)
            whole += lines
        result = read_journals(_files(directory))
        assert len(result.records) == whole and result.gaps == ()
        assert len(result.rejected) == sum(kills)
        assert [e.seq for e in result.records] == list(range(whole))
        player = Replayer()
        for _ in replay(result.records, replayer=player):
            pass
        assert _observable(player.managers[NS]) == _observable(live)


def test_a_copy_of_a_journal_read_twice_is_still_rejected() -> None:
    """A new epoch needs a header later than every accepted line: a duplicated file (the
    same header again) is rejected line by line, as before."""
    sink = io.StringIO()
    clock = r.ManualClock(start_ms=5_000)
    ns = JournalRecorder(r.RouteInfoManager(clock=clock), sink, nameserver_id=NS)
    ns.register(_registration(1))
    clock.advance(1_000)
    ns.scan_expired()
    lines = sink.getvalue().splitlines()
    result = read_journals([lines, lines])
    assert len(result.records) == 3 and len(result.rejected) == 3
    assert "a restart header that numbers from zero again must start after the last accepted " \
        "ts" in result.rejected[0].reason


def test_a_table_is_redefined_only_after_a_restart_header() -> None:
    """A restarted recorder numbers its tables from 1 again: a definition after a restart
    header replaces the old one; without a header in between it is still an error."""
    clock = r.ManualClock(start_ms=0)
    first = io.StringIO()
    JournalRecorder(r.RouteInfoManager(clock=clock), first, nameserver_id=NS).register(
        _registration(1))
    clock.advance(10)
    second = io.StringIO()
    ns = JournalRecorder(r.RouteInfoManager(clock=clock), second, nameserver_id=NS,
                         after_seq=1)
    ns.register(_registration(2))  # table 1 again, another broker
    ns.register(_registration(2))  # a reference: the new table
    one, two = first.getvalue().splitlines(), second.getvalue().splitlines()
    result = read_journals([one, two])
    assert result.ok and [e.seq for e in result.records] == [0, 1, 2, 3, 4]
    assert [e.call.registration.broker_name for e in result.records[3:]] == ["broker-2"] * 2
    again = read_journals([[*one, one[1].replace('"seq":1', '"seq":2')]])
    assert [b.reason for b in again.rejected] == [
        "register: table_id 1 is already defined at <lines>:2"]


def test_last_seq_reads_the_end_of_a_file_and_passes_over_a_cut_line(tmp_path: Path) -> None:
    sink = io.StringIO()
    clock = r.ManualClock(start_ms=0)
    ns = JournalRecorder(r.RouteInfoManager(clock=clock), sink, nameserver_id=NS)
    big = r.Registration(cluster="c1", broker_name="broker-9", broker_id=0,
                         broker_addr="10.0.0.9:10911",
                         topics={f"T{i:05}": r.TopicConfig(topic_name=f"T{i:05}")
                                 for i in range(2_000)})
    ns.register(big)  # a line of about 400 KB: longer than the first look at the end
    ns.scan_expired()
    text = sink.getvalue()
    plain = tmp_path / "a.jsonl"
    plain.write_text(text)
    assert last_seq(plain, NS) == 2 and last_seq(plain, "other") is None
    plain.write_text(text + '{"ns":"ns-a","seq":3,"ts":0,"op":"sc')  # killed mid-line
    assert last_seq(plain, NS) == 2
    cut = text.splitlines()
    plain.write_text(cut[0] + "\n" + cut[1] + "\n")  # the long line last
    assert last_seq(plain, NS) == 1
    zipped = tmp_path / "b.jsonl.gz"
    with gzip.open(zipped, "wt") as out:
        out.write(text + '{"ns":"ns-a","seq":3')
    assert last_seq(zipped, NS) == 2
    empty = tmp_path / "c.jsonl"
    empty.write_text("")
    assert last_seq(empty, NS) is None
    assert last_seq_of_files([empty, plain], NS) == 1
    with pytest.raises(r.RoutingError, match="after_seq"):
        JournalRecorder(r.RouteInfoManager(clock=clock), io.StringIO(), nameserver_id=NS,
                        after_seq=-1)


def _serve_once(directory: Path) -> None:
    """One life of an in-process `serve` journaling into ``directory``: a registration."""
    async def scenario() -> None:
        stop = asyncio.Event()
        listening: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(serve(
            "127.0.0.1", 0, journal_dir=directory, nameserver_id=NS, stop_event=stop,
            install_signal_handlers=False, on_listening=listening.set_result))
        broker = await Client.connect(await asyncio.wait_for(listening, TIMEOUT_S))
        ok = await register(broker, "broker-a", "127.0.0.1:10911", "T1", "T2")
        assert ok.code == ResponseCode.SUCCESS
        broker.close()
        stop.set()
        await asyncio.wait_for(task, TIMEOUT_S)

    run(scenario)


def test_serve_restarted_into_its_journal_directory_continues_the_numbers(
        tmp_path: Path) -> None:
    """``routing serve --journal J`` stopped and started again: the second file's header
    is a restart numbered after the first file's last line; the folder reads whole. The
    third life is killed (SIGKILL) and a fourth starts after it."""
    journal = tmp_path / "J"
    for _ in range(2):
        _serve_once(journal)
    proc, port, _ = _start_serve(["--journal", str(journal), "--nameserver-id", NS])
    try:
        async def registered() -> None:
            broker = await Client.connect(("127.0.0.1", port))
            assert (await register(broker, "broker-b", "127.0.0.1:10921", "T1", "T3")).code == \
                ResponseCode.SUCCESS
            broker.close()

        run(registered)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=TIMEOUT_S)
        proc, port, _ = _start_serve(["--journal", str(journal), "--nameserver-id", NS])
        run(registered)
        _stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT_S)
    files = _files(journal)
    assert len(files) == 4
    headers = [json.loads(f.read_text().splitlines()[0])["seq"] for f in files]
    lasts = [json.loads(f.read_text().splitlines()[-1])["seq"] for f in files]
    assert headers[0] == 0 and headers[1:] == [n + 1 for n in lasts[:-1]]
    result = read_journals(files)
    assert result.ok, (result.rejected, result.gaps)
    (row,) = analyze_local(journal)["name_servers"]
    assert (row["restarts"], row["rejected"], row["gaps"]) == (3, 0, 0)
    assert read_journal(files[-1]).rejected == ()  # a file alone still reads (its header)


def test_serve_goes_on_after_a_kill_that_cut_the_first_line_of_a_file(tmp_path: Path) -> None:
    """A kill in the middle of a file's first line (a long snapshot line is written in
    pieces) leaves a hidden file with no whole line, whose name holds that line's seq: the
    next start renames it into place and numbers its header after it, so no name is used
    twice; the cut line is rejected and its seq is a gap."""
    journal = tmp_path / "J"
    _serve_once(journal)
    [first] = rotated_files(journal, NS)
    last = json.loads(first.read_text().splitlines()[-1])["seq"]
    cut = journal / ("." + journal_file_name(NS, last + 1))
    cut.write_text('{"ns":"ns-a","seq":' + str(last + 1) + ',"ts":1,"op":"snap')
    _serve_once(journal)
    files = rotated_files(journal, NS)
    assert [f.name for f in files] == [first.name, cut.name[1:],
                                       journal_file_name(NS, last + 2)]
    result = read_journals(files)
    assert [(x.source, x.line_number) for x in result.rejected] == [(str(files[1]), 1)]
    assert [(g.after_seq, g.next_seq) for g in result.gaps] == [(last, last + 2)]
    assert [e.seq for e in result.records if e.op == "header"] == [0, last + 2]


def test_the_rejected_lines_table_counts_each_kind_of_reason_once() -> None:
    """The summary's "Rejected lines" table: one row per kind of reason (names and numbers
    vary within a kind: here every seq of a name server whose id holds a colon), with its
    first and last line, never cut in the middle of a name."""
    from rich.console import Console

    from routing.pipeline._summary import render_summary, summarize_rows, summary_json

    sink = io.StringIO()
    clock = r.ManualClock(start_ms=5_000)
    ns = JournalRecorder(r.RouteInfoManager(clock=clock), sink, nameserver_id="127.0.0.1:9876")
    for _ in range(6):
        clock.advance(1_000)
        ns.scan_expired()
    lines = sink.getvalue().splitlines()
    tables = analyze_local({"a.jsonl": lines, "b.jsonl": [*lines, "not json", "{"]})
    summary = summarize_rows(tables)
    kinds = [(k["reason"], k["lines"], k["first"], k["last"]) for k in summary.rejected_kinds]
    assert kinds == [
        ("seq # of '*' is not after the last accepted seq # (duplicate or out of order)", 6,
         ("b.jsonl", 2), ("b.jsonl", 7)),
        ("seq # of '*' is not after the last accepted seq # (duplicate or out of order; a "
         "restart header that numbers from zero again must start after the last accepted ts)",
         1, ("b.jsonl", 1), ("b.jsonl", 1)),
        ("malformed JSON: Expecting value: line # column # (char #)", 1, ("b.jsonl", 8),
         ("b.jsonl", 8)),
        ("malformed JSON: Expecting property name enclosed in double quotes: line # column # "
         "(char #)", 1, ("b.jsonl", 9), ("b.jsonl", 9))]
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=250, color_system=None))
    text = out.getvalue()
    assert "Rejected lines: 9 of 4 kinds" in text
    row = next(line for line in text.splitlines() if "(duplicate or out of order)" in line)
    assert [c.strip() for c in row.split("│")[1:5]] == [
        "seq # of '*' is not after the last accepted seq # (duplicate or out of order)", "6",
        "b.jsonl:2", "b.jsonl:7"]
    doc = summary_json(summary)["rejected"]
    assert doc["by_kind"][0]["first"] == ["b.jsonl", 2] and doc["total"] == 9
