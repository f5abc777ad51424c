"""``routing broker`` and `BrokerHost` over loopback: a broker's registration, heartbeat, topic
changes, reconnection, pushes and unregister against `routing serve`. Every wait polls a
condition with a timeout; nothing sleeps to synchronise."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any

import pytest

import routing as r
import test_remoting_client_interop as interop
from routing.heartbeat import BrokerConfig, BrokerHeartbeat
from routing.remoting import (
    BrokerHost,
    NameServerHost,
    NameServerProcessor,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    decode_route,
)
from routing.remoting.broker._serve import admin_command
from test_remoting_server import Client

TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def until(check: Callable[[], Awaitable[bool]] | Callable[[], bool], what: str,
                timeout_s: float = TIMEOUT_S) -> None:
    """Poll ``check`` every 20 ms until it holds; fail naming ``what`` after the timeout."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while True:
        got = check()
        if not isinstance(got, bool):
            got = await got
        if got:
            return
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def route(port: int, topic: str) -> r.TopicRouteData | None:
    """GET_ROUTEINFO_BY_TOPIC through the library's own codec."""
    try:
        client = await Client.connect(("127.0.0.1", port))
    except OSError:
        return None
    try:
        response: RemotingCommand = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                      topic=topic)
    finally:
        client.close()
    if response.code != ResponseCode.SUCCESS:
        return None
    return decode_route(response.body)


async def brokers_of(port: int, topic: str) -> list[str]:
    found = await route(port, topic)
    return [] if found is None else [b.broker_name for b in found.broker_datas]


def heartbeat(ns: tuple[str, ...], name: str = "broker-a", broker_id: int = 0,
              topics: tuple[str, ...] = ("T1", "T2"), **kw: Any) -> BrokerHeartbeat:
    config = BrokerConfig(cluster="c", broker_name=name, broker_id=broker_id,
                          broker_addr=f"127.0.0.1:{free_port()}", name_servers=ns,
                          scan_available_name_servers=True, **kw)
    return BrokerHeartbeat(config, topics=[r.TopicConfig(topic_name=t) for t in topics])


# =========================================================================== in process


def test_host_registers_follows_topic_changes_and_unregisters() -> None:
    async def scenario() -> None:
        manager = r.RouteInfoManager()
        async with NameServerHost(NameServerProcessor(manager), host="127.0.0.1",
                                  port=0) as ns:
            hb = heartbeat((f"127.0.0.1:{ns.port}",))
            host = BrokerHost(hb)
            await host.start()
            await until(lambda: manager.pickup_route("T1") is not None, "registration")
            done = admin_command(hb, "create Fresh 4")
            assert done is not None
            host.perform(done[0])
            await until(lambda: manager.pickup_route("Fresh") is not None, "the increment")
            fresh = manager.pickup_route("Fresh")
            assert fresh is not None and fresh.queue_datas[0].write_queue_nums == 4
            await host.shutdown()
            assert manager.pickup_route("T1") is None  # unregistered before returning

    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))


def test_host_reconnects_after_the_name_server_restarts() -> None:
    async def scenario() -> None:
        port = free_port()
        first = NameServerHost(NameServerProcessor(r.RouteInfoManager()), host="127.0.0.1",
                               port=port)
        await first.start()
        ns = f"127.0.0.1:{port}"
        hb = heartbeat((ns,), connect_timeout_ms=100)
        host = BrokerHost(hb, backoff_initial_ms=50, backoff_max_ms=200)
        await host.start()
        await until(lambda: first.processor.manager.pickup_route("T1") is not None,
                    "first registration")
        await first.close()
        await until(lambda: hb.available_name_servers == (), "the server to leave the list")
        link = host._links[ns]
        await until(lambda: link.backoff_ms == 200, "the backoff to grow to its cap")
        manager = r.RouteInfoManager()
        second = NameServerHost(NameServerProcessor(manager), host="127.0.0.1", port=port)
        await second.start()
        await until(lambda: hb.available_name_servers == (ns,), "the reconnection")
        host.perform(hb.register_now(force=True))
        await until(lambda: manager.pickup_route("T1") is not None, "re-registration")
        await host.shutdown()
        await second.close()

    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))


