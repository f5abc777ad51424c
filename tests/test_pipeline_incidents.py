"""Incidents (disagreement windows merged in wall time, with causes), availability over a
topic's life, and the summary's numbers (JSON, plurals, names never cut) — on journals
written by `JournalRecorder`, the way name servers write them, and on generated windows."""

from __future__ import annotations

import io
import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

import routing as r
from routing.journal import JournalRecorder
from routing.pipeline import analyze_local
from routing.pipeline._availability import availability_over_life, rank_availability
from routing.pipeline._incidents import find_incidents, merge_windows, wall_time
from routing.pipeline._summary import plural, render_summary, summarize_rows, summary_json

Row = dict[str, Any]


class _Cluster:
    """Name servers on one manual clock, each journaling to a string."""

    def __init__(self, servers: int = 3) -> None:
        self.clock = r.ManualClock(start_ms=0)
        self.sinks = [io.StringIO() for _ in range(servers)]
        self.ns = [JournalRecorder(r.RouteInfoManager(clock=self.clock), self.sinks[i],
                                   nameserver_id=f"ns-{i}") for i in range(servers)]

    def register(self, which: list[int], name: str, addr: str, topics: tuple[str, ...],
                 broker_id: int = 0) -> None:
        # with its own group topic, as brokers register (one topic alone would be an
        # incremental registration)
        reg = r.Registration(cluster="c", broker_name=name, broker_id=broker_id,
                             broker_addr=addr, topics={t: r.TopicConfig(topic_name=t)
                                                       for t in (*topics, name)})
        assert all(n.register(reg).accepted for n in (self.ns[i] for i in which))

    def tick(self, ms: int) -> None:
        """Time passes in 5 s scans, as a name server's host runs them."""
        end = self.clock.now_ms() + ms
        while self.clock.now_ms() < end:
            self.clock.set(min(end, self.clock.now_ms() + 5_000))
            for n in self.ns:
                n.scan_expired()

    def tables(self) -> dict[str, list[Row]]:
        return analyze_local({f"ns-{i}.jsonl": s.getvalue().splitlines()
                              for i, s in enumerate(self.sinks)})


def _heartbeats(c: _Cluster, which: list[int], name: str, addr: str, topics: tuple[str, ...],
                until_ms: int) -> None:
    while c.clock.now_ms() < until_ms:
        c.tick(30_000)
        c.register(which, name, addr, topics)


def test_a_broker_cut_off_from_one_name_server_is_one_incident_named_after_it() -> None:
    c = _Cluster()
    c.register([0, 1, 2], "broker-a", "10.0.0.1:10911", ("orders",))
    c.register([0, 1, 2], "broker-b", "10.0.0.2:10911", ("orders",))
    # broker-a stops reaching ns-2 (a partition): ns-2 expires it, the others do not;
    # broker-b goes on heartbeating everywhere
    while c.clock.now_ms() < 300_000:
        c.tick(30_000)
        c.register([0, 1], "broker-a", "10.0.0.1:10911", ("orders",))
        c.register([0, 1, 2], "broker-b", "10.0.0.2:10911", ("orders",))
    tables = c.tables()
    assert len(tables["disagreement"]) >= 2  # the group topic and "orders", per topic
    summary = summarize_rows(tables)
    [incident] = summary.incidents
    assert incident["kind"] == "expired-on-some"
    assert incident["cause"] == "broker-a #0 10.0.0.1:10911 expired on ns-2 only"
    assert incident["name_servers"] == ["ns-2"]
    assert incident["brokers"] == ["broker-a #0 10.0.0.1:10911"]
    assert incident["out_of_step"] == ["ns-2"]
    assert incident["topics"] == len({d["topic"] for d in tables["disagreement"]})
    # wall time, not a sum over topics
    assert summary.disagreement_wall_ms == incident["duration_ms"]
    assert summary.disagreement_topic_sum_ms > summary.disagreement_wall_ms


