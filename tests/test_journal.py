"""Tests of `routing.journal`: the recorder's format, the reader's validation, replay equality.

Time only moves through `ManualClock`; random operation sequences use fixed seeds.
"""

from __future__ import annotations

import gzip
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

import routing as r
from routing.journal import (
    JOURNAL_VERSION,
    JournalChannel,
    JournalHeader,
    JournalRecord,
    JournalRecorder,
    Register,
    Replayer,
    ReplayError,
    open_journal,
    read_journal,
    read_journals,
    replay,
)

CLUSTER = "DefaultCluster"


def topics(*names: str, queues: int = 4) -> dict[str, r.TopicConfig]:
    return {n: r.TopicConfig(topic_name=n, read_queue_nums=queues, write_queue_nums=queues)
            for n in names}


def registration(name: str = "broker-a", broker_id: int = 0, *, counter: int = 1,
                 names: tuple[str, ...] = ("TopicA", "TopicB"), channel: Any = None,
                 **kwargs: Any) -> r.Registration:
    host = f"10.0.{ord(name[-1]) % 200}.{broker_id + 1}"
    kwargs.setdefault("enable_acting_master", False)
    return r.Registration(
        cluster=CLUSTER, broker_name=name, broker_id=broker_id, broker_addr=f"{host}:10911",
        ha_server_addr=f"{host}:10912",
        data_version=r.DataVersion(timestamp=1_700_000_000_000, counter=counter),
        topics=topics(*names), channel=channel, **kwargs)


class Live:
    """A recorded manager plus everything its listener saw."""

    def __init__(self, *, nameserver_id: str = "ns-0", start_ms: int = 1_000,
                 config: r.RoutingConfig | None = None) -> None:
        self.clock = r.ManualClock(start_ms=start_ms)
        self.sink = io.StringIO()
        self.changes: list[tuple[int, r.RouteChange]] = []
        self.manager = r.RouteInfoManager(clock=self.clock, config=config,
                                          listener=self._listen)
        self.ns = JournalRecorder(self.manager, self.sink, nameserver_id=nameserver_id)

    def _listen(self, change: r.RouteChange) -> None:
        self.changes.append((self.ns.seq + 1, change))

    def lines(self) -> list[str]:
        return self.sink.getvalue().splitlines()


def observable(mgr: r.RouteInfoManager) -> dict[str, Any]:
    names = mgr.all_topics()
    return {"routes": {t: mgr.pickup_route(t) for t in names},
            "cluster": mgr.cluster_info(),
            "live": {k: (v.last_update_timestamp, v.heartbeat_timeout_ms, v.data_version,
                         v.generation, v.channel) for k, v in mgr.live_brokers().items()},
            "system": mgr.system_topics()}


# --------------------------------------------------------------------------- format


def test_header_is_the_first_line_and_carries_the_config() -> None:
    config = r.RoutingConfig(default_heartbeat_timeout_ms=30_000, wait_for_service_ms=45_000)
    live = Live(config=config, start_ms=5_000)
    header = json.loads(live.lines()[0])
    assert header["journal"] == "routing"
    assert header["version"] == JOURNAL_VERSION == 1
    assert header["nameserver"] == header["ns"] == "ns-0"
    assert header["start_ms"] == header["ts"] == 5_000
    assert (header["seq"], header["op"]) == (0, "header")
    assert header["config"]["default_heartbeat_timeout_ms"] == 30_000
    parsed = read_journal(live.lines()).records[0]
    assert isinstance(parsed, JournalHeader)
    assert parsed.config == config


