"""End to end over loopback (127.0.0.1 only): brokers register through the protocol,
clients fetch routes, a dropped broker connection removes its routes at once, expiry
closes connections, notifications go out, bad frames close the connection, shutdown is
graceful. Every wait is on a condition with a timeout; nothing sleeps."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import attrs
import pytest

import routing as r
from routing.journal import parse_journal_file_name
from routing.remoting import (
    CURRENT_VERSION,
    FLAG_ONEWAY,
    FrameDecoder,
    NameServerHost,
    NameServerProcessor,
    RegisterBrokerBody,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    body_crc32,
    decode_route,
    encode,
    serve,
)
from test_remoting_processor import ManagerSpy

TIMEOUT_S = 10.0
_opaques = itertools.count(1)


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))


class Client:
    """A minimal remoting client: one connection, requests matched to responses by opaque."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = FrameDecoder()
        self.pending: list[RemotingCommand] = []

    @classmethod
    async def connect(cls, address: tuple[str, int]) -> Client:
        reader, writer = await asyncio.open_connection(*address)
        return cls(reader, writer)

    async def call(self, code: int, *, body: bytes = b"", kind: SerializeType = SerializeType.JSON,
                   version: int = CURRENT_VERSION, **ext: str) -> RemotingCommand:
        opaque = next(_opaques)
        self.writer.write(encode(RemotingCommand(code=code, opaque=opaque, version=version,
                                                 ext_fields=ext, body=body,
                                                 serialize_type=kind)))
        await self.writer.drain()
        while True:
            for cmd in self.pending:
                if cmd.opaque == opaque:
                    self.pending.remove(cmd)
                    return cmd
            data = await self.reader.read(65536)
            assert data, "server closed the connection"
            self.pending += self.decoder.feed(data)

    async def eof(self) -> bool:
        """True once the server closed the connection (reads until EOF)."""
        while await self.reader.read(65536):
            pass
        return True

    def close(self) -> None:
        self.writer.close()


def registration_fields(name: str, addr: str, broker_id: int = 0, **extra: str) -> dict[str, str]:
    return {"brokerName": name, "brokerAddr": addr, "clusterName": "c1",
            "haServerAddr": addr, "brokerId": str(broker_id), **extra}


async def register(client: Client, name: str, addr: str, *topics: str, broker_id: int = 0,
                   **extra: str) -> RemotingCommand:
    body = RegisterBrokerBody(data_version=r.DataVersion(counter=1, timestamp=1),
                              topics={t: r.TopicConfig(topic_name=t) for t in topics}).encode()
    return await client.call(RequestCode.REGISTER_BROKER, body=body,
                             **registration_fields(name, addr, broker_id,
                                                   bodyCrc32=str(body_crc32(body)), **extra))


class Changes:
    """A RouteListener that lets a test await the next route change (no polling)."""

    def __init__(self) -> None:
        self.events: list[r.RouteChange] = []
        self.changed = asyncio.Event()

    def __call__(self, change: r.RouteChange) -> None:
        self.events.append(change)
        self.changed.set()

    async def wait_for(self, predicate: Callable[[r.RouteChange], bool]) -> r.RouteChange:
        while True:
            for change in self.events:
                if predicate(change):
                    return change
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), TIMEOUT_S)


def host_for(manager: r.RouteInfoManager, **kwargs: Any) -> NameServerHost:
    return NameServerHost(NameServerProcessor(manager), host="127.0.0.1", port=0, **kwargs)