def test_an_unregister_lost_on_the_way_to_one_name_server() -> None:
    c = _Cluster(servers=2)
    c.register([0, 1], "broker-a", "10.0.0.1:10911", ("orders",))
    c.tick(10_000)
    c.ns[0].unregister(cluster="c", broker_addr="10.0.0.1:10911", broker_name="broker-a",
                       broker_id=0)
    c.tick(200_000)  # ns-1 only learns by expiry
    [incident] = summarize_rows(c.tables()).incidents
    assert incident["kind"] == "lost-unregister"
    assert incident["cause"] == ("lost unregister: broker-a #0 10.0.0.1:10911 unregistered "
                                 "on ns-0, not on ns-1")
    assert incident["start_ms"] == 10_000 and incident["duration_ms"] > 100_000


def test_a_name_server_restart_is_named_as_the_cause() -> None:
    c = _Cluster()
    c.register([0, 1, 2], "broker-a", "10.0.0.1:10911", ("orders",))
    c.tick(10_000)
    c.ns[1].restart(r.RouteInfoManager(clock=c.clock))
    c.tick(10_000)
    c.register([0, 1, 2], "broker-a", "10.0.0.1:10911", ("orders",))
    c.tick(10_000)
    [incident] = summarize_rows(c.tables()).incidents
    assert incident["kind"] == "restart"
    assert incident["cause"] == "name-server restart: ns-1"
    assert (incident["start_ms"], incident["end_ms"]) == (10_000, 20_000)


def test_windows_apart_by_more_than_the_gap_are_separate_incidents() -> None:
    windows = [{"topic": t, "start_ms": a, "end_ms": b, "out_of_step": ["ns-0"],
                "open_at_end": False} for t, a, b in
               (("T", 0, 100), ("U", 50, 300), ("T", 400, 500), ("V", 2_000, 2_100))]
    assert [(i["start_ms"], i["end_ms"], i["windows"], i["topics"])
            for i in find_incidents(windows, gap_ms=100)] == [(0, 500, 3, 2),
                                                              (2_000, 2_100, 1, 1)]
    assert [(i["start_ms"], i["end_ms"]) for i in find_incidents(windows, gap_ms=0)] == [
        (0, 300), (400, 500), (2_000, 2_100)]
    assert find_incidents(windows, gap_ms=0)[0]["kind"] == "topic-change"


_window = st.tuples(st.integers(0, 10_000), st.integers(1, 2_000), st.sampled_from("TUVW"),
                    st.sets(st.sampled_from(["ns-0", "ns-1", "ns-2"]), min_size=1))


@settings(max_examples=200, deadline=None)
@given(st.lists(_window, max_size=40), st.integers(0, 1_500))
def test_incidents_partition_the_windows_and_never_come_within_the_gap(
        raw: list[tuple[int, int, str, set[str]]], gap: int) -> None:
    windows = [{"topic": t, "start_ms": a, "end_ms": a + d, "out_of_step": sorted(out),
                "open_at_end": False} for a, d, t, out in raw]
    incidents = find_incidents(windows, gap_ms=gap)
    spans = [(w["start_ms"], w["end_ms"]) for w in windows]
    for w in windows:  # every window inside exactly one incident
        assert sum(1 for i in incidents
                   if i["start_ms"] <= w["start_ms"] and w["end_ms"] <= i["end_ms"]) == 1
    for a, b in itertools.pairwise(incidents):  # none within the gap
        assert b["start_ms"] - a["end_ms"] > gap
    assert sum(i["windows"] for i in incidents) == len(windows)
    union = wall_time(spans)
    assert union <= sum(b - a for a, b in spans)
    assert sum(i["disagreeing_ms"] for i in incidents) == union
    assert union <= sum(i["duration_ms"] for i in incidents)
    if gap == 0:
        assert sum(i["duration_ms"] for i in incidents) == union
    assert merge_windows(spans, gap_ms=gap) == [(i["start_ms"], i["end_ms"])
                                                 for i in incidents]


