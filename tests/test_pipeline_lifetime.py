"""Availability over a topic's life (the ``availability`` table, the summary, its JSON and
the report): a topic deleted on purpose is not unavailable after its deletion, a re-created
topic starts a new stretch of life, an outage (expiry, restart, unregister) counts, and the
ranking shows real outages first. On journals written by `JournalRecorder`, and on
generated operation sequences."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

import routing as r
from pipeline_scenarios import operations, play
from routing.journal import JournalRecorder
from routing.pipeline import analyze_local
from routing.pipeline._availability import availability_over_life, rank_availability
from routing.pipeline._summary import summarize_rows, summary_json

Row = dict[str, Any]
END = 400_000


class _Fleet:
    """Name servers on one manual clock; live brokers register every 10 s on the name
    servers they reach, and every name server scans every 5 s, as hosts do."""

    def __init__(self, servers: int = 2) -> None:
        self.clock = r.ManualClock(start_ms=0)
        self.sinks = [io.StringIO() for _ in range(servers)]
        self.ns = [JournalRecorder(r.RouteInfoManager(clock=self.clock), self.sinks[i],
                                   nameserver_id=f"ns-{i}") for i in range(servers)]
        #: broker name -> (address, {name server index: topics it registers there})
        self.live: dict[str, tuple[str, dict[int, tuple[str, ...]]]] = {}
        self.started = False

    def serve(self, name: str, addr: str, topics: tuple[str, ...],
              on: tuple[int, ...] | None = None) -> None:
        """From now on ``name`` registers ``topics`` (and its own group topic) on ``on``."""
        _addr, plan = self.live.get(name, (addr, {}))
        for i in range(len(self.ns)) if on is None else on:
            plan[i] = topics
        self.live[name] = (addr, plan)

    def _register_all(self) -> None:
        for name, (addr, plan) in sorted(self.live.items()):
            for i, topics in sorted(plan.items()):
                reg = r.Registration(cluster="c", broker_name=name, broker_id=0,
                                     broker_addr=addr, topics={
                                         t: r.TopicConfig(topic_name=t, write_queue_nums=4)
                                         for t in (*topics, name)})
                assert self.ns[i].register(reg).accepted

    def until(self, ms: int) -> None:
        if not self.started:
            self.started = True
            self._register_all()
        while self.clock.now_ms() < ms:
            self.clock.set(self.clock.now_ms() + 5_000)
            for n in self.ns:
                n.scan_expired()
            if self.clock.now_ms() % 10_000 == 0:
                self._register_all()

    def tables(self) -> dict[str, list[Row]]:
        return analyze_local({f"ns-{i}.jsonl": s.getvalue().splitlines()
                              for i, s in enumerate(self.sinks)})


def _rows(tables: dict[str, list[Row]]) -> dict[tuple[str, str], Row]:
    return {(x["topic"], x["ns"]): x for x in tables["availability"]}


def test_a_topic_deleted_at_a_quarter_of_the_run_was_available_all_its_life() -> None:
    f = _Fleet()
    f.serve("broker-a", "10.0.0.1:10911", ("orders", "gone"))
    f.until(END // 4)
    for n in f.ns:
        assert n.delete_topic("gone")
    f.serve("broker-a", "10.0.0.1:10911", ("orders",))
    f.until(END)
    tables = f.tables()
    rows = _rows(tables)
    for ns in ("ns-0", "ns-1"):
        old = rows[("gone", ns)]
        assert old == {"ns": ns, "topic": "gone", "window_start_ms": 0, "window_end_ms": END,
                       "window_ms": END, "life_ms": END // 4, "writable_ms": END // 4,
                       "share": 1.0, "outages": 0, "longest_outage_ms": 0, "deletions": 1,
                       "deleted_ms": END // 4}
        # the old measure (to the end of the journal) would have said 25 %
        assert old["writable_ms"] / old["window_ms"] == 0.25
        assert rows[("orders", ns)]["share"] == 1.0
    summary = summarize_rows(tables)
    assert summary.availability_life == tuple(tables["availability"])
    assert summary.lowest_availability == () and summary.deleted_topics == 1


def _outage_and_deletion() -> _Fleet:
    """broker-a serves "orders" and "gone" ("gone" is deleted on purpose at 100 s);
    broker-b serves "pay", stops at 150 s, expires at 275 s and is back at 330 s."""
    f = _Fleet()
    f.serve("broker-a", "10.0.0.1:10911", ("orders", "gone"))
    f.serve("broker-b", "10.0.0.2:10911", ("pay",))
    f.until(100_000)
    for n in f.ns:
        assert n.delete_topic("gone")
    f.serve("broker-a", "10.0.0.1:10911", ("orders",))
    f.until(150_000)
    stopped = f.live.pop("broker-b")
    f.until(320_000)
    f.live["broker-b"] = stopped
    f.until(END)
    return f


def test_a_real_outage_ranks_first_and_a_deleted_topic_not_at_all(tmp_path: Path) -> None:
    f = _outage_and_deletion()
    tables = f.tables()
    rows = _rows(tables)
    expired = {(s["ns"], s["end_ms"]) for s in tables["sessions"]
               if s["broker_name"] == "broker-b" and s["end_reason"] == "expired"}
    assert expired == {("ns-0", 275_000), ("ns-1", 275_000)}
    pay = rows[("pay", "ns-0")]
    assert (pay["life_ms"], pay["writable_ms"], pay["outages"], pay["longest_outage_ms"],
            pay["deletions"]) == (END, END - 55_000, 1, 55_000, 0)
    gone = rows[("gone", "ns-0")]
    assert (gone["life_ms"], gone["share"], gone["deletions"]) == (100_000, 1.0, 1)
    # by the whole journal, "gone" (25 %) would have come first
    by_window = min(tables["availability"], key=lambda x: x["writable_ms"] / x["window_ms"])
    assert by_window["topic"] == "gone"
    ranked = rank_availability(tables["availability"])
    assert {(x["topic"], x["ns"]) for x in ranked} == {
        (t, ns) for t in ("broker-b", "pay") for ns in ("ns-0", "ns-1")}
    assert ranked[0]["share"] == (END - 55_000) / END
    # the summary, its JSON and the page rank the same rows from the same table
    summary = summarize_rows(tables)
    assert list(summary.lowest_availability) == ranked
    doc = json.loads(json.dumps(summary_json(summary)))
    assert doc["availability_over_life"] == tables["availability"]
    assert [x["topic"] for x in doc["lowest_availability"]] == [x["topic"] for x in ranked]
    assert doc["topics_deleted_on_purpose"] == 1
    from routing.pipeline._report import write_report

    page = write_report(tables, summary, tmp_path / "report.html").read_text()
    section = page.split("<h2>Lowest availability</h2>")[1].split("<h2>")[0]
    cells = re.findall(r"<tr><td[^>]*>([^<]*)</td><td[^>]*>([^<]*)</td>", section)
    assert cells == [(x["topic"], x["ns"]) for x in ranked]


def test_a_re_created_topic_starts_a_new_stretch_of_its_life() -> None:
    f = _Fleet()
    a = "10.0.0.1:10911"
    f.serve("broker-a", a, ("orders", "old"))
    f.until(100_000)
    for n in f.ns:
        assert n.delete_topic("old")
    f.serve("broker-a", a, ("orders",))
    f.until(240_000)
    f.serve("broker-a", a, ("orders", "old"), on=(0,))  # created again: ns-0 at 250 s,
    f.until(250_000)
    f.serve("broker-a", a, ("orders", "old"), on=(1,))  # ns-1 hears of it at 260 s
    f.until(END)
    rows = _rows(f.tables())
    ns0, ns1 = rows[("old", "ns-0")], rows[("old", "ns-1")]
    # alive 0-100 s and 250-400 s; the 150 s in between are not part of its life
    assert (ns0["life_ms"], ns0["writable_ms"], ns0["outages"], ns0["deletions"],
            ns0["deleted_ms"]) == (250_000, 250_000, 0, 1, None)
    # ns-1's life resumes when the topic exists again (on ns-0): 10 s without a route
    assert (ns1["life_ms"], ns1["writable_ms"], ns1["outages"], ns1["longest_outage_ms"],
            ns1["deletions"], ns1["deleted_ms"]) == (250_000, 240_000, 1, 10_000, 1, None)


def test_a_restart_and_an_unregister_are_outages_not_deletions() -> None:
    f = _Fleet()
    a = "10.0.0.1:10911"
    f.serve("broker-a", a, ("orders",))
    f.until(100_000)
    f.ns[1].restart(r.RouteInfoManager(clock=f.clock))  # back at the next registration
    f.until(200_000)
    assert f.ns[0].unregister(cluster="c", broker_addr=a, broker_name="broker-a",
                              broker_id=0)
    f.until(END)
    tables = f.tables()
    assert {(s["ns"], s["end_ms"], s["end_reason"]) for s in tables["sessions"]} >= {
        ("ns-1", 100_000, "restart"), ("ns-0", 200_000, "unregistered")}
    rows = _rows(tables)
    for ns in ("ns-0", "ns-1"):
        x = rows[("orders", ns)]
        assert (x["life_ms"], x["writable_ms"], x["outages"], x["longest_outage_ms"],
                x["deletions"], x["deleted_ms"]) == (END, END - 10_000, 1, 10_000, 0, None)
    assert [(x["topic"], x["ns"]) for x in rank_availability(tables["availability"])] == [
        ("broker-a", "ns-0"), ("broker-a", "ns-1"), ("orders", "ns-0"), ("orders", "ns-1")]


def _writable_over_window(changes: list[Row], start: int, end: int) -> int:
    """Time of [start, end) with a writable queue, from one name server's route changes."""
    total, writable, t = 0, False, start
    for c in sorted(changes, key=lambda c: (c["at_ms"], c["seq"])):
        at = min(max(c["at_ms"], start), end)
        if writable:
            total += at - t
        t = at
        writable = c["writable_queue_count"] > 0
    return total + (end - t if writable else 0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations(min_size=10, max_size=80))
