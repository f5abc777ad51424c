"""A real RocketMQ client against fake name servers on the wire, as a user would test one.

The client is ali-ons (pure JavaScript, remoting over TCP; ``tests/clients``), polling the
name servers on its own timer every 100 ms. The test owns the name servers' clock: a
broker expires when the test says so, not after 120 s. ``routing broker`` stands in for a
real broker in the last tests. Skipped with the reason where Node.js or ali-ons is missing
(``make test`` installs it: ``make node-client``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from clients.ali_ons import MISSING, SKIP_REASON, AliOns, brokers
from routing.remoting import RequestCode
from routing.testing import FakeNameServer

pytestmark = pytest.mark.skipif(MISSING, reason=SKIP_REASON)

ROUTE = RequestCode.GET_ROUTEINFO_BY_TOPIC
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def ali_ons() -> Iterator[Callable[..., AliOns]]:
    clients: list[AliOns] = []

    def start(*servers: FakeNameServer, topics: tuple[str, ...] = ("TopicTest",),
              **options: int) -> AliOns:
        client = AliOns([ns.wire.address for ns in servers if ns.wire], list(topics),
                        **options)
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.close()


def two_brokers(ns: FakeNameServer) -> None:
    ns.broker(name="broker-a", addr="127.0.0.1:20911", topics=["TopicTest"], queues=4)
    ns.broker(name="broker-b", addr="127.0.0.1:20921", topics=["TopicTest"], queues=4)


# --------------------------------------------------------------------------- time


def test_the_clients_route_changes_when_the_tests_clock_expires_a_silent_broker(
        nameserver_on_wire, ali_ons) -> None:
    ns = nameserver_on_wire
    two_brokers(ns)
    client = ali_ons(ns)
    assert client.route(lambda names: True) == ["broker-a", "broker-b"]
    b = ns.brokers[1]
    b.go_quiet()
    ns.tick(120_000)            # silent for exactly the timeout: still there
    ns.assert_alive(b)
    ns.tick(5_000)              # the scan at 125 000 ms expires it
    assert client.route(lambda names: names != ["broker-a", "broker-b"]) == ["broker-a"]
    assert [e.at_ms for e in ns.events_of("expired")] == [125_000]
    routes = [brokers(e["route"]) for e in client.seen if e["event"] == "route"]
    assert routes == [["broker-a", "broker-b"], ["broker-a"]]   # nothing in between


def test_the_client_moves_to_the_second_name_server_when_the_first_stops(
        nameservers_on_wire, ali_ons) -> None:
    ns1, ns2 = nameservers_on_wire(2)
    for ns in (ns1, ns2):
        ns.broker(name="broker-a", addr="127.0.0.1:20911", topics=["TopicTest"], queues=4)
    client = ali_ons(ns1, ns2)
    assert client.route(lambda names: True) == ["broker-a"]
    ns1.stop()
    stopped_at = len(ns2.wire.requests(ROUTE))
    asked_ns1 = len(ns1.wire.requests(ROUTE))
    ns2.broker(name="broker-b", addr="127.0.0.1:20921", topics=["TopicTest"], queues=4)
    assert client.route(lambda names: "broker-b" in names) == ["broker-a", "broker-b"]
    assert len(ns2.wire.requests(ROUTE)) > stopped_at
    # one request at a time (a client that does not poll meanwhile): each goes to the next
    # name server in turn and, refused by ns1, is retried on ns2
    asking = ali_ons(ns1, ns2, topics=(), poll_ms=3_600_000)
    answers = [asking.ask("TopicTest") for _ in range(4)]
    assert [brokers(a["route"]) if a["ok"] else a for a in answers] == [
        ["broker-a", "broker-b"]] * 4
    assert len(ns1.wire.requests(ROUTE)) == asked_ns1   # nothing reached ns1 since


# --------------------------------------------------------------------------- faults


def test_the_client_sees_system_busy_then_recovers(nameserver_on_wire, ali_ons) -> None:
    ns = nameserver_on_wire
    two_brokers(ns)
    client = ali_ons(ns, topics=(), poll_ms=3_600_000)
    ns.wire.faults.add("busy", code=ROUTE, count=1)
    busy = client.ask("TopicTest")
    assert (busy["ok"], busy["name"], busy["code"]) == (False, "MQClientException", 2)
    assert busy["message"] == "[OVERLOAD]system busy, start flow control for a while"
    again = client.ask("TopicTest")
    assert again["ok"] and brokers(again["route"]) == ["broker-a", "broker-b"]
    [hit] = ns.events_of("fault")
    assert "answered SYSTEM_BUSY" in hit.detail


def test_a_dropped_reply_times_out_on_the_clients_clock(nameserver_on_wire, ali_ons) -> None:
    ns = nameserver_on_wire
    two_brokers(ns)
    client = ali_ons(ns, topics=(), poll_ms=3_600_000)
    ns.wire.faults.add("drop_reply", code=ROUTE, count=1)
    lost = client.ask("TopicTest", timeout_ms=300)
    assert (lost["ok"], lost["name"]) == (False, "ResponseTimeoutError")
    assert client.ask("TopicTest")["ok"]    # the same connection answers the next one


def test_with_two_name_servers_a_dropped_reply_is_retried_on_the_other(
        nameservers_on_wire, ali_ons) -> None:
    ns1, ns2 = nameservers_on_wire(2)
    for ns in (ns1, ns2):
        ns.broker(name="broker-a", addr="127.0.0.1:20911", topics=["TopicTest"], queues=4)
    client = ali_ons(ns1, ns2, topics=(), poll_ms=3_600_000, response_timeout_ms=300)
    rule = ns1.wire.faults.add("drop_reply", code=ROUTE, count=1)
    answers = [client.ask("TopicTest", timeout_ms=300) for _ in range(2)]
    assert all(a["ok"] for a in answers)       # one of them after a timeout on ns1
    assert ns1.wire.faults.hits(rule) == 1
    assert len(ns2.wire.requests(ROUTE)) == 2  # asked once in turn, once as the retry


def test_a_closed_connection_fails_the_request_then_the_client_reconnects(
        nameserver_on_wire, ali_ons) -> None:
    ns = nameserver_on_wire
    two_brokers(ns)
    client = ali_ons(ns, topics=(), poll_ms=3_600_000)
    ns.wire.faults.add("close", code=ROUTE, count=1)
    closed = client.ask("TopicTest")
    assert closed["ok"] is False and "closed" in closed["message"].lower(), closed
    again = client.ask("TopicTest")
    assert again["ok"]
    first, second = (r.connection for r in ns.wire.requests(ROUTE))
    assert first != second   # a new connection


def test_a_reply_delayed_in_manual_time_arrives_when_the_test_moves_the_clock(
        nameserver_on_wire, ali_ons) -> None:
    ns = nameserver_on_wire
    two_brokers(ns)
    client = ali_ons(ns, topics=(), poll_ms=3_600_000)
    ns.wire.faults.add("delay", code=ROUTE, delay_ms=5_000, count=1)
    client._send({"op": "ask", "id": 99, "topic": "TopicTest", "timeoutMs": 20_000})
    ns.wire.wait_for(lambda: ns.wire.held == 1)
    ns.tick(4_999)
    assert ns.wire.held == 1
    ns.tick(1)
    answer = client.wait_for("answer", lambda e: e["id"] == 99)
    assert answer["ok"] and brokers(answer["route"]) == ["broker-a", "broker-b"]


def test_two_name_servers_disagree_as_the_client_sees_it(nameservers_on_wire, ali_ons) -> None:
    ns1, ns2 = nameservers_on_wire(2)
    for ns in (ns1, ns2):
        ns.broker(name="broker-a", addr="127.0.0.1:20911", topics=["TopicTest"], queues=4)
    ns1.wire.freeze()                      # ns1's clients keep reading this view
    for ns in (ns1, ns2):
        ns.broker(name="broker-b", addr="127.0.0.1:20921", topics=["TopicTest"], queues=4)
    client = ali_ons(ns1, ns2)             # asks them in turn, as RocketMQ clients do
    views = []
    for _ in range(4):
        views.append(client.route(lambda names, last=views[-1:]: [names] != last))
    assert views in ([["broker-a"], ["broker-a", "broker-b"]] * 2,
                     [["broker-a", "broker-b"], ["broker-a"]] * 2)
    ns1.wire.thaw()
    answers = [brokers(client.ask("TopicTest")["route"]) for _ in range(4)]
    assert answers == [["broker-a", "broker-b"]] * 4


# --------------------------------------------------------------------------- routing broker


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def routing_broker() -> Iterator[Callable[[FakeNameServer], tuple[subprocess.Popen[str], str]]]:
    procs: list[subprocess.Popen[str]] = []

    def start(ns: FakeNameServer) -> tuple[subprocess.Popen[str], str]:
        assert ns.wire is not None
        addr = f"127.0.0.1:{_free_port()}"
        proc = subprocess.Popen(
            [sys.executable, "-c", "from routing.cli import main; main()", "broker",
             "--namesrv", ns.wire.address, "--name", "broker-r", "--addr", addr,
             "--topics", "TopicR", "--queues", "2", "--no-listen", "--log-level", "WARNING"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        procs.append(proc)
        ns.wire.wait_for(lambda: ns.route("TopicR") is not None, timeout_s=60)
        return proc, addr

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.communicate()


def test_routing_broker_registers_and_its_kill_removes_it(
        nameserver_on_wire, ali_ons, routing_broker) -> None:
    ns = nameserver_on_wire
    proc, addr = routing_broker(ns)
    registered = [e for e in ns.events_of("register") if e.broker == addr]
    assert registered and "tcp registration as DefaultCluster/broker-r" in registered[0].detail
    client = ali_ons(ns, topics=(), poll_ms=3_600_000)
    answer = client.ask("TopicR")
    assert answer["route"]["brokerDatas"][0]["brokerAddrs"] == {"0": addr}
    proc.kill()                            # the channel closes: removed at once (D6)
    ns.wire.wait_for(lambda: ns.events_of("channel_closed") != ())
    ns.assert_expired(addr)
    gone = client.ask("TopicR")
    assert (gone["ok"], gone["code"]) == (False, 17)   # TOPIC_NOT_EXIST


def test_a_hung_routing_broker_is_expired_by_the_tests_clock(
        nameserver_on_wire, ali_ons, routing_broker) -> None:
    ns = nameserver_on_wire
    proc, addr = routing_broker(ns)
    client = ali_ons(ns, topics=("TopicR",))
    assert client.route(lambda names: True) == ["broker-r"]
    proc.send_signal(signal.SIGSTOP)       # hung: its connection stays open, it sends nothing
    ns.tick(125_000)
    ns.assert_expired(addr)
    [expired] = [e for e in ns.events_of("expired") if e.broker == addr]
    assert expired.at_ms == 125_000
    answer = client.ask("TopicR")
    assert (answer["ok"], answer["code"]) == (False, 17)
    proc.send_signal(signal.SIGCONT)


def test_the_node_example_of_the_docs_runs() -> None:
    """docs/examples/fake-nameserver.test.js: ``routing fake`` driven from Node.js."""
    from clients.ali_ons import MODULES, NODE

    assert NODE is not None and MODULES is not None
    command = json.dumps([sys.executable, "-c", "from routing.cli import main; main()", "fake"])
    done = subprocess.run(
        [NODE, str(ROOT / "docs" / "examples" / "fake-nameserver.test.js")],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "NODE_PATH": str(MODULES), "ROUTING_FAKE": command,
             "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "ok" and done.stderr == ""
