"""Snapshot records in journals: the recorder writes them on schedule, the reader checks
them and ends table ids at them, the replay compares them with the state it rebuilt, and a
replay may start at any of them."""

from __future__ import annotations

import io
import json
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipeline_scenarios as _scenarios
import routing as r
from routing.journal import (
    JournalReader,
    JournalRecorder,
    JournalSnapshot,
    RejectedLine,
    Replayer,
    ReplayEvent,
    read_journal,
    replay,
)
from routing.journal._tables import tables_from_json, tables_to_json
from routing.sim import SimConfig, simulate
from routing.testing import strategies as rst

CLUSTER = "DefaultCluster"


def _reg(name: str = "broker-a", broker_id: int = 0, *, counter: int = 1,
         channel: Any = 1) -> r.Registration:
    return r.Registration(
        cluster=CLUSTER, broker_name=name, broker_id=broker_id,
        broker_addr=f"10.0.{ord(name[-1]) - 96}.{broker_id + 1}:10911",
        data_version=r.DataVersion(counter=counter), channel=channel,
        topics={t: r.TopicConfig(topic_name=t) for t in (name, "TopicX")})


def _recorded(**schedule: Any) -> tuple[r.ManualClock, JournalRecorder, io.StringIO]:
    clock = r.ManualClock(start_ms=1_000)
    sink = io.StringIO()
    return clock, JournalRecorder(r.RouteInfoManager(clock=clock), sink,
                                  nameserver_id="ns-0", **schedule), sink


def _docs(sink: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in sink.getvalue().splitlines()]


# --------------------------------------------------------------------------- the recorder


def test_a_snapshot_follows_the_first_line_after_the_interval():
    clock, ns, sink = _recorded(snapshot_every_ms=60_000)
    for _ in range(6):  # a registration every 30 s
        ns.register(_reg())
        clock.advance(30_000)
    docs = _docs(sink)
    assert [(d["seq"], d["ts"], d["op"]) for d in docs] == [
        (0, 1_000, "header"), (1, 1_000, "register"), (2, 31_000, "register"),
        (3, 61_000, "register"), (4, 61_000, "snapshot"), (5, 91_000, "register"),
        (6, 121_000, "register"), (7, 121_000, "snapshot"), (8, 151_000, "register")]
    # the table of a live address stays valid: the snapshot lists it
    assert ["table" in d["args"] for d in docs if d["op"] == "register"] == [
        True, False, False, False, False, False]
    snap = docs[4]
    assert list(snap) == ["ns", "seq", "ts", "op", "cluster", "broker_name", "broker_addr",
                          "args"]
    assert list(snap["args"]) == ["format", "state", "tables"]
    assert (snap["args"]["format"], snap["args"]["state"]["format"]) == (1, 1)
    assert snap["args"]["state"]["live"][0][4] == 61_000  # the refresh of the line before it
    assert snap["args"]["tables"] == {
        "topics": [["broker-a", 16, 16, 6, "SINGLE_TAG", 0, False, {}],
                   ["TopicX", 16, 16, 6, "SINGLE_TAG", 0, False, {}]],
        "tables": [[1, CLUSTER, "broker-a", 0, "10.0.1.1:10911", None, None, None, None,
                    [0, 0, 1], [0, 1], {}, None, False]]}
    assert (snap["cluster"], snap["broker_name"], snap["broker_addr"]) == (None, None, None)


def test_snapshots_by_record_count_and_on_demand():
    _clock, ns, sink = _recorded(snapshot_every_records=3)
    for _ in range(7):
        ns.heartbeat(cluster=CLUSTER, broker_addr="10.0.1.1:10911")
    ns.write_snapshot()
    assert [d["op"][0] for d in _docs(sink)] == list("hhhhshhhshs")
    assert read_journal(sink.getvalue().splitlines()).ok


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"snapshot_every_ms": 0}, "snapshot_every_ms"),
    ({"snapshot_every_records": "10"}, "snapshot_every_records"),
])
def test_a_bad_schedule_is_refused(kwargs, field):
    with pytest.raises(r.InvalidRequest) as caught:
        _recorded(**kwargs)
    assert caught.value.field == field


def _expired_and_back() -> list[str]:
    """broker-a stays, broker-b expires; a snapshot; both register again."""
    clock, ns, sink = _recorded(snapshot_every_ms=200_000)
    a, b = _reg("broker-a"), _reg("broker-b", channel=2)
    ns.register(a)
    ns.register(b)
    ns.register(b)  # a use of table 2: a line the reader remembers
    ns.query_data_version(cluster=CLUSTER, broker_addr=a.broker_addr,
                          data_version=a.data_version)
    for _ in range(6):
        clock.advance(30_000)
        ns.register(a)
        ns.scan_expired()
    clock.advance(30_000)
    ns.register(a)  # then the snapshot
    ns.query_data_version(cluster=CLUSTER, broker_addr=a.broker_addr,
                          data_version=a.data_version)
    ns.register(b)
    return sink.getvalue().splitlines()