def test_member_group_sync_and_pushes_over_tcp() -> None:
    """An acting-master slave alone in its group learns it acts (GET_BROKER_MEMBER_GROUP);
    a NOTIFY_MIN_BROKER_ID_CHANGE push from the name server reaches a listening broker."""
    async def scenario() -> None:
        manager = r.RouteInfoManager(config=r.RoutingConfig(notify_min_broker_id_changed=True))
        async with NameServerHost(NameServerProcessor(manager), host="127.0.0.1",
                                  port=0) as ns:
            servers = (f"127.0.0.1:{ns.port}",)
            slave = heartbeat(servers, broker_id=2, enable_slave_acting_master=True,
                              compatible_with_old_namesrv=False)
            host = BrokerHost(slave, listen=("127.0.0.1",
                                             int(slave.config.broker_addr.split(":")[1])))
            await host.start()
            await until(lambda: slave.acting_as_master, "the slave to act as master")
            assert slave.min_broker_id == 2 and dict(slave.member_group) == {
                2: slave.config.broker_addr}
            other = heartbeat(servers, broker_id=1, enable_slave_acting_master=True)
            other_host = BrokerHost(other)
            await other_host.start()  # id 1 < 2: the name server pushes to id 2
            await until(lambda: slave.min_broker_id == 1, "the push")
            assert not slave.acting_as_master
            await other_host.shutdown()
            await host.shutdown()

    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))


def test_admin_commands() -> None:
    hb = heartbeat(("127.0.0.1:1",))
    assert admin_command(hb, "  ") is None and admin_command(hb, "# note") is None
    with pytest.raises(r.RoutingError, match="unknown admin command"):
        admin_command(hb, "frobnicate")
    with pytest.raises(r.RoutingError, match="QUEUES"):
        admin_command(hb, "create T x")
    with pytest.raises(r.InvalidRequest):
        admin_command(hb, "create bad/name")
    assert set(hb.topics) == {"T1", "T2"}
    done = admin_command(hb, "delete T1")
    assert done is not None and done[1]["ok"] and set(hb.topics) == {"T2"}
    done = admin_command(hb, "status")
    assert done is not None and done[1]["topics"] == ["T2"]
    done = admin_command(hb, "perm 4")
    assert done is not None and done[1]["perm"] == 4


# =========================================================================== processes


def _start(args: list[str], **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", "from routing.cli import main; main()",
                             *args], text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            **kw)


def _line(stream: IO[str] | None) -> dict[str, Any]:
    assert stream is not None
    line = stream.readline()
    assert line, "the process exited early"
    doc: dict[str, Any] = json.loads(line)
    return doc