def test_register_fetch_and_drop_over_loopback() -> None:
    async def scenario() -> None:
        changes = Changes()
        manager = r.RouteInfoManager(listener=changes)
        async with host_for(manager) as host:
            assert host.address[0] == "127.0.0.1" and host.address[1] > 0
            broker_a = await Client.connect(host.address)
            broker_b = await Client.connect(host.address)
            client = await Client.connect(host.address)
            ok = await register(broker_a, "broker-a", "127.0.0.1:10911", "T1", "T2")
            assert ok.code == ResponseCode.SUCCESS
            ok = await register(broker_b, "broker-b", "127.0.0.1:10921", "T1", "T3")
            assert ok.code == ResponseCode.SUCCESS
            for kind in SerializeType:
                response = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T1",
                                             kind=kind)
                assert response.code == ResponseCode.SUCCESS
                assert response.serialize_type is kind
                route = decode_route(response.body)
                assert [b.broker_name for b in route.broker_datas] == ["broker-a", "broker-b"]

            broker_a.close()  # the connection drops: broker-a's routes go at once
            await changes.wait_for(lambda c: any(x.reason == "channel_closed"
                                                 for x in c.removed))
            gone = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T2")
            assert gone.code == ResponseCode.TOPIC_NOT_EXIST
            left = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T1")
            assert [b.broker_name for b in decode_route(left.body).broker_datas] == ["broker-b"]
            assert len(host.channels) == 2
            broker_b.close()
            client.close()

    run(scenario)


def test_pipelined_requests_and_oneway() -> None:
    async def scenario() -> None:
        manager = r.RouteInfoManager()
        async with host_for(manager) as host:
            broker = await Client.connect(host.address)
            await register(broker, "broker-a", "127.0.0.1:10911", "T1", "T2")
            frames = [RemotingCommand(code=RequestCode.BROKER_HEARTBEAT, opaque=1,
                                      flag=FLAG_ONEWAY,
                                      ext_fields=registration_fields("broker-a",
                                                                     "127.0.0.1:10911"))]
            frames += [RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=i,
                                       ext_fields={"topic": f"T{i % 3}"}) for i in range(2, 52)]
            broker.writer.write(b"".join(encode(f) for f in frames))
            responses: list[RemotingCommand] = []
            while len(responses) < 50:
                data = await broker.reader.read(65536)
                assert data
                responses += broker.decoder.feed(data)
            assert [c.opaque for c in responses] == list(range(2, 52))  # no answer to oneway
            assert {c.code for c in responses} == {ResponseCode.SUCCESS,
                                                   ResponseCode.TOPIC_NOT_EXIST}
            broker.close()

    run(scenario)