def test_life_availability_on_generated_operations(ops: list[Any]) -> None:
    tables = analyze_local(play(ops, nameservers=3))
    rows = tables["availability"]
    # the sweep's rows (fed as route changes happen) equal the measure taken from the
    # finished route_changes and sessions rows
    assert rows == availability_over_life(tables["route_changes"], tables["sessions"],
                                          tables["name_servers"])
    for x in rows:
        assert 0 <= x["writable_ms"] <= x["life_ms"] <= x["window_ms"]
        assert (x["share"] is None) == (x["life_ms"] == 0)
        if x["share"] is not None:
            assert x["share"] == x["writable_ms"] / x["life_ms"]
        down = x["life_ms"] - x["writable_ms"]
        assert (x["outages"] == 0) == (down == 0) == (x["longest_outage_ms"] == 0)
        assert x["longest_outage_ms"] <= down
        if x["deleted_ms"] is not None:
            assert x["deletions"] >= 1
            assert x["window_start_ms"] <= x["deleted_ms"] <= x["window_end_ms"]
        if x["deletions"] == 0:  # never deleted: its life is the whole window
            assert x["life_ms"] == x["window_ms"] and x["deleted_ms"] is None
            mine = [c for c in tables["route_changes"]
                    if (c["topic"], c["ns"]) == (x["topic"], x["ns"])]
            assert x["writable_ms"] == _writable_over_window(
                mine, x["window_start_ms"], max(x["window_start_ms"], x["window_end_ms"]))
