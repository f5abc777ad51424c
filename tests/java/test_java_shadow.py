"""A shadow beside Java's name server (``routing serve --shadow --journal DIR``; docs/shadow.md).

End to end: ``routing broker`` processes register with Java's name server **and** a shadow
(``--namesrv 'java;shadow'``); registrations, a topic change, a killed broker (its connections
close), a silent broker (stopped with SIGSTOP) expired through a short timeout, a restart,
and a clean stop. At settled instants T1…Tn the test records what Java answered for every
topic; afterwards the pipeline's reference (what ``routing analyze --local --at`` runs) reads
the shadow's journal at T1…Tn and must give the same routes (groups, writable queues and the
route digest). A poller records Java's answers every 100 ms meanwhile: the journal agrees with
every sample except within one scan interval of an expiry, where the two servers scan at their
own instants.

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
from routing.pipeline import analyze_local
from routing.pipeline._answers import route_digest
from routing.remoting import (
    RequestCode,
    ResponseCode,
    decode_cluster_info,
    decode_route,
    decode_topic_list,
)

TOPICS = ("TA", "TB", "TC", "TD", "TS")
SILENT_TIMEOUT_MS = 1_500


def _now_ms() -> int:
    return int(time.time() * 1000)


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


def _answers(client: WireClient) -> dict[str, Any]:
    """Java's answer per topic: None (no route) or (groups, writable queues, digest)."""
    out: dict[str, Any] = {}
    for topic in TOPICS:
        answer = client.call(route(topic))
        if answer.code != ResponseCode.SUCCESS:
            out[topic] = None
            continue
        got = decode_route(answer.body)
        ordered = attrs.evolve(  # routing's order (Java's is a hash order)
            got, broker_datas=tuple(sorted(got.broker_datas, key=lambda b: b.broker_name)),
            queue_datas=tuple(sorted(got.queue_datas, key=lambda q: q.broker_name)))
        writable = sum(q.write_queue_nums for q in got.queue_datas if q.perm & r.Perm.WRITE)
        out[topic] = (tuple(b.broker_name for b in ordered.broker_datas), writable,
                      route_digest(ordered))
    return out


def _groups(client: WireClient) -> set[str]:
    info = decode_cluster_info(client.call(cmd(RequestCode.GET_BROKER_CLUSTER_INFO)).body)
    return {name for name, data in info.broker_addr_table.items() if data.broker_addrs}


def _topics(client: WireClient) -> set[str]:
    """The topics of `TOPICS` the server lists (a shadow answers listings)."""
    listing = client.call(cmd(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
    return set(decode_topic_list(listing.body).topics) & set(TOPICS)


class Poller(threading.Thread):
    """Java's answers every 100 ms, with the wall-clock ms they were read at."""

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(daemon=True)
        self.client = WireClient(address)
        self.samples: list[tuple[int, dict[str, Any]]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            before = _now_ms()
            answers = _answers(self.client)
            after = _now_ms()
            if after - before < 50:  # an answer pinned to a short window
                self.samples.append(((before + after) // 2, answers))
            self.done.wait(0.1)

    def stop(self) -> None:
        self.done.set()
        self.join(10)
        self.client.close()


@pytest.fixture
def shadow(tmp_path: Path) -> Iterator[RoutingServer]:
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
        java: Any, shadow: RoutingServer, tmp_path: Path) -> None:
    java.wait_until_scanning()
    namesrv = f"127.0.0.1:{java.address[1]};127.0.0.1:{shadow.address[1]}"
    brokers: dict[str, BrokerProcess] = {}
    instants: list[tuple[str, int, dict[str, Any]]] = []
    poller = Poller(java.address)
    with WireClient(java.address) as on_java, WireClient(shadow.address) as on_shadow:

        def settle(label: str, groups: set[str], check: Any) -> None:
            """Wait until both servers hold ``groups`` and Java's answers pass ``check``;
            then record the instant and Java's answers."""
            for client in (on_java, on_shadow):
                seen = eventually(lambda c=client: _groups(c), lambda g: g == groups,
                                  timeout_s=15)
                assert seen == groups, (label, client.address, seen)
            answers = eventually(lambda: _answers(on_java), check, timeout_s=15)
            assert check(answers), (label, answers)
            routed = {topic for topic, answer in answers.items() if answer is not None}
            listed = eventually(lambda: _topics(on_shadow), lambda got: got == routed,
                                timeout_s=15)
            assert listed == routed, (label, listed, routed)
            instants.append((label, _now_ms(), answers))

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
    journal = sorted((tmp_path / "journal").glob("*.jsonl"))
    assert len(journal) == 1
    at = [t for _, t, _ in instants] + [t for t, _ in poller.samples]
    tables = analyze_local([str(journal[0])], at=at)
    assert not tables["rejected"]
    replayed: dict[int, dict[str, Any]] = {t: dict.fromkeys(TOPICS) for t in at}
    for row in tables["routes_at"]:
        if row["topic"] in TOPICS and row["present"]:
            replayed[row["at_ms"]][row["topic"]] = (
                tuple(row["groups"]), row["writable_queue_count"], row["digest"])
    for label, t, answers in instants:
        assert replayed[t] == answers, (label, t, replayed[t], answers)
    # the samples: equal, except within one scan (plus slack) after an expiry on either side
    expiries = [row["detected_ms"] for row in tables["expiries"]]
    java_expiry = next(t for label, t, _ in instants if label == "silent, expired")
    unexplained, explained = [], 0
    for t, answers in poller.samples:
        if replayed[t] == answers:
            continue
        explained += 1
        near = [e for e in (*expiries, java_expiry) if abs(t - e) <= SCAN_MS + 500]
        # registrations and closes reach the two servers within milliseconds of each other
        if not near and not _within_arrival_skew(t, replayed, poller.samples):
            unexplained.append((t, replayed[t], answers))
    assert not unexplained, unexplained[:3]
    assert len(poller.samples) > 20
    assert len(tables["expiries"]) == 1  # the silent broker, expired by the shadow's scan
    lines = journal[0].read_text().splitlines()
    print(json.dumps({"instants": len(instants), "samples": len(poller.samples),
                      "samples_differing_explained": explained,
                      "journal_lines": len(lines), "journal_bytes": journal[0].stat().st_size}))


def _within_arrival_skew(t: int, replayed: dict[int, dict[str, Any]],
                         samples: list[tuple[int, dict[str, Any]]]) -> bool:
    """A sample next to a change of Java's answers (the previous or next sample differs):
    the same broker request reaches the two servers a few milliseconds apart."""
    times = [s for s, _ in samples]
    i = times.index(t)
    around = [samples[j][1] for j in (i - 1, i + 1) if 0 <= j < len(samples)]
    return any(a != samples[i][1] for a in around)


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
    [journal] = tmp_path.glob("*.jsonl")
    assert '"op":"register"' in journal.read_text()
