"""A shadow beside Java's name server (``routing serve --shadow --journal DIR``; docs/shadow.md).

End to end: ``routing broker`` processes register with Java's name server **and** a shadow
(``--namesrv 'java;shadow'``); registrations, a topic change, a killed broker (its connections
close), a silent broker (stopped with SIGSTOP) expired through a short timeout, a restart,
and a clean stop. At settled instants T1…Tn the test records what Java answered for every
topic; afterwards the pipeline's reference (what ``routing analyze --local --at`` runs) reads
the shadow's journal at T1…Tn and must give the same routes (groups, writable queues and the
route digest). The instants are read on the shadow's own clock, the one that stamps the
journal, and only when both servers' answers are the same before and after them. A poller
records Java's answers every 50 ms meanwhile: the journal agrees with every sample except
within one scan interval of an expiry, where the two servers scan at their own instants, or
in a topic whose route the journal changed within `ARRIVAL_SKEW_MS` of the sample (the two
servers apply the same broker request a few ms apart).

Also: what a shadow that is down costs a broker (connection refused, and a port that accepts
and never answers) — its registrations with Java are not held back.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from wire import SCAN_MS, RoutingServer, WireClient, eventually, properties_like_java
from wire_requests import cmd, route

import routing as r
from routing.journal import rotated_files
from routing.pipeline import analyze_local
from routing.pipeline._answers import route_digest
from routing.remoting import (
    RequestCode,
    ResponseCode,
    decode_cluster_info,
    decode_route,
    decode_topic_list,
)
from routing.remoting.nameserver import _serve as nameserver_serve

TOPICS = ("TA", "TB", "TC", "TD", "TS")
SILENT_TIMEOUT_MS = 1_500
#: How far apart (ms) the two servers may apply the same broker request (a registration, an
#: unregister, a closed connection), for the poller's samples. A broker writes each request
#: to both within a millisecond, but each server applies it when its thread next gets a CPU:
#: on this 2-core machine under load, up to about 60 ms apart (measured). A sample taken
#: in between shows the two servers differing in the topics the request changed, and only
#: there: a differing topic is excused only if the journal changed that topic's route
#: within this many ms of the sample (the journal's change is one end of the gap, the
#: sample lies inside it). Anything slower, or a difference in a topic the journal did not
#: change nearby, fails.
ARRIVAL_SKEW_MS = 500
#: Java answers GET_BROKER_CLUSTER_INFO by serializing its live tables without its lock
#: (``RouteInfoManager.getAllClusterInfo``); a registration adding a broker name to the
#: cluster's HashSet meanwhile makes the read fail with SYSTEM_ERROR and this remark
#: (reproduced: 43 of 9 651 reads during a burst of registrations). It happens while the
#: brokers here start together; such a read says nothing and is read again.
JAVA_RACED_READ = "java.util.ConcurrentModificationException"


class BrokerProcess:
    """``routing broker`` as users run it, its admin commands on stdin."""

    def __init__(self, name: str, port: int, namesrv: str, topics: str, *extra: str) -> None:
        self.args = [sys.executable, "-c", "from routing.cli import main; main()", "broker",
                     "--namesrv", namesrv, "--cluster", "shadowed", "--name", name,
                     "--addr", f"127.0.0.1:{port}", "--topics", topics, "--no-listen",
                     "--log-level", "WARNING", *extra]
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def admin(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _answer(client: WireClient, topic: str) -> Any:
    """Java's answer for ``topic``: None (no route) or (groups, writable queues, digest)."""
    answer = client.call(route(topic))
    if answer.code != ResponseCode.SUCCESS:
        return None
    got = decode_route(answer.body)
    ordered = attrs.evolve(  # routing's order (Java's is a hash order)
        got, broker_datas=tuple(sorted(got.broker_datas, key=lambda b: b.broker_name)),
        queue_datas=tuple(sorted(got.queue_datas, key=lambda q: q.broker_name)))
    writable = sum(q.write_queue_nums for q in got.queue_datas if q.perm & r.Perm.WRITE)
    return (tuple(b.broker_name for b in ordered.broker_datas), writable,
            route_digest(ordered))


def _answers(client: WireClient) -> dict[str, Any]:
    """Java's answer per topic (`_answer`)."""
    return {topic: _answer(client, topic) for topic in TOPICS}


