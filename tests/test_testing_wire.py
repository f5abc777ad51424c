"""`serve_on_wire` and the ``nameserver_on_wire`` fixtures: a fake name server over TCP.

The fake's state, clock and event log stay the test's: TCP registrations land in them,
the fake's clock drives expiry (and the host closes the expired brokers' connections),
``stop``/``start`` close and reopen the port.
"""

from __future__ import annotations

import socket
import threading

import pytest

import routing as r
from routing.remoting import RequestCode, ResponseCode, decode_route
from routing.testing import FakeNameServer, WaitTimedOut, Wire, WireError, serve_on_wire
from wire_helpers import WireClient, register


def test_fixture_serves_the_fake_on_a_loopback_port(nameserver_on_wire: FakeNameServer) -> None:
    ns = nameserver_on_wire
    assert ns.wire is not None and ns.wire.address.startswith("127.0.0.1:")
    ns.broker(name="broker-a", addr="127.0.0.1:1", topics=["TopicTest"], queues=4)
    with WireClient(ns.wire.address) as client:
        answer = client.route("TopicTest")
        assert answer.code == ResponseCode.SUCCESS
        assert decode_route(answer.body) == ns.route("TopicTest")
        assert client.route("Nope").code == ResponseCode.TOPIC_NOT_EXIST
        [conn] = ns.wire.connections()
        assert conn.requests == 2 and conn.brokers == () and conn.language == "JAVA"
    assert [q.name for q in ns.wire.requests()] == ["GET_ROUTEINFO_BY_TOPIC"] * 2


def test_a_tcp_registration_lands_in_the_fakes_tables_and_log(
        nameserver_on_wire: FakeNameServer) -> None:
    ns = nameserver_on_wire
    assert ns.wire is not None
    with WireClient(ns.wire.address) as broker:
        assert register(broker, "broker-t", "127.0.0.1:10911", "TopicT").code == 0
        ns.assert_route("TopicT", brokers=["broker-t"], writable_queues=4)
        ns.assert_alive("127.0.0.1:10911")
        [event] = ns.events_of("register")
        assert event.broker == "127.0.0.1:10911" and "tcp registration" in event.detail
        assert [c.brokers for c in ns.wire.connections()] == [("127.0.0.1:10911",)]
    # the broker's connection closed: removed at once (D6), logged like a fake broker's
    ns.wire.wait_for(lambda: ns.events_of("channel_closed") != ())
    ns.assert_expired("127.0.0.1:10911")
    ns.assert_no_route("TopicT")


def test_wait_for_past_its_bound_names_the_bound(nameserver_on_wire: FakeNameServer) -> None:
    ns = nameserver_on_wire
    assert ns.wire is not None
    with pytest.raises(WaitTimedOut) as caught:
        ns.wire.wait_for(lambda: False, timeout_s=0)  # no wall time to wait at all
    assert isinstance(caught.value, TimeoutError) and isinstance(caught.value, r.RoutingError)
    assert (caught.value.field, caught.value.value) == ("timeout_s", 0)
    assert f"{ns.name}: condition still false after 0 s" in str(caught.value)
    ns.wire.wait_for(lambda: True, timeout_s=0)  # already true: returns


def test_the_fakes_clock_expires_a_silent_tcp_broker_and_closes_its_connection(
        nameserver_on_wire: FakeNameServer) -> None:
    ns = nameserver_on_wire
    assert ns.wire is not None
    with WireClient(ns.wire.address) as broker:
        register(broker, "broker-t", "127.0.0.1:10911", "TopicT")
        ns.tick(120_000)   # last update 0 + 120 000 == now: not yet (strict)
        ns.assert_alive("127.0.0.1:10911")
        ns.tick(5_000)     # the scan at 125 000 ms
        ns.assert_expired("127.0.0.1:10911")
        [expired] = ns.events_of("expired")
        assert expired.at_ms == 125_000
        assert broker.closed_by_server()   # as routing serve closes an expired channel


def test_stop_closes_the_port_and_start_reopens_it_empty(
        nameserver_on_wire: FakeNameServer) -> None:
    ns = nameserver_on_wire
    assert ns.wire is not None
    address = ns.wire.address
    ns.broker(name="broker-a", topics=["TopicTest"])
    client = WireClient(address)
    assert client.route("TopicTest").code == 0
    ns.stop()
    assert client.closed_by_server()
    with pytest.raises(ConnectionRefusedError):
        WireClient(address)
    ns.start()
    assert ns.wire.address == address
    with WireClient(address) as again:
        assert again.route("TopicTest").code == ResponseCode.TOPIC_NOT_EXIST
    client.close()


def test_several_name_servers_one_clock_several_ports(nameservers_on_wire) -> None:
    ns1, ns2 = nameservers_on_wire(2)
    assert ns1.clock is ns2.clock and ns1.wire and ns2.wire
    assert ns1.wire.port != ns2.wire.port
    with WireClient(ns1.wire.address) as c1, WireClient(ns2.wire.address) as c2:
        register(c1, "broker-t", "127.0.0.1:10911", "TopicT")
        register(c2, "broker-t", "127.0.0.1:10911", "TopicT")
        c2.route("TopicT")
        ns1.tick(125_000)  # one tick moves both: both expire the silent broker
        assert c1.closed_by_server() and c2.closed_by_server()
    ns1.assert_no_route("TopicT")
    ns2.assert_no_route("TopicT")