@pytest.mark.slow
def test_routing_serve_and_two_routing_brokers(tmp_path: Path) -> None:
    procs: list[subprocess.Popen[str]] = []
    try:
        server = _start(["serve", "--listen", "127.0.0.1:0", "--log-json",
                         "--scan-interval-ms", "200"], stderr=subprocess.PIPE)
        procs.append(server)
        event: dict[str, Any] = {}
        while event.get("event") != "listening":
            event = _line(server.stderr)
        port = event["port"]
        namesrv = f"127.0.0.1:{port}"
        brokers = {}
        for name, topics in (("broker-a", "TopicTest,only-a"), ("broker-b", "TopicTest,only-b")):
            proc = _start(["broker", "--namesrv", namesrv, "--cluster", "c1", "--name", name,
                           "--id", "0", "--addr", f"127.0.0.1:{free_port()}", "--topics",
                           topics, "--queues", "4", "--journal", str(tmp_path / name)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL)
            procs.append(proc)
            brokers[name] = proc
            assert _line(proc.stdout)["event"] == "started"

        async def both_registered() -> None:
            await until(lambda: _eq(brokers_of(port, "TopicTest"), ["broker-a", "broker-b"]),
                        "both brokers in the route")

        asyncio.run(both_registered())
        if interop.NODE is not None and interop.MODULES is not None:  # a real client
            script = tmp_path / "probe.js"
            script.write_text(interop.PROBE)
            found = asyncio.run(interop._ask(script, "TopicTest", port))
            assert found["ok"], found
            assert [b["brokerName"] for b in found["route"]["brokerDatas"]] == [
                "broker-a", "broker-b"]
            assert [q["writeQueueNums"] for q in found["route"]["queueDatas"]] == [4, 4]

        a, b = brokers["broker-a"], brokers["broker-b"]
        assert a.stdin is not None
        a.stdin.write("create Fresh 2\n")
        a.stdin.flush()
        assert _line(a.stdout)["command"] == "create"
        asyncio.run(until(lambda: _eq(brokers_of(port, "Fresh"), ["broker-a"]),
                          "the created topic"))

        b.kill()  # SIGKILL: no unregister; the name server drops it when the channel closes
        b.wait(timeout=TIMEOUT_S)
        asyncio.run(until(lambda: _eq(brokers_of(port, "TopicTest"), ["broker-a"]),
                          "broker-b dropped on channel close"))
        assert asyncio.run(brokers_of(port, "only-b")) == []

        a.send_signal(signal.SIGTERM)  # unregisters, then exits
        assert a.wait(timeout=TIMEOUT_S) == 0
        assert a.stdout is not None and json.loads(a.stdout.read().splitlines()[-1]) == {
            "event": "stopped"}
        assert asyncio.run(brokers_of(port, "TopicTest")) == []
        journal = [json.loads(line) for p in (tmp_path / "broker-a").iterdir()
                   for line in p.read_text().splitlines()]
        assert any(e.get("action") == "SendUnregister" and e["kind"] == "outcome"
                   and e["code"] == 0 for e in journal)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=TIMEOUT_S)


async def _eq(names: Awaitable[list[str]], expected: list[str]) -> bool:
    return await names == expected


def test_a_broker_without_topics_still_registers_its_system_topics() -> None:
    from routing.cli._broker import system_topics

    async def scenario() -> None:
        manager = r.RouteInfoManager()
        async with NameServerHost(NameServerProcessor(manager), host="127.0.0.1",
                                  port=0) as ns:
            config = BrokerConfig(cluster="c", broker_name="lonely", broker_id=0,
                                  broker_addr=f"127.0.0.1:{free_port()}",
                                  name_servers=(f"127.0.0.1:{ns.port}",))
            hb = BrokerHeartbeat(config, topics=system_topics("c", "lonely"))
            host = BrokerHost(hb)
            await host.start()
            await until(lambda: manager.pickup_route("lonely") is not None, "registration")
            assert set(manager.all_topics()) == {
                "c", "lonely", "rmq_sys_SYNC_BROKER_MEMBER_lonely"}
            await host.shutdown()

    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))


def test_the_remoting_face_imports_the_broker_side_on_first_use() -> None:
    code = ("import sys\n"
            "import routing.remoting as rm\n"
            "print(sorted(m for m in sys.modules if m.startswith(('routing.heartbeat',"
            " 'routing.remoting.broker'))))\n"
            "from routing.remoting.broker._host import BrokerHost\n"
            "from routing.remoting.broker._serve import run_broker, serve_broker\n"
            "print(rm.BrokerHost is BrokerHost, rm.run_broker is run_broker,"
            " rm.serve_broker is serve_broker)\n"
            "print(hasattr(rm, 'NoSuchName'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
                         ).stdout.splitlines()
    assert out == ["[]", "True True True", "False"]

