"""The pure-Python reference (`routing.pipeline.analyze_local`): what each output
table says about hand-written journals, and how inputs and bad lines are handled.

Journals are written by `routing.journal.JournalRecorder` around real managers on one
`ManualClock`, so every expectation below is a fact about the library's behaviour.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import routing as r
from pipeline_scenarios import damage, operations, play
from routing.journal import JournalRecorder, read_journals
from routing.pipeline import RejectedRecords, analyze_local
from routing.pipeline._answers import route_digest
from routing.pipeline._reference import analyze_partitioned

Tables = dict[str, list[dict[str, Any]]]


class Cluster:
    """A few recorded name servers on one manual clock."""

    def __init__(self, servers: int = 1, config: r.RoutingConfig | None = None) -> None:
        self.clock = r.ManualClock(start_ms=0)
        self.config = config
        self.sinks = [io.StringIO() for _ in range(servers)]
        self.ns = [JournalRecorder(r.RouteInfoManager(clock=self.clock, config=config),
                                   self.sinks[i], nameserver_id=f"ns-{i}")
                   for i in range(servers)]

    def at(self, ms: int) -> Cluster:
        self.clock.set(ms)
        return self

    def journals(self) -> dict[str, list[str]]:
        return {f"ns-{i}.jsonl": s.getvalue().splitlines() for i, s in enumerate(self.sinks)}

    def analyze(self, **kwargs: Any) -> Tables:
        return analyze_local(self.journals(), **kwargs)


def reg(name: str = "broker-a", addr: str = "10.0.0.1:10911", broker_id: int = 0, *,
        topics: tuple[str, ...] = ("T", "U"), write: bool = True, queues: int = 4,
        channel: str | None = None, timeout: int | None = None,
        counter: int = 1) -> r.Registration:
    perm = r.Perm.READ | (r.Perm.WRITE if write else 0)
    return r.Registration(
        cluster="c", broker_name=name, broker_id=broker_id, broker_addr=addr,
        heartbeat_timeout_ms=timeout, channel=channel,
        data_version=r.DataVersion(timestamp=counter, counter=counter),
        topics={t: r.TopicConfig(topic_name=t, read_queue_nums=queues, write_queue_nums=queues,
                                 perm=perm) for t in topics})


# --------------------------------------------------------------------------- sessions


def test_an_expired_session_counts_every_refresh_and_its_largest_gap() -> None:
    c = Cluster()
    ns = c.ns[0]
    assert ns.register(reg()).accepted
    c.at(10_000)
    ns.heartbeat(cluster="c", broker_addr="10.0.0.1:10911")
    c.at(30_000)
    ns.heartbeat(cluster="c", broker_addr="10.0.0.1:10911")
    c.at(40_000)
    ns.query_data_version(cluster="c", broker_addr="10.0.0.1:10911",
                          data_version=r.DataVersion())
    c.at(160_000)
    ns.scan_expired()  # 40 000 + 120 000 is not < 160 000: still alive
    c.at(170_000)
    ns.heartbeat(cluster="c", broker_addr="10.0.0.9:10911")  # unknown: not counted
    [gone] = ns.scan_expired()
    t = c.analyze()
    [session] = t["sessions"]
    assert session == {
        "ns": "ns-0", "cluster": "c", "broker_name": "broker-a", "broker_id": 0,
        "broker_addr": "10.0.0.1:10911", "start_ms": 0, "end_ms": 170_000,
        "end_reason": "expired", "duration_ms": 170_000, "heartbeats": 4,
        "last_heartbeat_ms": 40_000, "largest_gap_ms": 20_000}
    [expiry] = t["expiries"]
    assert expiry["last_heartbeat_ms"] == gone.last_update_ms == 40_000
    assert (expiry["detected_ms"], expiry["latency_ms"]) == (170_000, 130_000)
    assert (expiry["timeout_ms"], expiry["overdue_ms"]) == (120_000, 10_000)
    assert expiry["seq"] == 7  # header 0, register 1, hb 2, hb 3, query 4, scan 5, hb 6, scan 7


def test_sessions_end_by_unregister_channel_close_replacement_restart_or_end() -> None:
    c = Cluster()
    ns = c.ns[0]
    ns.register(reg("broker-a", "10.0.0.1:10911", channel="conn"))
    ns.register(reg("broker-b", "10.0.0.2:10911", channel="conn"))  # same connection
    ns.register(reg("broker-c", "10.0.0.3:10911"))
    ns.register(reg("broker-d", "10.0.0.4:10911", broker_id=1))
    c.at(1_000)
    assert len(ns.on_channel_closed("conn")) == 2  # D6: every broker on the channel
    c.at(2_000)
    ns.unregister(cluster="c", broker_addr="10.0.0.3:10911", broker_name="broker-c",
                  broker_id=0)
    c.at(3_000)
    ns.register(reg("broker-d", "10.0.0.4:10911", broker_id=0))  # the slave became master
    c.at(4_000)
    ns.restart(r.RouteInfoManager(clock=c.clock))
    c.at(5_000)
    ns.register(reg("broker-e", "10.0.0.5:10911"))
    c.at(9_000)
    ns.scan_expired()
    t = c.analyze()
    ended = [(s["broker_name"], s["broker_id"], s["start_ms"], s["end_ms"], s["end_reason"])
             for s in t["sessions"]]
    assert ended == [
        ("broker-a", 0, 0, 1_000, "channel_closed"),
        ("broker-b", 0, 0, 1_000, "channel_closed"),
        ("broker-c", 0, 0, 2_000, "unregistered"),
        ("broker-d", 1, 0, 3_000, "replaced"),
        ("broker-d", 0, 3_000, 4_000, "restart"),
        ("broker-e", 0, 5_000, 9_000, "open"),  # open: ends with the journal
    ]
    assert t["expiries"] == []
    assert t["name_servers"] == [{"ns": "ns-0", "first_ms": 0, "last_ms": 9_000,
                                  "records": 9, "restarts": 1, "gaps": 0, "rejected": 0}]


def test_a_refused_registration_opens_no_session_and_refreshes_nothing() -> None:
    c = Cluster()
    ns = c.ns[0]
    # D3: a single-topic registration cannot be a new broker's first
    assert not ns.register(reg(topics=("T",))).accepted
    ns.register(attrs.evolve(reg("broker-b", "10.0.0.2:10911"),
                             data_version=r.DataVersion(state_version=5)))
    c.at(50_000)
    # D3: a stale state_version cannot take broker id 0 from its holder
    assert not ns.register(attrs.evolve(reg("broker-b", "10.0.0.9:10911"),
                                        data_version=r.DataVersion(state_version=1))).accepted
    t = c.analyze()
    assert [(s["broker_addr"], s["heartbeats"]) for s in t["sessions"]] == [
        ("10.0.0.2:10911", 1)]


# --------------------------------------------------------------------------- routes


def test_route_changes_follow_every_change_of_the_answer_and_nothing_else() -> None:
    c = Cluster()
    ns = c.ns[0]
    ns.register(reg("broker-a", "10.0.0.1:10911", queues=4))
    c.at(1_000)
    ns.register(reg("broker-b", "10.0.0.2:10911", queues=8))
    c.at(2_000)
    ns.register(reg("broker-a", "10.0.0.1:10911", queues=4))  # unchanged: no change
    c.at(3_000)
    ns.wipe_write_perm("broker-b")
    live = ns.pickup_route("T")
    assert live is not None
    c.at(4_000)
    ns.delete_topic("T")
    t = c.analyze()
    rows = [x for x in t["route_changes"] if x["topic"] == "T"]
    assert [(x["at_ms"], x["present"], x["groups"], x["read_queue_count"],
             x["writable_queue_count"]) for x in rows] == [
        (0, True, ["broker-a"], 4, 4),
        (1_000, True, ["broker-a", "broker-b"], 12, 12),
        (3_000, True, ["broker-a", "broker-b"], 12, 4),
        (4_000, False, [], 0, 0),
    ]
    assert rows[2]["digest"] == route_digest(live)
    assert r.TopicRouteData.from_json(rows[2]["route_json"]) == live
    assert len({x["digest"] for x in rows}) == 4 and rows[3]["digest"] is None


def test_routes_at_a_time_are_the_last_change_before_it() -> None:
    c = Cluster(servers=2)
    c.ns[0].register(reg())
    c.at(1_000)
    c.ns[1].register(reg())
    c.at(10_000)
    c.ns[0].wipe_write_perm("broker-a")
    c.at(20_000)
    for ns in c.ns:
        ns.scan_expired()
    t = c.analyze(at=[500, 10_000, 15_000])
    got = [(x["at_ms"], x["ns"], x["present"], x["since_ms"], x["writable_queue_count"])
           for x in t["routes_at"] if x["topic"] == "T"]
    assert got == [
        (500, "ns-0", True, 0, 4), (500, "ns-1", False, None, 0),
        (10_000, "ns-0", True, 10_000, 0), (10_000, "ns-1", True, 1_000, 4),
        (15_000, "ns-0", True, 10_000, 0), (15_000, "ns-1", True, 1_000, 4),
    ]


def test_disagreement_windows_between_name_servers() -> None:
    c = Cluster(servers=3)
    for ns in c.ns[:2]:
        ns.register(reg())
    c.at(300)
    c.ns[2].register(reg())  # the third one learns 300 ms later
    c.at(60_000)
    c.ns[0].wipe_write_perm("broker-a")  # ns-0 alone differs until the end
    c.at(100_000)
    for ns in c.ns:
        ns.scan_expired()
    t = c.analyze()
    windows = [x for x in t["disagreement"] if x["topic"] == "T"]
    assert windows == [
        {"topic": "T", "start_ms": 0, "end_ms": 300, "duration_ms": 300, "open_at_end": False,
         "variants": 2, "out_of_step": ["ns-2"]},
        {"topic": "T", "start_ms": 60_000, "end_ms": 100_000, "duration_ms": 40_000,
         "open_at_end": True, "variants": 2, "out_of_step": ["ns-0"]},
    ]
    [total] = [x for x in t["disagreement_totals"] if x["topic"] == "T"]
    assert total == {"topic": "T", "intervals": 2, "total_ms": 40_300, "longest_ms": 40_000,
                     "span_ms": 100_000, "share": 0.403}


def test_without_a_majority_every_name_server_is_out_of_step() -> None:
    c = Cluster(servers=2)
    c.ns[0].register(reg())
    c.at(50)
    c.ns[1].register(reg())
    c.at(1_000)
    for ns in c.ns:
        ns.scan_expired()
    t = c.analyze()
    assert [(x["start_ms"], x["end_ms"], x["out_of_step"]) for x in t["disagreement"]
            if x["topic"] == "T"] == [(0, 50, ["ns-0", "ns-1"])]


def test_availability_is_the_writable_share_of_the_topics_lifetime() -> None:
    c = Cluster(servers=2)
    c.at(10_000)
    for ns in c.ns:
        ns.register(reg())
    c.at(30_000)
    c.ns[0].wipe_write_perm("broker-a")
    c.at(40_000)
    c.ns[0].add_write_perm("broker-a")
    c.at(50_000)
    c.ns[0].wipe_write_perm("broker-a")
    c.at(110_000)
    for ns in c.ns:
        ns.scan_expired()
    t = c.analyze()
    rows = {x["ns"]: x for x in t["availability"] if x["topic"] == "T"}
    assert rows["ns-0"] == {"ns": "ns-0", "topic": "T", "window_start_ms": 10_000,
                            "window_end_ms": 110_000, "window_ms": 100_000,
                            "life_ms": 100_000, "writable_ms": 30_000, "share": 0.3,
                            "outages": 2, "longest_outage_ms": 60_000, "deletions": 0,
                            "deleted_ms": None}
    assert (rows["ns-1"]["share"], rows["ns-1"]["outages"]) == (1.0, 0)


# --------------------------------------------------------------------------- inputs


def test_bad_lines_are_set_aside_with_their_file_line_and_reason() -> None:
    c = Cluster()
    c.ns[0].register(reg())
    c.at(5_000)
    c.ns[0].scan_expired()
    lines = c.journals()["ns-0.jsonl"]
    lines.insert(1, "not json")
    lines.append(lines[2])  # the register line again: a duplicate sequence number
    lines.append(json.dumps({"ns": "ns-0", "seq": 9, "ts": 6_000, "op": "register_topic",
                             "cluster": None, "broker_name": "nobody", "broker_addr": None,
                             "args": {"topic": "X", "queue_datas": [{
                                 "brokerName": "nobody", "readQueueNums": 1,
                                 "writeQueueNums": 1, "perm": 6, "topicSysFlag": 0}]}}))
    t = analyze_local({"j.jsonl": lines})
    got = [(x["source"], x["line"], x["stage"], x["ns"], x["seq"]) for x in t["rejected"]]
    assert got == [("j.jsonl", 2, "read", None, None), ("j.jsonl", 5, "read", "ns-0", 1),
                   ("j.jsonl", 6, "replay", "ns-0", 9)]
    assert t["rejected"][0]["reason"].startswith("malformed JSON")
    assert "not after the last accepted seq" in t["rejected"][1]["reason"]
    assert "unknown group" in t["rejected"][2]["reason"] or "nobody" in t["rejected"][2]["reason"]
    assert t["rejected"][1]["text"] == lines[4]
    assert t["name_servers"][0]["rejected"] == 2  # the malformed line has no name server
    assert [s["end_reason"] for s in t["sessions"]] == ["open"]  # good lines still count
    with pytest.raises(RejectedRecords, match="3 journal line"):
        analyze_local({"j.jsonl": lines}, strict=True)


def test_files_folders_gzip_and_parquet_copies_read_alike(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    journals = damage(play([("register", 3, 0, 0, 0, 0, [0, 1], 0, 0, None, False, 4, True),
                            ("advance", 40_000), ("heartbeat", 3, 0, 0), ("advance", 200_000)],
                           nameservers=2), seed=3)
    plain = tmp_path / "plain"
    plain.mkdir()
    rows = []
    for i, (name, lines) in enumerate(journals.items()):
        (plain / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        rows += [{"source": str(plain / name), "source_index": i, "line": n, "text": text}
                 for n, text in enumerate(lines, start=1)]
    (plain / ".hidden").write_text("ignored")
    (plain / "_SUCCESS").write_text("")
    expected = analyze_local(plain)
    assert expected["rejected"] and expected["sessions"]
    assert analyze_local([str(plain / n) for n in journals]) == expected
    copy = tmp_path / "copy.parquet"
    pq.write_table(pa.Table.from_pylist(rows[::-1]), copy)  # order comes from the columns
    assert analyze_local(copy) == expected
    zipped = tmp_path / "zipped"
    zipped.mkdir()
    for name, lines in journals.items():
        with gzip.open(zipped / f"{name}.gz", "wt", encoding="utf-8") as out:
            out.write("\n".join(lines))
    unzipped = analyze_local(zipped)
    for row in unzipped["rejected"]:
        row["source"] = row["source"].replace("zipped", "plain").removesuffix(".gz")
    assert unzipped == expected
    with pytest.raises(FileNotFoundError):
        analyze_local(tmp_path / "missing")


def test_decoded_entries_give_the_same_tables_as_their_lines() -> None:
    journals = play([("register", 3, 0, 0, 0, 0, [0, 1], 1, 0, None, False, 4, True),
                     ("advance", 130_000), ("close", 1, 1), ("advance", 5_000)], nameservers=2)
    entries = read_journals(journals.values()).records
    assert analyze_local(entries) == analyze_local(journals)


# --------------------------------------------------------------------------- the plan


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(operations(min_size=20, max_size=120), st.integers(0, 2), st.integers(0, 5))
def test_replaying_broker_group_components_apart_equals_the_whole_replay(
        ops: list[Any], config: int, seed: int) -> None:
    journals = play(ops, nameservers=3, config=config)
    if seed:
        journals = damage(journals, seed)
    at = (20_000, 150_000)
    assert analyze_partitioned(journals, at=at) == analyze_local(journals, at=at)