def test_a_topic_deleted_on_purpose_is_measured_up_to_its_deletion_only() -> None:
    c = _Cluster(servers=2)
    topics = ("orders", "old")
    c.register([0, 1], "broker-a", "10.0.0.1:10911", topics)
    _heartbeats(c, [0, 1], "broker-a", "10.0.0.1:10911", topics, 60_000)
    for n in c.ns:
        n.delete_topic("old")
    topics = ("orders",)
    _heartbeats(c, [0, 1], "broker-a", "10.0.0.1:10911", topics, 600_000)
    # then the broker dies: "orders" has a real outage until the end
    c.tick(400_000)
    tables = c.tables()
    life = {(x["topic"], x["ns"]): x for x in tables["availability"]}
    # the table's rows are the measure computed again from the finished rows
    assert tables["availability"] == availability_over_life(
        tables["route_changes"], tables["sessions"], tables["name_servers"])
    old = life[("old", "ns-0")]
    assert (old["life_ms"], old["share"], old["deletions"], old["deleted_ms"]) == (
        60_000, 1.0, 1, 60_000)
    assert old["window_ms"] > 10 * old["life_ms"]  # the whole journal would read < 10 %
    orders = life[("orders", "ns-0")]
    assert orders["deletions"] == 0 and orders["outages"] == 1
    assert 0.5 < orders["share"] < 1 and orders["longest_outage_ms"] > 200_000
    ranked = rank_availability(life.values())
    # "old" had no outage; the topics of the dead broker did
    assert {(x["topic"], x["ns"]) for x in ranked} == {
        (t, ns) for t in ("orders", "broker-a") for ns in ("ns-0", "ns-1")}


def test_the_summary_json_holds_every_printed_number_and_names_are_never_cut() -> None:
    c = _Cluster(servers=2)
    long_name = "a-broker-group-with-a-very-long-name-that-must-not-be-shortened"
    c.register([0, 1], long_name, "10.0.0.1:10911", ("orders",))
    c.tick(10_000)
    c.ns[0].unregister(cluster="c", broker_addr="10.0.0.1:10911", broker_name=long_name,
                       broker_id=0)
    c.tick(200_000)
    summary = summarize_rows(c.tables())
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=1000, color_system=None))
    text = out.getvalue()
    assert f"{long_name} #0 10.0.0.1:10911" in text and "…" not in text
    assert "2 name servers" in text and "1 incident," in text
    doc = json.loads(json.dumps(summary_json(summary)))
    assert doc["disagreement"]["wall_ms"] == summary.disagreement_wall_ms
    assert doc["disagreement"]["incidents"] == len(doc["incidents"]) == 1
    assert doc["sessions"]["total"] == sum(summary.sessions_by_reason.values())
    assert doc["expiries"]["count"] == 1
    assert doc["expiries"]["latency_ms"]["max"] == summary.expiry_latencies_ms[-1]
    assert doc["records"] == summary.records
    assert {(x["topic"], x["ns"]) for x in doc["availability_over_life"]} == {
        (t, ns) for t in ("orders", long_name) for ns in ("ns-0", "ns-1")}
    assert doc["rejected"] == {"total": 0, "by_reason": {}, "by_file": []}
    assert plural(1, "name server") == "1 name server"


def test_the_report_draws_at_most_its_budget_of_bars_and_loses_no_session() -> None:
    from routing.pipeline._report import level_of_detail

    sessions = [{"ns": ns, "broker_addr": addr, "start_ms": i * 1_000,
                 "end_ms": i * 1_000 + 900, "end_reason": "expired", "heartbeats": 2}
                for ns in ("ns-0", "ns-1") for addr in ("a:1", "b:1") for i in range(500)]
    assert len(level_of_detail(sessions, 500_000, budget=5_000)) == 2_000  # under budget
    bars = level_of_detail(sessions, 500_000, budget=50)
    assert len(bars) <= 50
    assert sum(b["merged"] for b in bars) == len(sessions)
    assert sum(b["heartbeats"] for b in bars) == 2 * len(sessions)
    for s in sessions:  # every session is inside a bar of its broker on its name server
        assert any(b["ns"] == s["ns"] and b["broker_addr"] == s["broker_addr"]
                   and b["start_ms"] <= s["start_ms"] and s["end_ms"] <= b["end_ms"]
                   for b in bars)
    # more brokers than the budget: one bar each, and it ends
    assert len(level_of_detail(sessions, 500_000, budget=1)) == 4