def test_every_operation_has_flat_partition_columns() -> None:
    live = Live()
    ns = live.ns
    reg = registration(channel="conn-1")
    ns.register(reg)
    ns.heartbeat(cluster=CLUSTER, broker_addr=reg.broker_addr)
    ns.query_data_version(cluster=CLUSTER, broker_addr=reg.broker_addr,
                          data_version=reg.data_version)
    ns.wipe_write_perm("broker-a")
    ns.add_write_perm("broker-a")
    ns.register_topic("TopicC", [r.QueueData(broker_name="broker-a")])
    ns.delete_topic("TopicC", CLUSTER)
    ns.scan_expired()
    ns.on_channel_closed("conn-1")
    ns.register(reg)
    ns.unregister(cluster=CLUSTER, broker_addr=reg.broker_addr, broker_name="broker-a",
                  broker_id=0, generation=1)
    ns.unregister_many([r.UnregisterRequest(cluster=CLUSTER, broker_addr=reg.broker_addr,
                                            broker_name="broker-a", broker_id=0)])
    docs = [json.loads(line) for line in live.lines()[1:]]
    assert [d["seq"] for d in docs] == list(range(1, len(docs) + 1))
    for d in docs:
        assert list(d) == ["ns", "seq", "ts", "op", "cluster", "broker_name", "broker_addr",
                           "args"]
    cols = {d["op"]: (d["cluster"], d["broker_name"], d["broker_addr"]) for d in docs}
    addr = reg.broker_addr
    assert cols == {
        "register": (CLUSTER, "broker-a", addr),
        "heartbeat": (CLUSTER, "broker-a", addr),  # the recorder's hint from the registration
        "query_data_version": (CLUSTER, "broker-a", addr),
        "wipe_write_perm": (None, "broker-a", None),
        "add_write_perm": (None, "broker-a", None),
        "register_topic": (None, "broker-a", None),
        "delete_topic": (CLUSTER, None, None),
        "scan": (None, None, None),
        "channel_closed": (None, None, None),
        "unregister": (CLUSTER, "broker-a", addr),
        "unregister_many": (CLUSTER, "broker-a", addr),
    }
    assert read_journal(live.lines()).ok


def test_table_is_written_once_per_address_and_version() -> None:
    live = Live()
    first = registration(channel=7)
    live.ns.register(first)
    for _ in range(3):
        live.clock.advance(30_000)
        live.ns.register(registration(channel=7))  # equal table, a new object each time
    live.clock.advance(30_000)
    live.ns.register(registration(counter=2, names=("TopicA", "TopicB", "TopicC"), channel=7))
    docs = [json.loads(line) for line in live.lines()[1:]]
    assert [("table" in d["args"], d["args"]["table_id"]) for d in docs] == [
        (True, 1), (False, 1), (False, 1), (False, 1), (True, 2)]
    assert all(d["args"]["channel"] == 7 for d in docs)
    assert registration_from(docs[0]) == first


def registration_from(doc: dict[str, Any]) -> r.Registration:
    return r.Registration.from_json(doc["args"]["table"])


def test_heartbeat_with_unchanged_version_costs_under_200_bytes() -> None:
    """A realistic 5.x registration (names as long as RocketMQ's defaults, 1 000 topics)."""
    live = Live()
    names = tuple(f"Topic-{i:04d}" for i in range(1_000))
    reg = registration("broker-a", names=names, channel=123_456)
    live.ns.register(reg)
    live.clock.set(86_400_000)
    live.ns.register(registration("broker-a", names=names, channel=123_456))
    live.ns.query_data_version(cluster=CLUSTER, broker_addr=reg.broker_addr,
                               data_version=reg.data_version)
    live.ns.heartbeat(cluster=CLUSTER, broker_addr=reg.broker_addr)
    first, again, query, beat = (len(line.encode()) + 1 for line in live.lines()[1:])
    assert json.loads(live.lines()[3])["args"] == {"table_id": 1}  # the version of table 1
    assert first > 50_000
    assert again < 200
    assert beat < 200
    assert query < 200
    records = read_journal(live.lines()).records
    assert [e.result for e in replay(records)][3] == r.VersionAnswer(
        changed=False, stored=reg.data_version)


def test_fast_register_line_equals_the_generic_encoding() -> None:
    live = Live()
    live.ns.register(registration(channel=("10.0.0.9", 4)))
    live.ns.register(registration(channel=("10.0.0.9", 4)))
    for line in live.lines():
        assert json.dumps(json.loads(line), separators=(",", ":"), ensure_ascii=False) == line


def test_calls_that_raise_are_not_written() -> None:
    live = Live()
    with pytest.raises(r.InvalidRequest):
        live.ns.register_topic("TopicX", [r.QueueData(broker_name="no-such-group")])
    with pytest.raises(r.InvalidRequest):
        live.ns.heartbeat(cluster="has space", broker_addr="10.0.0.1:1")
    live.ns.scan_expired()
    assert [json.loads(x)["seq"] for x in live.lines()] == [0, 1]


