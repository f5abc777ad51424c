"""Apache RocketMQ's own name server as the oracle (``java`` tests).

One Java name server for the whole run (built once, about 20 s the first time and cached;
started in about 4 s), with ``scanNotActiveBrokerInterval`` short so that expiries happen in
about a second. Only tests that ask for ``java`` (everything under tests/java/) pay for it.
Before each test its state is emptied (brokers unregistered, topics deleted, the order-topic
KV namespace cleared) and checked; a server that cannot be brought back to empty, or whose
settings a test changed, is replaced by a fresh one.

Where ``javac`` or the build tool is missing the tests skip with the reason, except in CI
(``CI`` set), where that is a failure. See java_namesrv.py for where the tool is looked for.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from java_namesrv import JavaNameServer, JavaUnavailable, build, find_tool
from wire import SCAN_MS, RoutingServer, WireClient, eventually, properties_like_java
from wire_diff import Pair, align_kv_namespaces
from wire_requests import cmd

from routing.remoting import (
    NAMESPACE_ORDER_TOPIC_CONFIG,
    RequestCode,
    ResponseCode,
    decode_cluster_info,
    decode_kv_table,
    decode_topic_list,
)

#: Java's delay before the first expiry scan (s).
JAVA_FIRST_SCAN_S = 5.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Everything under tests/java/ is a ``java`` test."""
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.java)


def _unavailable(exc: Exception) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"Java's name server cannot run in CI: {exc}")
    pytest.skip(f"Java's name server cannot run here: {exc}")


class Oracle:
    """The session's Java name server, kept clean between tests."""

    def __init__(self) -> None:
        self.server: JavaNameServer | None = None
        self.config: bytes = b""
        self.restarts = 0
        self.started = 0.0

    @property
    def address(self) -> tuple[str, int]:
        assert self.server is not None
        return self.server.address

    def start(self) -> None:
        self.server = JavaNameServer(
            properties={"scanNotActiveBrokerInterval": str(SCAN_MS)},
            env={"RMQ_LOG_LEVEL": "WARN"}).start()
        self.started = time.monotonic()
        with WireClient(self.address) as client:
            self.config = client.call(cmd(RequestCode.GET_NAMESRV_CONFIG)).body

    def wait_until_scanning(self) -> None:
        """Java's scan task first runs 5 000 ms after start (``startScheduleService``), then
        every ``scanNotActiveBrokerInterval``: wait for that instant if it is still ahead."""
        ahead = self.started + JAVA_FIRST_SCAN_S - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def restart(self) -> None:
        self.stop()
        self.restarts += 1
        self.start()

    def _empty(self, client: WireClient) -> bool:
        info = decode_cluster_info(client.call(cmd(RequestCode.GET_BROKER_CLUSTER_INFO)).body)
        topics = decode_topic_list(
            client.call(cmd(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body).topics
        kv = client.call(cmd(RequestCode.GET_KVLIST_BY_NAMESPACE,
                             {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG}))
        return (not info.broker_addr_table and not info.cluster_addr_table and not topics
                and (kv.code != ResponseCode.SUCCESS or not decode_kv_table(kv.body)))

    def clean(self) -> None:
        """Bring Java back to an empty state with the start settings, or restart it."""
        try:
            with WireClient(self.address) as client:
                if client.call(cmd(RequestCode.GET_NAMESRV_CONFIG)).body != self.config:
                    raise ConnectionError("settings changed")
                if self._empty(client):
                    return
                info = decode_cluster_info(
                    client.call(cmd(RequestCode.GET_BROKER_CLUSTER_INFO)).body)
                for group in info.broker_addr_table.values():
                    for broker_id, addr in group.broker_addrs.items():
                        client.call(cmd(RequestCode.UNREGISTER_BROKER, {
                            "clusterName": group.cluster, "brokerName": group.broker_name,
                            "brokerAddr": addr, "brokerId": str(broker_id)}))
                listed = client.call(cmd(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
                for topic in decode_topic_list(listed.body).topics:
                    client.call(cmd(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic}))
                kv = client.call(cmd(RequestCode.GET_KVLIST_BY_NAMESPACE,
                                     {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG}))
                if kv.code == ResponseCode.SUCCESS:
                    for key in decode_kv_table(kv.body):
                        client.call(cmd(RequestCode.DELETE_KV_CONFIG, {
                            "namespace": NAMESPACE_ORDER_TOPIC_CONFIG, "key": key}))
                if eventually(lambda: self._empty(client), bool, timeout_s=5):
                    return
        except Exception:
            pass
        self.restart()


@pytest.fixture(scope="session")
def java_namesrv() -> Iterator[Oracle]:
    """The session's Java name server (built and started on first use)."""
    try:
        build(find_tool())
    except JavaUnavailable as exc:
        _unavailable(exc)
    oracle = Oracle()
    try:
        oracle.start()
    except JavaUnavailable as exc:
        _unavailable(exc)
    yield oracle
    oracle.stop()


@pytest.fixture
def java(java_namesrv: Oracle) -> Oracle:
    """Java's name server, empty and with its start settings."""
    java_namesrv.clean()
    return java_namesrv


@pytest.fixture
def ours(tmp_path: Path) -> Iterator[RoutingServer]:
    """``routing serve --config`` with the settings Java got, on a free loopback port."""
    server = RoutingServer(config_file=properties_like_java(tmp_path / "ours")).start()
    yield server
    server.stop()


@pytest.fixture
def pair(java: Oracle, ours: RoutingServer) -> Iterator[Pair]:
    """One connection to each server."""
    with Pair(java.address, ours.address) as both:
        align_kv_namespaces(both)
        yield both