def test_only_the_tables_of_live_addresses_survive_a_snapshot():
    docs = [json.loads(line) for line in _expired_and_back()]
    snap = next(d for d in docs if d["op"] == "snapshot")
    assert [t[0] for t in snap["args"]["tables"]["tables"]] == [1]  # broker-b's 2 is gone
    after = docs[docs.index(snap) + 1:]
    assert [(d["op"], d["args"]) for d in after] == [
        ("query_data_version", {"table_id": 1}),
        ("register", {"table_id": 3, "table": after[1]["args"]["table"], "channel": 2})]
    assert read_journal(_expired_and_back()).ok


# --------------------------------------------------------------------------- the reader


def _with_snapshot() -> list[str]:
    clock, ns, sink = _recorded(snapshot_every_ms=30_000)
    ns.register(_reg())
    clock.advance(30_000)
    ns.register(_reg())  # then the snapshot (seq 3)
    ns.register(_reg())  # table 1 still
    return sink.getvalue().splitlines()


def test_table_ids_not_listed_end_at_a_snapshot():
    lines = _expired_and_back()
    where = next(i for i, line in enumerate(lines) if '"op":"snapshot"' in line)
    last = json.loads(lines[-1])

    def after(doc: dict[str, Any]) -> list[str]:
        doc.update(seq=last["seq"] + 1, ts=last["ts"])
        return [*lines, json.dumps(doc, separators=(",", ":"))]

    old = json.loads(lines[3])  # a use of broker-b's table 2, from before the snapshot
    assert old["args"] == {"table_id": 2, "channel": 2}
    for remember in (True, False):
        reader = JournalReader(remember=remember)
        verdicts = [reader.feed(t, source="x", line_number=i)
                    for i, t in enumerate(after(old), 1)]
        assert [(v.line_number, v.reason) for v in verdicts
                if isinstance(v, RejectedLine)] == [(len(lines) + 1, "unknown table_id 2")]
    again = json.loads(lines[1])  # table 1 is defined again: listed by the snapshot
    result = read_journal(after(again))
    assert [b.reason for b in result.rejected] == [
        f"register: table_id 1 is already defined at <lines>:{where + 1}"]


def test_a_journal_may_begin_at_a_snapshot():
    lines = _with_snapshot()
    result = read_journal(lines[3:])
    assert result.ok
    assert [type(e).__name__ for e in result.records] == ["JournalSnapshot", "JournalRecord"]
    snap = result.records[0]
    assert isinstance(snap, JournalSnapshot)
    assert (snap.nameserver_id, snap.seq, snap.at_ms) == ("ns-0", 3, 31_000)
    assert [e.broker_name for e in snap.state.groups] == ["broker-a"]


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda d: d["args"].update(format=9), "invalid: snapshot: args.format must be 1"),
    (lambda d: d["args"]["state"].update(format=9), "invalid: snapshot.format must be 1"),
    (lambda d: d["args"]["state"]["live"][0].__setitem__(3, -1),
     "invalid: snapshot.live[0].broker_id must be an integer >= 0"),
    (lambda d: d["args"]["tables"]["tables"][0].__setitem__(4, "x"),
     "invalid: args.tables.tables[0][4] must be 'host:port'"),
    (lambda d: d["args"]["tables"]["topics"][0].__setitem__(3, 99),
     "invalid: args.tables.topics[0][3] must be"),
    (lambda d: d["args"].pop("tables"), "invalid: snapshot: args must hold"),
    (lambda d: d.update(cluster=CLUSTER), "invalid: snapshot: top-level cluster must be null"),
    (lambda d: d.update(extra=1), "invalid: snapshot: unknown field(s) 'extra'"),
    (lambda d: d.update(seq=2), "seq 2 of 'ns-0' is not after"),
    (lambda d: d.update(ts=5), "ts 5 of 'ns-0' is before"),
])
def test_a_bad_snapshot_is_rejected_and_changes_nothing(edit, reason):
    lines = _with_snapshot()
    doc = json.loads(lines[3])
    edit(doc)
    result = read_journal([*lines[:3], json.dumps(doc), *lines[4:]])
    assert [b.line_number for b in result.rejected] == [4]
    assert result.rejected[0].reason.startswith(reason)
    # the line after it still reads: the table it names was defined before
    assert [e.seq for e in result.records] == [0, 1, 2, 4]


def test_a_lost_snapshot_is_a_gap():
    lines = _with_snapshot()
    result = read_journal(lines[:3] + lines[4:])
    assert [(g.after_seq, g.next_seq) for g in result.gaps] == [(2, 4)]


# --------------------------------------------------------------------------- the replay


def _sim(snapshot_every_ms: int | None, seed: int = 5) -> Any:
    return simulate(SimConfig(groups=4, slaves=1, nameservers=3, duration_ms=1_800_000,
                              seed=seed, faults="heavy", clients=2,
                              snapshot_every_ms=snapshot_every_ms))


def _calls(events: list[ReplayEvent]) -> list[tuple[Any, ...]]:
    """What each call did, without sequence numbers (snapshots take some)."""
    return [(e.nameserver_id, e.op, e.at_ms, e.change, e.result) for e in events
            if e.op != "snapshot"]