@pytest.mark.parametrize("garbage", [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",           # a length of 1.2 GB: refused at once
    b"\x00\x00\x00\x10\x07\x00\x00\x04abcdefghijkl",  # unknown serialize type
    b"\x00\x00\x00\x09\x00\x00\x00\x05{oops",        # malformed header JSON
])
def test_protocol_errors_close_only_that_connection(garbage: bytes,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        async with host_for(r.RouteInfoManager()) as host:
            bad = await Client.connect(host.address)
            good = await Client.connect(host.address)
            bad.writer.write(garbage)
            assert await asyncio.wait_for(bad.eof(), TIMEOUT_S)
            response = await good.call(RequestCode.GET_BROKER_CLUSTER_INFO)
            assert response.code == ResponseCode.SUCCESS
            good.close()

    with caplog.at_level(logging.WARNING, logger="routing.remoting"):
        run(scenario)
    assert any(getattr(rec, "event", None) == "protocol_error" for rec in caplog.records)


def test_expiry_scan_removes_broker_and_closes_its_connection(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        clock = r.ManualClock(start_ms=0)
        changes = Changes()
        manager = r.RouteInfoManager(clock=clock, listener=changes)
        async with host_for(manager, scan_interval_ms=5) as host:
            broker = await Client.connect(host.address)
            await register(broker, "broker-a", "127.0.0.1:10911", "T1", "T2",
                           heartbeatTimeoutMillis="1000")
            clock.advance(1_001)
            await changes.wait_for(lambda c: any(x.reason == "expired" for x in c.removed))
            assert await asyncio.wait_for(broker.eof(), TIMEOUT_S)
            assert manager.pickup_route("T1") is None

    with caplog.at_level(logging.INFO, logger="routing.remoting"):
        run(scenario)
    removed = [rec for rec in caplog.records if getattr(rec, "event", None) == "broker_removed"]
    assert removed and removed[0].broker_addr == "127.0.0.1:10911"  # type: ignore[attr-defined]


def test_min_broker_id_notification_reaches_the_broker() -> None:
    async def scenario() -> None:
        received: asyncio.Queue[RemotingCommand] = asyncio.Queue()

        async def fake_broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            decoder = FrameDecoder()
            while data := await reader.read(65536):
                for cmd in decoder.feed(data):
                    received.put_nowait(cmd)
            writer.close()

        listener = await asyncio.start_server(fake_broker, "127.0.0.1", 0)
        slave_addr = f"127.0.0.1:{listener.sockets[0].getsockname()[1]}"
        manager = r.RouteInfoManager(config=r.RoutingConfig(notify_min_broker_id_changed=True))
        async with listener, host_for(manager) as host:
            broker = await Client.connect(host.address)
            await register(broker, "broker-a", slave_addr, "T1", "T2", broker_id=1,
                           enableActingMaster="true")
            await register(broker, "broker-a", "127.0.0.1:10911", "T1", "T2", broker_id=0,
                           enableActingMaster="true")
            note = await asyncio.wait_for(received.get(), TIMEOUT_S)
            assert note.code == RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE and note.is_oneway
            assert note.ext_fields["minBrokerAddr"] == "127.0.0.1:10911"
            broker.close()

    run(scenario)


def test_serve_with_ready_and_stop_events() -> None:
    async def scenario() -> None:
        ready, stop = asyncio.Event(), asyncio.Event()
        manager = r.RouteInfoManager()
        task = asyncio.create_task(serve("127.0.0.1", 0, manager=manager, ready_event=ready,
                                         stop_event=stop, install_signal_handlers=False))
        await asyncio.wait_for(ready.wait(), TIMEOUT_S)
        stop.set()
        host, port = await asyncio.wait_for(task, TIMEOUT_S)
        assert host == "127.0.0.1" and port > 0

    run(scenario)


def test_serve_rejects_a_config_that_contradicts_the_manager() -> None:
    async def conflicting() -> None:
        await serve("127.0.0.1", 0, manager=r.RouteInfoManager(),
                    config=r.RoutingConfig(order_message_enable=True),
                    install_signal_handlers=False)

    with pytest.raises(ValueError, match="either manager or config"):
        run(conflicting)


def test_sigterm_shuts_down_gracefully(tmp_path: Any) -> None:
    script = ("import logging, sys\n"
              "logging.basicConfig(level=logging.INFO, stream=sys.stderr,"
              " format='%(message)s')\n"
              "from routing.remoting import run_server\n"
              "sys.exit(run_server('127.0.0.1', 0, scan_interval_ms=50))\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # blocks until the server logs that it listens
        assert line.startswith("listening host=127.0.0.1 port="), line
        port = int(line.split("port=")[1].split()[0])

        async def ask() -> None:
            client = await Client.connect(("127.0.0.1", port))
            response = await client.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            assert response.code == ResponseCode.SUCCESS
            client.close()

        run(ask)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=TIMEOUT_S) == 0
        rest = proc.stderr.read()
        assert "shutting_down" in rest and "stopped" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT_S)


def test_channel_handles_are_distinct_and_hashable() -> None:
    async def scenario() -> None:
        async with host_for(r.RouteInfoManager()) as host:
            clients = [await Client.connect(host.address) for _ in range(3)]
            await asyncio.gather(*(c.call(RequestCode.GET_BROKER_CLUSTER_INFO) for c in clients))
            assert len(set(host.channels)) == 3
            for c in clients:
                c.close()

    run(scenario)



def _journal_available() -> bool:
    try:
        import routing.journal as journal
    except ImportError:
        return False
    return hasattr(journal, "JournalRecorder")


async def _serve_and_register(journal_dir: Any, **more: Any) -> None:
    listening: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    task = asyncio.create_task(serve("127.0.0.1", 0, journal_dir=journal_dir,
                                     nameserver_id="ns-test", on_listening=listening.set_result,
                                     stop_event=stop, install_signal_handlers=False, **more))
    done, _ = await asyncio.wait({task, listening}, timeout=TIMEOUT_S,
                                 return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        await task  # failed before listening: raise what it raised
    broker = await Client.connect(listening.result())
    assert (await register(broker, "broker-a", "127.0.0.1:10911", "T1", "T2")).code == 0
    broker.close()
    stop.set()
    await asyncio.wait_for(task, TIMEOUT_S)


def test_serve_journal(tmp_path: Any) -> None:
    if not _journal_available():
        with pytest.raises(r.RoutingError, match="JournalRecorder is not available"):
            run(lambda: _serve_and_register(tmp_path / "j"))
        return
    run(lambda: _serve_and_register(tmp_path / "j"))
    [path] = list((tmp_path / "j").iterdir())  # a rotated file, renamed into place
    assert path.name == "ns-test.0000000000000000.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["nameserver"] == "ns-test"
    ops = [line["op"] for line in lines[1:]]
    assert ops[0] == "register" and lines[1]["broker_addr"] == "127.0.0.1:10911"


def test_serve_journal_with_snapshots(tmp_path: Any) -> None:
    from routing.journal import Replayer, read_journal, read_journals, replay, rotated_files

    run(lambda: _serve_and_register(tmp_path / "j", journal_snapshot_every_ms=1))
    paths = rotated_files(tmp_path / "j", "ns-test")
    assert sorted(p.name for p in (tmp_path / "j").iterdir()) == [p.name for p in paths]
    read = read_journals(paths)
    assert read.ok
    assert [e.op for e in read.records] == ["header", "register", "snapshot"]
    # the snapshot starts a file of its own, which reads without the one before
    assert [e.op for e in read_journal(paths[-1]).records] == ["snapshot"]
    events = list(replay(read.records, replayer=Replayer()))
    assert events[-1].result is True  # the replayed state is the server's, to the ms


def test_serve_journal_rotates_into_complete_files(tmp_path: Any) -> None:
    """With a 1 ms rotation every line written a millisecond or more after the file's first
    one starts a new file: the header and the registration are apart, every file is in
    place once the server stopped, and the folder reads as one journal."""
    from routing.journal import read_journals, rotated_files

    run(lambda: _serve_and_register(tmp_path / "j", journal_rotate_every_ms=1,
                                    journal_rotate_bytes=0))
    paths = rotated_files(tmp_path / "j", "ns-test")
    assert sorted(p.name for p in (tmp_path / "j").iterdir()) == [p.name for p in paths]
    assert len(paths) >= 2 and paths[0].read_text().count("\n") == 1  # the header alone
    read = read_journals(paths)
    assert read.ok and [e.op for e in read.records][:2] == ["header", "register"]


def test_routing_serve_cli_logs_json_and_stops_on_sigint(tmp_path: Any) -> None:
    command = [sys.executable, "-c", "from routing.cli import main; main()", "serve",
               "--listen", "127.0.0.1:0", "--log-json", "--scan-interval-ms", "50",
               "--journal", str(tmp_path), "--nameserver-id", "ns-cli"]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stderr is not None
        events = []
        while not events or events[-1].get("event") != "listening":
            line = proc.stderr.readline()
            assert line, f"server exited early: {proc.wait(timeout=TIMEOUT_S)}"
            events.append(json.loads(line))
        port = events[-1]["port"]
        assert events[-1]["host"] == "127.0.0.1" and isinstance(port, int)
        assert any(e.get("event") == "journal_opened" for e in events)

        async def ask() -> None:
            client = await Client.connect(("127.0.0.1", port))
            response = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="none")
            assert response.code == ResponseCode.TOPIC_NOT_EXIST
            client.close()

        run(ask)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=TIMEOUT_S) == 0
        tail = [json.loads(line) for line in proc.stderr.read().splitlines()]
        assert [e["event"] for e in tail][-2:] == ["shutting_down", "stopped"]
        names = sorted(p.name for p in tmp_path.iterdir())  # every file renamed into place
        assert names[0] == "ns-cli.0000000000000000.jsonl"
        assert {(parse_journal_file_name(n) or ("?",))[0] for n in names} == {"ns-cli"}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT_S)


