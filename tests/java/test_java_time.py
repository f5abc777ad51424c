"""Time on real servers: per-broker timeouts (``heartbeatTimeoutMillis``), the expiry scan
(``scanNotActiveBrokerInterval``, 500 ms in both), heartbeats and version queries that keep a
broker alive, and connections dropped by a broker. Waits poll the servers with a deadline.

Both servers remove a silent broker between ``timeout`` and ``timeout + scan interval`` after
its last sign of life (plus scheduling slack) and close its connection; a dropped connection
removes its broker at once in both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from wire import SCAN_MS, WireClient, eventually
from wire_diff import Pair
from wire_requests import Broker, cmd, route

from routing.remoting import RequestCode, ResponseCode, decode_route

TIMEOUT_MS = 1_000
#: thread scheduling and the round trips of the polls on two shared cores (ms)
SLACK_MS = 1_500
TOPIC_NOT_EXIST = ResponseCode.TOPIC_NOT_EXIST


@pytest.fixture
def pair(pair: Pair, java: Any) -> Pair:
    """The pair, once Java's expiry scan runs (it starts 5 s after Java does)."""
    java.wait_until_scanning()
    return pair


def _gone_at(client: WireClient, topic: str, *, timeout_s: float = 10.0) -> float:
    """Poll until ``topic`` has no route; return the monotonic instant it was seen gone."""
    return _all_gone({"one": client}, topic, timeout_s=timeout_s)["one"]


def _all_gone(clients: dict[str, WireClient], topic: str, *, timeout_s: float = 10.0,
              between: Callable[[], object] = lambda: None) -> dict[str, float]:
    """Poll every client in turn (every 20 ms, calling ``between`` each round) until
    ``topic`` has no route on each; return when each was first seen gone (monotonic s)."""
    gone: dict[str, float] = {}
    deadline = time.monotonic() + timeout_s
    while len(gone) < len(clients) and time.monotonic() < deadline:
        between()
        for name, client in clients.items():
            if name not in gone and client.call(route(topic)).code == TOPIC_NOT_EXIST:
                gone[name] = time.monotonic()
        time.sleep(0.02)
    assert len(gone) == len(clients), f"{topic} still routed after {timeout_s} s: {gone}"
    return gone


def _brokers(client: WireClient, topic: str) -> list[str]:
    answer = client.call(route(topic))
    if answer.code != ResponseCode.SUCCESS:
        return []
    return sorted(b.broker_name for b in decode_route(answer.body).broker_datas)


def test_a_silent_broker_expires_within_its_timeout_plus_one_scan_in_both(
        pair: Pair) -> None:
    broker = Broker("silent", 10911, timeout_ms=TIMEOUT_MS)
    with WireClient(pair.java.address) as on_java, WireClient(pair.ours.address) as on_ours:
        registered = time.monotonic()
        assert on_java.call(broker.register(["Silent1", "Silent2"])).code == 0
        assert on_ours.call(broker.register(["Silent1", "Silent2"], bump=False)).code == 0
        pair.same(route("Silent1"))
        gone = _all_gone({"java": pair.java, "ours": pair.ours}, "Silent1")
        lived = {name: (at - registered) * 1000 for name, at in gone.items()}
        for name, ms in lived.items():
            assert TIMEOUT_MS <= ms <= TIMEOUT_MS + SCAN_MS + SLACK_MS, (name, lived)
        # both close the expired broker's connection
        assert on_java.closed_by_peer(3.0) and on_ours.closed_by_peer(3.0)
    pair.same(route("Silent2"))
    pair.same(cmd(RequestCode.GET_BROKER_CLUSTER_INFO))


