"""`routing.remoting.query_route` (blocking) and `query_route_async`, and ``routing route``,
against a name server on loopback: the route a broker registered, None for an unknown topic,
one typed error for everything else (not ready, unreachable, silent, closed). Every wait is
on the event loop with a timeout; the blocking client runs in a worker thread."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from click.testing import CliRunner

import routing as r
from routing.cli import main
from routing.remoting import (
    NameServerHost,
    NameServerProcessor,
    ResponseCode,
    RouteQueryError,
    query_route,
    query_route_async,
)
from routing.remoting.client._route_query import route_request
from test_remoting_server import Client, register, run


def _registered(manager: r.RouteInfoManager) -> None:
    for name, addr in (("broker-a", "10.0.0.1:10911"), ("broker-b", "10.0.0.2:10911")):
        assert manager.register(r.Registration(
            cluster="c1", broker_name=name, broker_id=0, broker_addr=addr,
            topics={t: r.TopicConfig(topic_name=t, read_queue_nums=4, write_queue_nums=4)
                    for t in ("Orders", name)})).accepted


def with_server(scenario: Callable[[tuple[str, int], r.RouteInfoManager], Awaitable[None]],
                **config: Any) -> None:
    async def main_() -> None:
        manager = r.RouteInfoManager(config=r.RoutingConfig(**config))
        async with NameServerHost(NameServerProcessor(manager), host="127.0.0.1",
                                  port=0) as host:
            await scenario(host.address, manager)

    run(main_)


def test_query_route_returns_what_the_name_server_holds() -> None:
    async def scenario(address: tuple[str, int], manager: r.RouteInfoManager) -> None:
        host, port = address
        assert await asyncio.to_thread(query_route, host, port, "Orders") is None
        _registered(manager)
        got = await asyncio.to_thread(query_route, host, port, "Orders")
        assert got == manager.pickup_route("Orders")
        assert got is not None and [b.broker_name for b in got.broker_datas] == [
            "broker-a", "broker-b"] and got.writable_queue_count == 8
        assert await query_route_async(host, port, "Orders") == got
        assert await query_route_async(host, port, "Nothing") is None
        # a real broker's registration over the protocol, then the client
        broker = await Client.connect(address)
        ok = await register(broker, "broker-c", "127.0.0.1:10931", "Orders", "Fresh")
        assert ok.code == ResponseCode.SUCCESS
        fresh = await asyncio.to_thread(query_route, host, port, "Fresh")
        assert fresh is not None and dict(fresh.broker_datas[0].broker_addrs) == {
            0: "127.0.0.1:10931"}
        broker.close()

    with_server(scenario)


def test_an_error_answer_is_a_route_query_error_with_its_code() -> None:
    async def scenario(address: tuple[str, int], _manager: r.RouteInfoManager) -> None:
        for ask in (lambda: asyncio.to_thread(query_route, *address, "Orders"),
                    lambda: query_route_async(*address, "Orders")):
            with pytest.raises(RouteQueryError) as err:
                await ask()
            assert err.value.code == ResponseCode.SYSTEM_ERROR
            assert err.value.remark == "name server not ready"
            assert str(err.value) == (f"{address[0]}:{address[1]} answered SYSTEM_ERROR for "
                                      "topic 'Orders': name server not ready")
            assert isinstance(err.value, r.RoutingError) and isinstance(err.value, OSError)

    with_server(scenario, wait_for_service_ms=60_000)


def test_unreachable_silent_and_closing_servers() -> None:
    async def scenario() -> None:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(65_536)  # reads the request, never answers
            await asyncio.Event().wait()  # (held open until the test is over)

        async def closing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(65_536)
            writer.close()

        quiet = await asyncio.start_server(silent, "127.0.0.1", 0)
        rude = await asyncio.start_server(closing, "127.0.0.1", 0)
        free = await asyncio.start_server(closing, "127.0.0.1", 0)
        gone = free.sockets[0].getsockname()[1]
        free.close()
        await free.wait_closed()
        q, c = quiet.sockets[0].getsockname()[1], rude.sockets[0].getsockname()[1]
        cases = [(q, f"no answer from 127.0.0.1:{q} within 200 ms"),
                 (c, f"127.0.0.1:{c} closed the connection before answering"),
                 (gone, f"cannot reach the name server 127.0.0.1:{gone}: ")]
        for port, message in cases:
            for ask in (lambda p=port: asyncio.to_thread(query_route, "127.0.0.1", p, "T",
                                                          timeout_ms=200),
                        lambda p=port: query_route_async("127.0.0.1", p, "T", timeout_ms=200)):
                with pytest.raises(RouteQueryError) as err:
                    await ask()
                assert str(err.value).startswith(message), (str(err.value), message)
                assert err.value.address == f"127.0.0.1:{port}" and err.value.code is None
        quiet.close()
        rude.close()

    run(scenario)


def test_the_request_is_what_a_java_client_sends() -> None:
    request = route_request("Orders", opaque=9)
    assert (request.code, request.opaque, dict(request.ext_fields)) == (105, 9, {
        "topic": "Orders"})
    assert request.version >= 373  # V4_9_4+: the name server answers standard JSON


def test_routing_route_prints_the_route_as_tables_or_json() -> None:
    async def scenario(address: tuple[str, int], manager: r.RouteInfoManager) -> None:
        _registered(manager)
        ns = f"{address[0]}:{address[1]}"

        def cli(*args: str) -> Any:
            return CliRunner().invoke(main, ["route", *args], prog_name="routing")

        table = await asyncio.to_thread(cli, "Orders", "--namesrv", ns)
        assert table.exit_code == 0, table.output
        assert f"Orders on {ns}: 2 group(s), 8 writable queue(s)" in table.output
        for text in ("broker-a", "10.0.0.2:10911", "RW-"):
            assert text in table.output
        as_json = await asyncio.to_thread(cli, "Orders", "--namesrv", f"127.0.0.1:1;{ns}",
                                          "--json")  # the first that answers
        assert as_json.exit_code == 0, as_json.output
        doc = json.loads(as_json.stdout)
        assert r.TopicRouteData.from_json(doc) == manager.pickup_route("Orders")
        missing = await asyncio.to_thread(cli, "Nothing", "--namesrv", ns)
        assert missing.exit_code == 1
        assert missing.output.strip().splitlines()[-1] == (
            f"Error: no route for topic 'Nothing' on {ns}")
        down = await asyncio.to_thread(cli, "Orders", "--namesrv", "127.0.0.1:1")
        assert down.exit_code == 1 and "Traceback" not in down.output
        assert "cannot reach the name server 127.0.0.1:1" in down.output
        bad = await asyncio.to_thread(cli, "Orders", "--namesrv", "127.0.0.1:99999")
        assert bad.exit_code == 2 and "Invalid value for --namesrv" in bad.output

    with_server(scenario)