def test_idle_connections_are_closed() -> None:
    async def scenario() -> None:
        changes = Changes()
        manager = r.RouteInfoManager(listener=changes)
        async with host_for(manager, scan_interval_ms=5, idle_timeout_ms=50) as host:
            broker = await Client.connect(host.address)
            await register(broker, "broker-a", "127.0.0.1:10911", "T1", "T2")
            assert await asyncio.wait_for(broker.eof(), TIMEOUT_S)  # silent for 50 ms
            await changes.wait_for(lambda c: any(x.reason == "channel_closed"
                                                 for x in c.removed))
            assert manager.pickup_route("T1") is None

    run(scenario)


def test_unencodable_response_becomes_system_error() -> None:
    class Odd(NameServerProcessor):
        def process(self, request: RemotingCommand, channel: Any = None) -> Any:
            out = super().process(request, channel)
            return attrs.evolve(out, response=out.response and attrs.evolve(
                out.response, ext_fields={"bad": "\ud800"}))

    async def scenario() -> None:
        host = NameServerHost(Odd(r.RouteInfoManager()), host="127.0.0.1", port=0)
        async with host:
            client = await Client.connect(host.address)
            response = await client.call(RequestCode.GET_BROKER_CLUSTER_INFO)
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert (response.remark or "").startswith("unencodable")
            client.close()

    run(scenario)