@pytest.mark.parametrize("seed", [5, 6])
def test_snapshots_change_no_replayed_event_and_all_match(seed):
    plain, snapped = _sim(None, seed), _sim(120_000, seed)
    assert plain.changes == snapped.changes  # writing snapshots changes nothing live
    players = Replayer(), Replayer()
    events = [list(replay(sim.read_journals().records, replayer=p))
              for sim, p in zip((plain, snapped), players, strict=True)]
    assert _calls(events[0]) == _calls(events[1])
    checks = [e.result for e in events[1] if e.op == "snapshot"]
    assert len(checks) >= 3 * 14 and all(checks)
    restarts = [e for e in events[1] if e.op == "header" and e.seq > 0]
    assert restarts, "the heavy profile restarts a name server"
    for ns, manager in players[1].managers.items():
        assert r.snapshot_manager(manager) == r.snapshot_manager(players[0].managers[ns])


def test_a_replay_started_at_any_snapshot_continues_as_the_whole_one():
    sim = _sim(300_000)
    for ns in ("ns-0", "ns-1"):
        lines = sim.journal_lines(ns)
        whole = Replayer()
        events = list(replay(read_journal(lines).records, replayer=whole))
        starts = [i for i, line in enumerate(lines) if '"op":"snapshot"' in line]
        assert len(starts) >= 5
        for start in starts:
            part = Replayer()
            tail = list(replay(read_journal(lines[start:]).records, replayer=part))
            assert tail[0].op == "snapshot" and tail[0].result is None
            assert tail[1:] == events[start + 1:]
            assert r.snapshot_manager(part.managers[ns]) == \
                r.snapshot_manager(whole.managers[ns])


def test_a_snapshot_that_disagrees_with_the_replay_is_reported_not_applied():
    lines = _with_snapshot()
    doc = json.loads(lines[3])
    doc["args"]["state"]["live"][0][4] += 1  # a refresh the journal never saw
    records = read_journal([*lines[:3], json.dumps(doc), *lines[4:]]).records
    player = Replayer()
    events = list(replay(records, replayer=player))
    assert [(e.op, e.result) for e in events if e.op == "snapshot"] == [("snapshot", False)]
    live = player.managers["ns-0"].live_brokers()
    assert [v.last_update_timestamp for v in live.values()] == [31_000]
    quiet = list(replay(records, replayer=Replayer(check_snapshots=False)))
    assert [e.result for e in quiet if e.op == "snapshot"] == [None]


@given(regs=st.lists(rst.registrations(), max_size=6))
def test_the_compact_tables_read_back_equal(regs):
    tables = {i + 1: reg for i, reg in enumerate(regs)}
    back = tables_from_json(json.loads(json.dumps(tables_to_json(tables))))
    assert dict(back) == tables  # equality leaves the channel out
    assert [list(b.topics) for b in back.values()] == [list(t.topics) for t in tables.values()]


class _Ticking(r.ManualClock):
    """A clock that moves 1 ms at every reading: the recorder's reading and the manager's
    differ, as a system clock's do when a millisecond ends during a call."""

    def now_ms(self) -> int:
        self._now_ms += 1
        return self._now_ms


def test_lines_carry_the_time_the_manager_used():
    clock = _Ticking(start_ms=0)
    sink = io.StringIO()
    manager = r.RouteInfoManager(clock=clock)
    ns = JournalRecorder(manager, sink, nameserver_id="ns-0", snapshot_every_records=5)
    for i in range(12):
        ns.register(_reg(channel=i % 2))
        ns.heartbeat(cluster=CLUSTER, broker_addr=_reg().broker_addr)
        ns.heartbeat(cluster=CLUSTER, broker_addr="10.9.9.9:1")  # unknown: reads no clock
    player = Replayer()
    events = list(replay(read_journal(sink.getvalue().splitlines()).records, replayer=player))
    assert [e.result for e in events if e.op == "snapshot"] == [True] * 7
    assert r.snapshot_manager(player.managers["ns-0"]) == r.snapshot_manager(manager)


@settings(max_examples=25, deadline=None)
@given(ops=_scenarios.operations(min_size=10, max_size=80), seed=st.integers(0, 50),
       every=st.integers(2, 9))
def test_remembered_lines_across_snapshots_give_the_verdicts_of_a_full_parse(ops, seed, every):
    def with_snapshots(*args: Any, **kwargs: Any) -> JournalRecorder:
        return JournalRecorder(*args, snapshot_every_records=every, **kwargs)

    with mock.patch.object(_scenarios, "JournalRecorder", with_snapshots):
        played = _scenarios.play(ops, nameservers=2, config=seed % 3)
    damaged = _scenarios.damage(played, seed)
    lines = [line for pair in zip(*damaged.values(), strict=False) for line in pair]
    lines += lines[1::3]  # duplicates and out-of-order copies of remembered lines

    def read(remember: bool) -> tuple[list[Any], list[Any]]:
        reader = JournalReader(remember=remember)
        return ([reader.feed(t, source="x", line_number=i) for i, t in enumerate(lines, 1)],
                list(reader.gaps))

    assert read(True) == read(False)