def test_recorder_refuses_a_manager_with_history() -> None:
    mgr = r.RouteInfoManager(clock=r.ManualClock())
    mgr.register(registration())
    with pytest.raises(ValueError, match="fresh manager"):
        JournalRecorder(mgr, io.StringIO(), nameserver_id="ns-0")


def test_reads_are_forwarded_and_not_written() -> None:
    live = Live()
    live.ns.register(registration())
    assert live.ns.pickup_route("TopicA") == live.manager.pickup_route("TopicA")
    assert live.ns.all_topics() == ("TopicA", "TopicB")
    assert live.ns.broker_member_group(CLUSTER, "broker-a").broker_addrs == {
        0: registration().broker_addr}
    live.ns.check_invariants()
    assert len(live.lines()) == 2


# --------------------------------------------------------------------------- reader


def _journal() -> list[str]:
    live = Live()
    live.ns.register(registration(channel=1))
    live.clock.advance(30_000)
    live.ns.register(registration(channel=1))
    live.clock.advance(5_000)
    live.ns.scan_expired()
    return live.lines()


@pytest.mark.parametrize(("mutate", "line", "reason"), [
    (lambda ls: ls.insert(2, "{not json"), 3, "malformed JSON"),
    (lambda ls: ls.insert(2, "[1, 2]"), 3, "not a JSON object"),
    (lambda ls: ls.insert(2, ""), 3, "blank line"),
    (lambda ls: ls.append(ls[-1]), 5, "duplicate or out of order"),
    (lambda ls: ls.append(ls[-1].replace('"seq":3', '"seq":9').replace('"ts":36000', '"ts":1')),
     5, "time must not go backwards"),
    (lambda ls: ls.append(ls[-1].replace('"op":"scan"', '"op":"explode"').replace(
        '"seq":3', '"seq":4')), 5, "unknown op 'explode'"),
    (lambda ls: ls.append(ls[-1].replace('"ns":"ns-0"', '"ns":"ns-9"')), 5,
     "no header for name server 'ns-9'"),
    (lambda ls: ls.append(ls[2].replace('"table_id":1', '"table_id":5').replace(
        '"seq":2', '"seq":4').replace('"ts":31000', '"ts":36000')), 5, "unknown table_id 5"),
    (lambda ls: ls.append(ls[-1].replace('"args":{}', '"args":{"x":1}').replace(
        '"seq":3', '"seq":4')), 5, "unknown args field(s) 'x'"),
    (lambda ls: ls.append(ls[-1].replace('"args":{}', '"args":{},"extra":1').replace(
        '"seq":3', '"seq":4')), 5, "unknown field(s) 'extra'"),
    (lambda ls: ls.insert(0, ls[0].replace('"version":1', '"version":2')), 1,
     "unsupported journal version 2"),
    (lambda ls: ls.append(ls[2].replace('"broker_name":"broker-a"', '"broker_name":"b-x"')
                          .replace('"seq":2', '"seq":4').replace('"ts":31000', '"ts":36000')),
     5, "differs from the table's"),
])
def test_reader_sets_bad_lines_aside_with_reason_and_line_number(
        mutate: Any, line: int, reason: str) -> None:
    lines = _journal()
    mutate(lines)
    result = read_journal(lines)
    assert len(result.rejected) == 1
    bad = result.rejected[0]
    assert (bad.source, bad.line_number) == ("<lines>", line)
    assert reason in bad.reason
    assert bad.text == lines[line - 1]
    assert len(result.records) + len(result.rejected) == len(lines)  # nothing dropped


def test_a_rejected_table_makes_its_references_rejected_too() -> None:
    lines = _journal()
    lines[1] = lines[1].replace('"readQueueNums":4', '"readQueueNums":-4', 1)
    result = read_journal(lines)
    assert [b.line_number for b in result.rejected] == [2, 3]
    assert "bad table 1" in result.rejected[0].reason
    assert "its definition at <lines>:2 was rejected" in result.rejected[1].reason
    assert [(g.after_seq, g.next_seq) for g in result.gaps] == [(0, 3)]
    assert not result.ok