def test_heartbeats_and_version_queries_keep_a_broker_alive_in_both(pair: Pair) -> None:
    hb = Broker("beating", 10921, timeout_ms=TIMEOUT_MS)
    qv = Broker("asking", 10931, timeout_ms=TIMEOUT_MS)
    conns = {n: (WireClient(pair.java.address), WireClient(pair.ours.address))
             for n in ("hb", "qv")}
    try:
        for name, broker in (("hb", hb), ("qv", qv)):
            java_conn, ours_conn = conns[name]
            assert java_conn.call(broker.register([f"{broker.name}1", "Shared"])).code == 0
            assert ours_conn.call(broker.register([f"{broker.name}1", "Shared"],
                                                  bump=False)).code == 0
        until = time.monotonic() + 3 * TIMEOUT_MS / 1000
        while time.monotonic() < until:  # three timeouts, signs of life every 300 ms
            for java_conn, ours_conn in (conns["hb"],):
                assert java_conn.call(hb.heartbeat()).code == ours_conn.call(hb.heartbeat()).code
            for java_conn, ours_conn in (conns["qv"],):
                j, o = java_conn.call(qv.query_version()), ours_conn.call(qv.query_version())
                assert (j.code, dict(j.ext_fields)) == (o.code, dict(o.ext_fields))
            assert _brokers(pair.java, "Shared") == _brokers(pair.ours, "Shared") \
                == ["asking", "beating"]
            time.sleep(0.3)  # the brokers' own period: the pause between signs of life
        pair.same(route("Shared"))
        last = time.monotonic()  # now the heartbeats stop; the version queries go on

        def ask() -> None:
            java_conn, ours_conn = conns["qv"]
            assert java_conn.call(qv.query_version()).code == 0
            assert ours_conn.call(qv.query_version()).code == 0

        gone = _all_gone({"java": pair.java, "ours": pair.ours}, "beating1", between=ask)
        for at in gone.values():
            assert (at - last) * 1000 <= TIMEOUT_MS + SCAN_MS + SLACK_MS, gone
        assert _brokers(pair.java, "Shared") == _brokers(pair.ours, "Shared") == ["asking"]
    finally:
        for java_conn, ours_conn in conns.values():
            java_conn.close()
            ours_conn.close()


def test_a_dropped_connection_removes_its_broker_at_once_in_both(pair: Pair) -> None:
    brokers = [Broker("closed", 10941), Broker("reset", 10951)]
    conns = []
    for broker in brokers:
        java_conn, ours_conn = WireClient(pair.java.address), WireClient(pair.ours.address)
        assert java_conn.call(broker.register([f"{broker.name}T", "Both"])).code == 0
        assert ours_conn.call(broker.register([f"{broker.name}T", "Both"], bump=False)).code == 0
        conns.append((java_conn, ours_conn))
    pair.same(route("Both"))
    start = time.monotonic()
    conns[0][0].close()  # FIN
    conns[0][1].close()
    conns[1][0].reset()  # RST, as a killed process's socket
    conns[1][1].reset()
    for client in (pair.java, pair.ours):
        for topic in ("closedT", "resetT", "Both"):
            _gone_at(client, topic, timeout_s=5.0)
    assert time.monotonic() - start < TIMEOUT_MS / 1000 + SLACK_MS / 1000  # not by expiry
    pair.same(cmd(RequestCode.GET_BROKER_CLUSTER_INFO))


def test_a_dropped_connection_with_two_brokers_removes_one_in_java_both_here(
        pair: Pair) -> None:
    """Java's ``onChannelDestroy`` unregisters the first broker it finds on the channel;
    ours every broker on it (spec D6). The other one lives on in Java until it expires."""
    first, second = Broker("first", 10961), Broker("second", 10971, timeout_ms=TIMEOUT_MS)
    java_conn, ours_conn = WireClient(pair.java.address), WireClient(pair.ours.address)
    for broker in (first, second):
        assert java_conn.call(broker.register([f"{broker.name}T", "Pair"])).code == 0
        assert ours_conn.call(broker.register([f"{broker.name}T", "Pair"], bump=False)).code == 0
    java_conn.close()
    ours_conn.close()
    _gone_at(pair.ours, "Pair", timeout_s=5.0)
    java_left = eventually(lambda: _brokers(pair.java, "Pair"), lambda b: len(b) == 1)
    assert len(java_left) == 1  # one of the two (Java's hash order decides which)
    _gone_at(pair.java, "Pair", timeout_s=5.0)  # the second one by expiry


def test_a_changed_scan_interval_applies_here_and_at_restart_in_java(pair: Pair) -> None:
    """318's ``scanNotActiveBrokerInterval`` is reported by both, but Java's scan task was
    scheduled at start with the old period; ours takes the new one from the next scan."""
    pair.same(cmd(RequestCode.UPDATE_NAMESRV_CONFIG, None, b"scanNotActiveBrokerInterval=60000"))
    try:
        broker = Broker("slow-scan", 10981, timeout_ms=TIMEOUT_MS)
        with WireClient(pair.java.address) as on_java, WireClient(pair.ours.address) as on_ours:
            # our next scan tick takes the new period; this broker is younger than its
            # timeout then, so ours will not scan again for a minute
            assert on_java.call(broker.register(["SlowScan", "X"])).code == 0
            assert on_ours.call(broker.register(["SlowScan", "X"], bump=False)).code == 0
            _gone_at(pair.java, "SlowScan", timeout_s=5.0)
            kept = eventually(lambda: _brokers(pair.ours, "SlowScan"), lambda b: not b,
                              timeout_s=1.5)
            assert kept == ["slow-scan"]
    finally:
        pair.same(cmd(RequestCode.UPDATE_NAMESRV_CONFIG, None,
                      f"scanNotActiveBrokerInterval={SCAN_MS}".encode()))