@pytest.mark.parametrize("piece", [1, 7, 4096, 200_000])
def test_large_frames_in_any_pieces_are_answered_and_decoded_once(piece: int) -> None:
    """A 1 000-topic registration (~150 KB) sent whole and cut into pieces of ``piece``
    bytes (a partial frame is kept by the connection, whole ones decoded in the shared
    receive buffer); each answer right, and the body decoded once: an equal body is the
    connection's previous object, so the processor's memo hands over the same table."""
    seen = ManagerSpy(r.RouteInfoManager())
    topics = {f"T{i}": r.TopicConfig(topic_name=f"T{i}", write_queue_nums=8) for i in range(1_000)}
    body = RegisterBrokerBody(data_version=r.DataVersion(counter=1, timestamp=1),
                              topics=topics).encode()
    fields = registration_fields("b", "10.0.0.9:10911", bodyCrc32=str(body_crc32(body)))

    async def scenario() -> None:
        proc = NameServerProcessor(seen, renew_unchanged=True)  # type: ignore[arg-type]
        async with NameServerHost(proc, host="127.0.0.1", port=0,
                                  read_chunk_bytes=64 * 1024) as host:
            client = await Client.connect(host.address)
            for opaque in range(1, 5):
                frame = encode(RemotingCommand(code=RequestCode.REGISTER_BROKER, opaque=opaque,
                                               version=CURRENT_VERSION, ext_fields=fields,
                                               body=body))
                for start in range(0, len(frame), piece):
                    client.writer.write(frame[start:start + piece])
                    await client.writer.drain()
                while not any(c.opaque == opaque for c in client.pending):
                    data = await client.reader.read(65536)
                    assert data
                    client.pending += client.decoder.feed(data)
                [answer] = [c for c in client.pending if c.opaque == opaque]
                assert answer.code == ResponseCode.SUCCESS, answer.remark
            client.close()
            tables = [reg.topics for reg in seen.seen]
            assert len(tables) == 5  # first: renew misses, then register; 3 renewals
            assert all(t is tables[0] for t in tables)
            assert seen.manager.pickup_route("T999") is not None

    run(scenario)