def test_a_truncated_last_line_is_rejected_not_dropped() -> None:
    lines = _journal()
    lines[-1] = lines[-1][:40]
    result = read_journal(lines)
    assert [b.line_number for b in result.rejected] == [len(lines)]
    assert result.rejected[0].reason.startswith("malformed JSON")


def test_gzip_journal_is_deterministic_and_readable(tmp_path: Path) -> None:
    lines = _journal()
    for name in ("a.jsonl.gz", "b.jsonl.gz"):
        with open_journal(tmp_path / name, "w") as handle:
            handle.write("\n".join(lines) + "\n")
    assert (tmp_path / "a.jsonl.gz").read_bytes() == (tmp_path / "b.jsonl.gz").read_bytes()
    assert gzip.decompress((tmp_path / "a.jsonl.gz").read_bytes()).decode().splitlines() == lines
    result = read_journal(tmp_path / "a.jsonl.gz")
    assert result.ok
    assert len(result.records) == len(lines)
    assert read_journal(str(tmp_path / "a.jsonl.gz")).records == result.records


def test_journals_of_several_name_servers_read_together(tmp_path: Path) -> None:
    paths = []
    for i in range(2):
        live = Live(nameserver_id=f"ns-{i}")
        live.ns.register(registration())
        path = tmp_path / f"ns-{i}.jsonl"
        path.write_text(live.sink.getvalue())
        paths.append(path)
    result = read_journals(paths)
    assert result.ok
    assert result.nameservers == ("ns-0", "ns-1")
    assert {e.nameserver_id for e in result.records} == {"ns-0", "ns-1"}


# --------------------------------------------------------------------------- replay


def _check_replay(live: Live) -> list[Any]:
    result = read_journal(live.lines())
    assert result.ok, result.rejected
    player = Replayer()
    events = list(replay(result.records, replayer=player))
    replayed = [(e.seq, e.change) for e in events if e.change is not None]
    assert replayed == live.changes
    assert observable(player.managers["ns-0"]) == observable(live.manager)
    player.managers["ns-0"].check_invariants()
    return events


def test_replay_gives_the_same_events_routes_and_results() -> None:
    live = Live(config=r.RoutingConfig(support_acting_master=True,
                                       notify_min_broker_id_changed=True))
    ns, clock = live.ns, live.clock
    a0 = registration("broker-a", 0, channel="a0", enable_acting_master=None)
    a1 = registration("broker-a", 1, channel="a1")
    b0 = registration("broker-b", 0, names=("TopicB", "TopicC"), channel="b0")
    results: list[Any] = [ns.register(a0), ns.register(a1), ns.register(b0)]
    clock.advance(30_000)
    results.append(ns.heartbeat(cluster=CLUSTER, broker_addr=a1.broker_addr))
    results.append(ns.query_data_version(cluster=CLUSTER, broker_addr=b0.broker_addr,
                                         data_version=r.DataVersion(counter=9)))
    results.append(ns.wipe_write_perm("broker-b"))
    results.append(ns.register_topic("TopicD", [r.QueueData(broker_name="broker-b")]))
    results.append(ns.delete_topic("TopicC"))
    results.append(ns.on_channel_closed("a0"))
    clock.advance(100_000)
    results.append(ns.scan_expired())
    results.append(ns.add_write_perm("broker-b"))
    results.append(ns.unregister(cluster=CLUSTER, broker_addr=b0.broker_addr,
                                 broker_name="broker-b", broker_id=0))
    clock.advance(30_000)
    results.append(ns.scan_expired())
    events = _check_replay(live)
    assert [e.result for e in events[1:]] == results
    assert [e.op for e in events][:4] == ["header", "register", "register", "register"]


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_random_operation_sequences_replay_exactly(seed: int) -> None:
    rng = random.Random(seed)
    live = Live(config=r.RoutingConfig(default_heartbeat_timeout_ms=20_000))
    groups = ["broker-a", "broker-b", "broker-c"]
    versions = dict.fromkeys(groups, 1)
    for _ in range(300):
        live.clock.advance(rng.choice([0, 1, 500, 5_000, 12_000]))
        g, bid = rng.choice(groups), rng.randint(0, 2)
        reg = registration(g, bid, counter=versions[g], channel=f"{g}/{bid}",
                           names=tuple(rng.sample(["TopicA", "TopicB", "TopicC", "TopicD"], 2)))
        op = rng.randrange(10)
        if op < 4:
            live.ns.register(reg)
        elif op == 4:
            versions[g] += 1
        elif op == 5:
            live.ns.heartbeat(cluster=CLUSTER, broker_addr=reg.broker_addr)
        elif op == 6:
            live.ns.query_data_version(cluster=CLUSTER, broker_addr=reg.broker_addr,
                                       data_version=reg.data_version)
        elif op == 7:
            live.ns.scan_expired()
        elif op == 8:
            live.ns.on_channel_closed(f"{g}/{bid}")
        else:
            live.ns.unregister(cluster=CLUSTER, broker_addr=reg.broker_addr, broker_name=g,
                               broker_id=bid)
    assert len(live.changes) > 20
    _check_replay(live)