def test_a_fake_broker_and_a_tcp_broker_in_one_route(nameserver_on_wire) -> None:
    ns = nameserver_on_wire
    a = ns.broker(name="broker-a", topics=["TopicTest"], queues=4)
    with WireClient(ns.wire.address) as broker:
        register(broker, "broker-t", "127.0.0.1:10911", "TopicTest")
        assert broker.route_brokers("TopicTest") == ["broker-a", "broker-t"]
        a.go_quiet()
        ns.tick(60_000)
        register(broker, "broker-t", "127.0.0.1:10911", "TopicTest", counter=2)
        ns.tick(65_000)
        assert broker.route_brokers("TopicTest") == ["broker-t"]
        ns.assert_expired(a)


def test_calls_from_the_test_thread_are_safe_against_the_loop(nameserver_on_wire) -> None:
    """A thread registers 200 times over TCP while the test ticks and adds fake brokers:
    every registration is logged once and the tables stay consistent."""
    ns = nameserver_on_wire
    errors: list[BaseException] = []

    def tcp_broker() -> None:
        try:
            with WireClient(ns.wire.address) as client:
                for i in range(200):
                    assert register(client, "broker-t", "127.0.0.1:10911", "TopicT",
                                    counter=i + 1).code == 0
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=tcp_broker)
    thread.start()
    for i in range(50):
        ns.broker(name=f"fake-{i}", topics=["TopicT"], queues=1)
        ns.tick(1_000)
    thread.join()
    assert not errors
    tcp = [e for e in ns.events_of("register") if e.broker == "127.0.0.1:10911"]
    assert len(tcp) == 200
    ns.manager.check_invariants()
    ns.wire.wait_for(lambda: ns.events_of("channel_closed") != ())  # the client hung up
    ns.assert_route("TopicT", brokers=[f"fake-{i}" for i in range(50)])


def test_freeze_fixes_what_clients_read_while_the_tables_move(nameservers_on_wire) -> None:
    ns1, ns2 = nameservers_on_wire(2)
    a1 = ns1.broker(name="broker-a", topics=["TopicTest"])
    a2 = ns2.broker(name="broker-a", topics=["TopicTest"])
    ns1.wire.freeze()
    a1.go_quiet()
    a2.go_quiet()
    ns1.tick(125_000)
    ns1.assert_no_route("TopicTest")  # the tables moved...
    with WireClient(ns1.wire.address) as c1, WireClient(ns2.wire.address) as c2:
        assert c1.route_brokers("TopicTest") == ["broker-a"]   # ...clients of ns1 do not see it
        assert c2.route_brokers("TopicTest") is None
        ns1.wire.thaw()
        assert c1.route_brokers("TopicTest") is None
    assert [e.kind for e in ns1.events if e.kind in ("frozen", "thawed")] == ["frozen", "thawed"]


def test_the_host_keeps_routing_serves_protections(nameserver_on_wire) -> None:
    ns = nameserver_on_wire
    with WireClient(ns.wire.address) as hostile:
        hostile.sock.sendall((64 * 1024 * 1024).to_bytes(4, "big") + b"\0" * 8)
        assert hostile.closed_by_server()   # a frame over the limit: that connection only
    with WireClient(ns.wire.address) as client:
        assert client.route("TopicTest").code == ResponseCode.TOPIC_NOT_EXIST


def test_serving_refuses_what_it_cannot_do() -> None:
    with pytest.raises(WireError) as bad_host:
        Wire(host="0.0.0.0")
    assert bad_host.value.field == "host" and bad_host.value.value == "0.0.0.0"
    with pytest.raises(WireError) as no_servers, serve_on_wire():
        pass
    assert no_servers.value.field == "servers"
    manual = FakeNameServer(clock=r.ManualClock(0))
    with pytest.raises(WireError) as not_fake, serve_on_wire(manual):
        pass
    assert not_fake.value.field == "clock" and manual.wire is None
    ns = FakeNameServer()
    with serve_on_wire(ns), pytest.raises(WireError) as twice, serve_on_wire(ns):
        pass
    assert twice.value.field == "ns" and ns.wire is None
    with pytest.raises(WireError) as ports, serve_on_wire(ns, ports=[0, 0]):
        pass
    assert ports.value.field == "ports"


def test_serve_on_wire_with_a_fixed_port_and_cleanup() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ns = FakeNameServer()
    with serve_on_wire(ns, ports=[port]) as wire:
        assert wire.address == f"127.0.0.1:{port}" == wire.namesrv_addr
        assert len(wire) == 1 and wire[0] is ns.wire
        with WireClient(wire.address) as client:
            assert client.ask(RequestCode.GET_BROKER_CLUSTER_INFO).code == 0
    assert ns.wire is None
    with pytest.raises(ConnectionRefusedError):
        WireClient(f"127.0.0.1:{port}")
    ns.broker(name="broker-a", topics=["T"])   # the fake goes on working without the wire
    ns.assert_route("T", brokers=["broker-a"])