def _groups(client: WireClient) -> set[str] | None:
    """The groups with an address that the server lists; None when Java's read raced a
    registration (`JAVA_RACED_READ`): the caller reads again. Any other error fails."""
    answer = client.call(cmd(RequestCode.GET_BROKER_CLUSTER_INFO))
    if answer.code != ResponseCode.SUCCESS:
        assert (answer.remark or "").startswith(JAVA_RACED_READ), (
            client.address, answer.code, answer.remark)
        return None
    info = decode_cluster_info(answer.body)
    return {name for name, data in info.broker_addr_table.items() if data.broker_addrs}


def _topics(client: WireClient) -> set[str]:
    """The topics of `TOPICS` the server lists (a shadow answers listings)."""
    listing = client.call(cmd(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
    return set(decode_topic_list(listing.body).topics) & set(TOPICS)


class Poller(threading.Thread):
    """Java's answer for every topic every 50 ms, each with the ms (on ``clock``, the
    shadow's) it was read at: the middle of its own round trip, kept only when that took
    under 50 ms (one request, not the five of a round, so load seldom drops one)."""

    def __init__(self, address: tuple[str, int], clock: r.Clock) -> None:
        super().__init__(daemon=True)
        self.client = WireClient(address)
        self.clock = clock
        self.samples: list[tuple[int, str, Any]] = []  # (ms, topic, answer)
        self.rounds = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for topic in TOPICS:
                before = self.clock.now_ms()
                answer = _answer(self.client, topic)
                after = self.clock.now_ms()
                if after - before < 50:  # an answer pinned to a short window
                    self.samples.append(((before + after) // 2, topic, answer))
            self.rounds += 1
            self.done.wait(0.05)

    def stop(self) -> None:
        self.done.set()
        self.join(10)
        self.client.close()


@pytest.fixture
def shadow_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[r.SystemClock]:
    """The `SystemClock` the shadow's manager reads (it stamps the journal's ``ts``), so
    that the test takes its instants on the journal's own time axis. Two `SystemClock`s
    (or one and ``time.time()``) differ by their anchors: up to a few ms, more when the
    thread is preempted between the anchor's two reads — enough for an event sent *after*
    an instant to be journaled at or before it."""
    clock = r.SystemClock()
    made: list[r.SystemClock] = []

    def the_shadows() -> r.SystemClock:
        made.append(clock)
        return clock

    monkeypatch.setattr(nameserver_serve, "SystemClock", the_shadows)
    yield clock
    assert made, "serve() built its manager without SystemClock(): the instants' axis is lost"


@pytest.fixture
def shadow(tmp_path: Path, shadow_clock: r.SystemClock) -> Iterator[RoutingServer]:
    server = RoutingServer(config_file=properties_like_java(tmp_path / "shadow"), shadow=True,
                           journal_dir=tmp_path / "journal", nameserver_id="shadow").start()
    yield server
    server.stop()


def test_a_shadow_refuses_route_reads_and_answers_brokers(shadow: RoutingServer) -> None:
    from routing.remoting import SHADOW_REMARK

    with WireClient(shadow.address) as client:
        answer = client.call(route("TA"))
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, SHADOW_REMARK)
        from wire_requests import Broker

        broker = Broker("ba", 10911)
        assert client.call(broker.register(["TA", "TB"])).code == ResponseCode.SUCCESS
        assert client.call(broker.heartbeat()).code == ResponseCode.SUCCESS
        assert client.call(broker.query_version()).ext_fields["changed"] == "false"
        assert _groups(client) == {"ba"}
        assert client.call(route("TA")).code == ResponseCode.SYSTEM_ERROR


def test_a_shadows_journal_gives_javas_routes_at_every_instant(
        java: Any, shadow: RoutingServer, shadow_clock: r.SystemClock, tmp_path: Path) -> None:
    java.wait_until_scanning()
    namesrv = f"127.0.0.1:{java.address[1]};127.0.0.1:{shadow.address[1]}"
    brokers: dict[str, BrokerProcess] = {}
    instants: list[tuple[str, int, dict[str, Any]]] = []
    poller = Poller(java.address, shadow_clock)
    with WireClient(java.address) as on_java, WireClient(shadow.address) as on_shadow:

        def observe() -> tuple[set[str] | None, set[str] | None, dict[str, Any], set[str]]:
            return (_groups(on_java), _groups(on_shadow), _answers(on_java),
                    _topics(on_shadow))

        def settle(label: str, groups: set[str], check: Any) -> None:
            """Wait until both servers hold ``groups``, Java's answers pass ``check`` and
            the shadow lists the topics Java routes; then take the instant T on the
            shadow's own clock (the journal's ``ts``) and, once that clock reads past T,
            read both servers again. T is recorded with Java's answers only when the
            reads before and after it agree; otherwise the state was still moving and
            the wait starts over. So each request the shadow applied before the first
            reads is journaled at or before T, nothing either server applied between
            the reads changed what they answer, and the next step of the scenario
            starts after T (journaled after it): the replay at T and Java's answers
            describe the same state, with no tolerance."""
            deadline = time.monotonic() + 30
            while True:
                for client in (on_java, on_shadow):
                    seen = eventually(lambda c=client: _groups(c), lambda g: g == groups,
                                      timeout_s=15)
                    assert seen == groups, (label, client.address, seen)
                answers = eventually(lambda: _answers(on_java), check, timeout_s=15)
                assert check(answers), (label, answers)
                routed = {topic for topic, answer in answers.items() if answer is not None}
                listed = eventually(lambda: _topics(on_shadow),
                                    lambda got, want=routed: got == want, timeout_s=15)
                assert listed == routed, (label, listed, routed)
                t = shadow_clock.now_ms()
                # at most 1 ms: what happens next must not share T's millisecond
                eventually(shadow_clock.now_ms, lambda now, t=t: now > t, every_s=0.001)
                after = observe()
                if after == (groups, groups, answers, routed):
                    instants.append((label, t, answers))
                    return
                assert time.monotonic() < deadline, (label, "never settled", after)

        try:
            poller.start()
            brokers["a"] = BrokerProcess("ga", 21911, namesrv, "TA,TS")
            brokers["b"] = BrokerProcess("gb", 21921, namesrv, "TB,TS")
            brokers["c"] = BrokerProcess("gc", 21931, namesrv, "TC,TS", "--acting-master",
                                         "--not-active-timeout-ms", str(SILENT_TIMEOUT_MS))
            settle("registered", {"ga", "gb", "gc"},
                   lambda a: a["TS"] is not None and a["TS"][0] == ("ga", "gb", "gc"))
            brokers["a"].admin("create TD 4")
            settle("topic created", {"ga", "gb", "gc"}, lambda a: a["TD"] is not None)
            brokers["b"].signal(signal.SIGKILL)
            settle("killed", {"ga", "gc"}, lambda a: a["TB"] is None)
            brokers["c"].signal(signal.SIGSTOP)
            settle("silent, expired", {"ga"}, lambda a: a["TC"] is None)
            brokers["c"].signal(signal.SIGKILL)
            brokers["b2"] = BrokerProcess("gb", 21921, namesrv, "TB,TS")
            settle("restarted", {"ga", "gb"}, lambda a: a["TB"] is not None)
            brokers["a"].stop()
            brokers["b2"].stop()
            settle("stopped", set(), lambda a: all(v is None for v in a.values()))
        finally:
            poller.stop()
            for broker in brokers.values():
                broker.stop()
    # the shadow still runs: its rotated files, then the one it is writing (hidden)
    folder = tmp_path / "journal"
    journal = [*rotated_files(folder, "shadow"), *sorted(folder.glob(".shadow.*.jsonl"))]
    assert journal and sorted(folder.iterdir()) == sorted(journal)
    at = [t for _, t, _ in instants] + [t for t, _, _ in poller.samples]
    tables = analyze_local([str(p) for p in journal], at=at)
    assert not tables["rejected"]
    replayed: dict[int, dict[str, Any]] = {t: dict.fromkeys(TOPICS) for t in at}
    for row in tables["routes_at"]:
        if row["topic"] in TOPICS and row["present"]:
            replayed[row["at_ms"]][row["topic"]] = (
                tuple(row["groups"]), row["writable_queue_count"], row["digest"])
    for label, t, answers in instants:
        assert replayed[t] == answers, (label, t, replayed[t], answers)
    # the samples: equal, except within one scan (plus slack) of an expiry on either side,
    # or within ARRIVAL_SKEW_MS of the journal's change of the sample's topic
    expiries = [row["detected_ms"] for row in tables["expiries"]]
    java_expiry = next(t for label, t, _ in instants if label == "silent, expired")
    changes = _changes_by_topic(tables["route_changes"])
    unexplained, explained, skew_ms = [], 0, 0
    for t, topic, answer in poller.samples:
        if replayed[t][topic] == answer:
            continue
        explained += 1
        if any(abs(t - e) <= SCAN_MS + 500 for e in (*expiries, java_expiry)):
            continue
        nearest = min((abs(t - c) for c in changes.get(topic, ())), default=None)
        if nearest is None or nearest > ARRIVAL_SKEW_MS:
            unexplained.append((t, topic, nearest, replayed[t][topic], answer))
        else:
            skew_ms = max(skew_ms, nearest)
    assert not unexplained, unexplained[:3]
    # more than 20 rounds' worth of answers: the scenario lasts 3 s at least (the silent
    # broker's 1.5 s timeout, two broker starts), some 50 rounds at one per 50 ms
    assert len(poller.samples) > 20 * len(TOPICS), (poller.rounds, len(poller.samples))
    assert len(tables["expiries"]) == 1  # the silent broker, expired by the shadow's scan
    lines = journal[0].read_text().splitlines()
    print(json.dumps({"instants": len(instants), "rounds": poller.rounds,
                      "samples": len(poller.samples),
                      "samples_differing_explained": explained, "arrival_skew_ms": skew_ms,
                      "journal_lines": len(lines), "journal_bytes": journal[0].stat().st_size}))


def _changes_by_topic(route_changes: list[dict[str, Any]]) -> dict[str, list[int]]:
    """The instants (ms, journal time) at which the shadow's route of each topic changed."""
    out: dict[str, list[int]] = {}
    for row in route_changes:
        out.setdefault(row["topic"], []).append(row["at_ms"])
    return out


class _Blackhole:
    """A port that accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def _first_registration_s(java: Any, name: str, namesrv: str) -> float:
    """Seconds from a broker process's start until Java routes its topic."""
    broker = BrokerProcess(name, 21941, namesrv, f"T{name}")
    start = time.monotonic()
    try:
        with WireClient(java.address) as client:
            got = eventually(lambda: client.call(route(f"T{name}")).code,
                             lambda code: code == ResponseCode.SUCCESS, timeout_s=30)
        assert got == ResponseCode.SUCCESS, name
        return time.monotonic() - start
    finally:
        broker.stop()


def test_a_shadow_that_is_down_does_not_hold_back_registrations_with_java(java: Any) -> None:
    """A broker whose namesrvAddr lists a dead shadow — nothing listening (connection
    refused), or a port that accepts and never answers — registers with Java as soon as a
    broker without it: the broker registers with each name server in parallel, and a
    registration that hangs waits for its own timeout only."""
    java_addr = f"127.0.0.1:{java.address[1]}"
    alone = _first_registration_s(java, "alone", java_addr)
    hole = _Blackhole()
    try:
        hanging = _first_registration_s(java, "hanging", f"127.0.0.1:{hole.port};{java_addr}")
    finally:
        hole.close()
    refused = _first_registration_s(java, "refused", f"127.0.0.1:{hole.port};{java_addr}")
    print(json.dumps({"alone_s": round(alone, 2), "blackhole_s": round(hanging, 2),
                      "refused_s": round(refused, 2)}))
    # each includes the process start (imports, about 1 s here); a held-back round would
    # add the 3 s connect timeout or the 24 s registration timeout
    assert hanging < alone + 1.5 and refused < alone + 1.5, (alone, hanging, refused)


def test_routing_serve_shadow_on_the_command_line(tmp_path: Path) -> None:
    """``routing serve --shadow --journal DIR``: route reads refused, brokers journaled."""
    from wire_requests import Broker

    from routing.remoting import SHADOW_REMARK

    proc = subprocess.Popen(
        [sys.executable, "-c", "from routing.cli import main; main()", "serve", "--shadow",
         "--listen", "127.0.0.1:0", "--log-json", "--journal", str(tmp_path)],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stderr is not None
        events = []
        while not any(e.get("event") == "listening" for e in events):
            line = proc.stderr.readline()
            assert line, "routing serve exited"
            events.append(json.loads(line))
        assert any(e.get("event") == "shadow_mode" for e in events)
        port = next(e["port"] for e in events if e.get("event") == "listening")
        with WireClient(("127.0.0.1", int(port))) as client:
            refused = client.call(route("TA"))
            assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR, SHADOW_REMARK)
            assert client.call(Broker("ba", 10911).register(["TA", "TB"])).code == 0
    finally:
        proc.terminate()
        assert proc.wait(15) == 0
    journals = sorted(tmp_path.glob("*.jsonl"))
    assert journals and '"op":"register"' in "".join(j.read_text() for j in journals)