def test_restart_header_resets_the_replayed_manager() -> None:
    live = Live()
    live.ns.register(registration(channel=1))
    live.clock.advance(10_000)
    fresh = r.RouteInfoManager(clock=live.clock, listener=live._listen)
    live.ns.restart(fresh)
    live.manager = fresh
    live.ns.register(registration(channel=2))  # the table id written before still serves
    docs = [json.loads(line) for line in live.lines()]
    assert [(d["seq"], d["op"]) for d in docs] == [(0, "header"), (1, "register"),
                                                   (2, "header"), (3, "register")]
    assert "table" not in docs[3]["args"]
    events = _check_replay(live)
    assert events[2].op == "header"
    assert events[3].change is not None and events[3].change.registered[0].first


def test_opaque_channels_replay_as_journal_channels() -> None:
    class Conn:
        def __init__(self, n: int) -> None:
            self.n = n

    live = Live()
    first, second = Conn(1), Conn(2)
    live.ns.register(registration("broker-a", channel=first))
    live.ns.register(registration("broker-b", channel=second))
    live.ns.on_channel_closed(second)
    records = read_journal(live.lines()).records
    register = records[1]
    assert isinstance(register, JournalRecord) and isinstance(register.call, Register)
    assert register.call.registration.channel == JournalChannel(ref=1)
    player = Replayer()
    events = list(replay(records, replayer=player))
    assert [e.broker_name for e in events[-1].result] == ["broker-b"]  # type: ignore[union-attr]
    assert player.managers["ns-0"].all_topics() == live.manager.all_topics()


def test_replay_refuses_records_without_header_or_going_back() -> None:
    lines = _journal()
    records = read_journal(lines).records
    with pytest.raises(ReplayError, match="no header"):
        list(replay(records[1:]))
    header = records[0]
    assert isinstance(header, JournalHeader)
    late = JournalHeader(nameserver_id="ns-0", seq=0, start_ms=999_999, config=header.config)
    with pytest.raises(ReplayError, match="backwards"):
        list(replay([late, *records[1:]]))


def test_changes_only_skips_quiet_calls() -> None:
    events = list(replay(read_journal(_journal()).records, changes_only=True))
    assert [e.op for e in events] == ["register", "register"]
    assert all(e.change is not None for e in events)


def test_a_line_that_is_not_utf8_is_rejected_alone(tmp_path):
    """Found by the pipeline work: bad bytes used to abort the whole file."""
    from routing.journal import read_journal

    path = tmp_path / "ns.jsonl"
    header = (b'{"journal":"routing","version":1,"nameserver":"ns-0","config":{},'
              b'"start_ms":0}\n')
    scan = b'{"ns":"ns-0","seq":1,"ts":5,"op":"scan","args":{}}\n'
    path.write_bytes(header + b"\xff\xfe\n" + scan)
    result = read_journal(path)
    assert [type(r).__name__ for r in result.records] == ["JournalHeader", "JournalRecord"]
    (bad,) = result.rejected
    assert (bad.line_number, bad.reason) == (2, "not valid UTF-8")
    assert "\ufffd" in bad.text
