"""`routing serve` as operators run it: removal notices sent, graceful SIGTERM with the same
files on restart, logs, overload. Every wait is on a condition with a timeout."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import routing as r
from routing.remoting import (
    CURRENT_VERSION,
    FrameDecoder,
    KVStore,
    NameServerHost,
    NameServerProcessor,
    RegisterBrokerBody,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    body_crc32,
    decode_kv_table,
    decode_route,
    encode,
    serve,
)
from test_remoting_server import TIMEOUT_S, Client, register, registration_fields, run


def test_processor_scan_and_channel_close_carry_removal_notices() -> None:
    clock = r.ManualClock(start_ms=0)
    proc: NameServerProcessor | None = None

    def forward(event: r.RouteChange) -> None:
        assert proc is not None
        proc.on_route_change(event)

    manager = r.RouteInfoManager(clock=clock, listener=forward,
                                 config=r.RoutingConfig(notify_min_broker_id_changed=True))
    proc = NameServerProcessor(manager)
    for i, channel in enumerate(("box", "box", "own")):
        manager.register(r.Registration(cluster="c", broker_name="a", broker_id=i,
                                        broker_addr=f"h:{i + 1}", enable_acting_master=True,
                                        channel=channel))
    out = proc.channel_closed("box")
    assert len(out.removed) == 2
    (note,) = out.notifications
    assert note.addr == "h:3" and note.command.code == RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE
    assert note.command.ext_fields["minBrokerId"] == "2"
    assert note.command.ext_fields["offlineBrokerAddr"] == "h:2"
    clock.advance(120_001)
    out = proc.scan()
    assert [e.broker_addr for e in out.removed] == ["h:3"] and out.notifications == ()


def test_serve_sends_the_notice_of_a_closed_connection_to_the_remaining_member() -> None:
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
        stop = asyncio.Event()
        listening: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(serve(
            "127.0.0.1", 0, config=r.RoutingConfig(notify_min_broker_id_changed=True),
            stop_event=stop, install_signal_handlers=False, on_listening=listening.set_result))
        async with listener:
            address = await asyncio.wait_for(listening, TIMEOUT_S)
            master, slave = await Client.connect(address), await Client.connect(address)
            await register(master, "broker-a", "127.0.0.1:10911", "T1", "T2",
                           enableActingMaster="true")
            await register(slave, "broker-a", slave_addr, "T1", "T2", broker_id=1,
                           enableActingMaster="true")
            master.close()
            note = await asyncio.wait_for(received.get(), TIMEOUT_S)
            assert note.code == RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE and note.is_oneway
            assert note.ext_fields["minBrokerAddr"] == slave_addr
            assert note.ext_fields["offlineBrokerAddr"] == "127.0.0.1:10911"
            slave.close()
            stop.set()
            await asyncio.wait_for(task, TIMEOUT_S)

    run(scenario)


# --------------------------------------------------------------------------- graceful stop


class _SlowKV(KVStore):
    """A KV store whose put blocks until the test releases it (an in-flight request)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path=path)
        self.entered, self.release = threading.Event(), threading.Event()

    def put(self, namespace: str, key: str, value: str) -> None:
        self.entered.set()
        assert self.release.wait(TIMEOUT_S)
        super().put(namespace, key, value)


def test_close_answers_requests_already_read_then_closes(tmp_path: Path) -> None:
    async def scenario() -> None:
        kv = _SlowKV(tmp_path / "kvConfig.json")
        host = NameServerHost(NameServerProcessor(r.RouteInfoManager(), kv=kv),
                              host="127.0.0.1", port=0)
        await host.start()
        client = await Client.connect(host.address)
        # two pipelined requests: a PUT that will be in flight, a GET queued behind it
        client.writer.write(encode(RemotingCommand(
            code=RequestCode.PUT_KV_CONFIG, opaque=1,
            ext_fields={"namespace": "ns", "key": "k", "value": "v"})) + encode(
            RemotingCommand(code=RequestCode.GET_KV_CONFIG, opaque=2,
                            ext_fields={"namespace": "ns", "key": "k"})))
        await asyncio.to_thread(kv.entered.wait, TIMEOUT_S)
        closing = asyncio.create_task(host.close())
        await asyncio.sleep(0)  # close() has stopped reading and waits for the queues
        assert not closing.done()
        kv.release.set()
        await asyncio.wait_for(closing, TIMEOUT_S)
        responses: list[RemotingCommand] = []
        while data := await client.reader.read(65536):
            responses += client.decoder.feed(data)
        assert [(c.opaque, c.code) for c in responses] == [(1, ResponseCode.SUCCESS),
                                                           (2, ResponseCode.SUCCESS)]
        assert responses[1].ext_fields["value"] == "v"
        assert json.loads((tmp_path / "kvConfig.json").read_text()) == {
            "configTable": {"ns": {"k": "v"}}}

    run(scenario)


def _start_serve(args: list[str]) -> tuple[subprocess.Popen[str], int, list[dict[str, Any]]]:
    command = [sys.executable, "-c", "from routing.cli import main; main()", "serve",
               "--listen", "127.0.0.1:0", "--log-json", *args]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stderr is not None
    events: list[dict[str, Any]] = []
    while not events or events[-1].get("event") != "listening":
        line = proc.stderr.readline()
        if not line:
            proc.wait(timeout=TIMEOUT_S)
            raise AssertionError(f"server exited early: {proc.returncode}")
        events.append(json.loads(line))
    return proc, int(events[-1]["port"]), events


def _stop(proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=TIMEOUT_S) == 0
    assert proc.stderr is not None
    return [json.loads(line) for line in proc.stderr.read().splitlines()]


def test_sigterm_then_restart_with_the_same_files(tmp_path: Path) -> None:
    config, kv_path = tmp_path / "namesrv.properties", tmp_path / "kvConfig.json"
    config.write_text("orderMessageEnable=true\nscanNotActiveBrokerInterval=200\n"
                      f"kvConfigPath={kv_path}\nserverWorkerThreads=4\n")
    proc, port, _ = _start_serve(["--config", str(config)])
    try:
        async def first_life() -> None:
            broker = await Client.connect(("127.0.0.1", port))
            assert (await register(broker, "broker-a", "127.0.0.1:10911", "T1", "T2")).code \
                == ResponseCode.SUCCESS
            admin = await Client.connect(("127.0.0.1", port))
            other = await Client.connect(("127.0.0.1", port))
            puts = [admin.call(RequestCode.PUT_KV_CONFIG, namespace="ORDER_TOPIC_CONFIG",
                               key="T1", value="broker-a:8"),
                    other.call(RequestCode.PUT_KV_CONFIG, namespace="ns", key="k", value="v")]
            for response in await asyncio.gather(*puts):
                assert response.code == ResponseCode.SUCCESS
            other.close()
            route = await admin.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T1")
            assert decode_route(route.body).order_topic_conf == "broker-a:8"
            update = await admin.call(RequestCode.UPDATE_NAMESRV_CONFIG,
                                      body=b"enableTopicList=false\n")
            assert update.code == ResponseCode.SUCCESS
            broker.close()
            admin.close()

        run(first_life)
        tail = _stop(proc)
        events = [e["event"] for e in tail]
        assert events[-3:] == ["shutting_down", "stopped", "kv_config_written"]
        assert json.loads(kv_path.read_text())["configTable"] == {
            "ORDER_TOPIC_CONFIG": {"T1": "broker-a:8"}, "ns": {"k": "v"}}

        proc, port, events = _start_serve(["--config", str(config)])
        loaded = [e for e in events if e.get("event") == "kv_config_loaded"]
        assert loaded and loaded[0]["namespaces"] == 2

        async def second_life() -> None:
            admin = await Client.connect(("127.0.0.1", port))
            got = await admin.call(RequestCode.GET_KV_CONFIG, namespace="ns", key="k")
            assert (got.code, got.ext_fields.get("value")) == (ResponseCode.SUCCESS, "v")
            settings = await admin.call(RequestCode.GET_NAMESRV_CONFIG)
            lines = settings.body.decode().splitlines()
            assert "orderMessageEnable=true" in lines and "serverWorkerThreads=4" in lines
            assert f"configStorePath={config}" in lines and f"kvConfigPath={kv_path}" in lines
            assert "enableTopicList=true" in lines  # 318 changes are not written back
            broker = await Client.connect(("127.0.0.1", port))
            ok = await register(broker, "broker-a", "127.0.0.1:10911", "T1", "T2")
            assert ok.code == ResponseCode.SUCCESS
            assert decode_kv_table(ok.body) == {"T1": "broker-a:8"}  # to the broker
            route = await admin.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T1")
            assert decode_route(route.body).order_topic_conf == "broker-a:8"
            broker.close()
            admin.close()

        run(second_life)
        _stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT_S)


# --------------------------------------------------------------------------- logs


def test_broker_events_are_logged_at_info_and_heartbeats_at_debug(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        host = NameServerHost(NameServerProcessor(r.RouteInfoManager()), host="127.0.0.1",
                              port=0)
        async with host:
            broker = await Client.connect(host.address)
            await register(broker, "broker-a", "127.0.0.1:10911", "T1", "T2")
            await register(broker, "broker-a", "127.0.0.1:10911", "T1", "T2")  # unchanged
            await broker.call(RequestCode.BROKER_HEARTBEAT,
                              **registration_fields("broker-a", "127.0.0.1:10911"))
            await register(broker, "broker-a", "127.0.0.1:10911", "T1", "T2", "T3")
            await broker.call(RequestCode.UNREGISTER_BROKER,
                              **registration_fields("broker-a", "127.0.0.1:10911"))
            await register(broker, "broker-a", "127.0.0.1:10911", "T1", "T2")  # first again
            await broker.call(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"enableTopicList=false")
            await broker.call(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/x")
            broker.close()

    with caplog.at_level(logging.DEBUG, logger="routing.remoting"):
        run(scenario)
    seen = [(rec.levelno, getattr(rec, "event", None)) for rec in caplog.records
            if getattr(rec, "event", "").startswith("broker_")]
    assert seen == [(logging.INFO, "broker_registered"), (logging.DEBUG, "broker_heartbeat"),
                    (logging.DEBUG, "broker_heartbeat"), (logging.INFO, "broker_changed"),
                    (logging.INFO, "broker_removed"), (logging.INFO, "broker_registered")]
    removed = next(rec for rec in caplog.records if getattr(rec, "event", "") ==
                   "broker_removed")
    assert removed.reason == "unregistered"  # type: ignore[attr-defined]
    assert removed.broker_addr == "127.0.0.1:10911"  # type: ignore[attr-defined]
    updates = [(rec.levelno, rec.response, rec.body) for rec in caplog.records  # type: ignore[attr-defined]
               if getattr(rec, "event", "") == "config_update"]
    assert updates == [(logging.INFO, 0, "enableTopicList=false"),
                       (logging.WARNING, 16, "kvConfigPath=/x")]


# --------------------------------------------------------------------------- overload


def test_registration_flood_gets_system_busy_while_route_reads_are_answered() -> None:
    flooders, per_flooder, capacity = 4, 400, 50

    async def scenario() -> None:
        manager = r.RouteInfoManager()
        host = NameServerHost(NameServerProcessor(manager), host="127.0.0.1", port=0,
                              default_queue_capacity=capacity)
        async with host:
            seed = await Client.connect(host.address)
            await register(seed, "broker-a", "127.0.0.1:10911", "T1", "T2")
            body = RegisterBrokerBody(
                data_version=r.DataVersion(counter=1, timestamp=1),
                topics={f"F{i}": r.TopicConfig(topic_name=f"F{i}") for i in range(50)}).encode()
            flood_started, flood_done = asyncio.Event(), asyncio.Event()
            codes: list[int] = []

            async def flood(n: int) -> None:
                client = await Client.connect(host.address)
                frames = [encode(RemotingCommand(
                    code=RequestCode.REGISTER_BROKER, opaque=i, version=CURRENT_VERSION,
                    body=body, ext_fields=registration_fields(
                        f"flood-{n}", f"127.0.0.{n + 2}:10911",
                        bodyCrc32=str(body_crc32(body)))))
                    for i in range(per_flooder)]
                client.writer.write(b"".join(frames))
                got: list[RemotingCommand] = []
                while len(got) < per_flooder:
                    data = await client.reader.read(65536)
                    assert data
                    got += client.decoder.feed(data)
                    flood_started.set()  # the server is answering the flood
                assert sorted(c.opaque for c in got) == list(range(per_flooder))  # one each
                codes.extend(c.code for c in got)
                client.close()

            async def read_routes() -> int:
                reader = await Client.connect(host.address)
                during = 0
                while not flood_done.is_set():
                    response = await reader.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T1")
                    assert response.code == ResponseCode.SUCCESS
                    # answered while the flood was being answered, not before or after it
                    during += flood_started.is_set() and not flood_done.is_set()
                reader.close()
                return during

            routes = asyncio.create_task(read_routes())
            await asyncio.gather(*(flood(n) for n in range(flooders)))
            flood_done.set()
            answered_during_flood = await routes
            seed.close()
            busy = codes.count(ResponseCode.SYSTEM_BUSY)
            assert busy > 0 and codes.count(ResponseCode.SUCCESS) > 0
            assert set(codes) == {ResponseCode.SUCCESS, ResponseCode.SYSTEM_BUSY}
            assert answered_during_flood > 0
            default = host.queues["default"]
            assert default.high_water <= capacity and default.rejected == busy

    run(scenario)


# --------------------------------------------------------------------------- metrics, loop


def test_metrics_endpoint_serves_prometheus_text() -> None:
    pytest.importorskip("prometheus_client")
    import urllib.request

    async def scenario() -> None:
        stop = asyncio.Event()
        listening: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(serve("127.0.0.1", 0, metrics=("127.0.0.1", 0),
                                         stop_event=stop, install_signal_handlers=False,
                                         on_listening=listening.set_result))
        address = await asyncio.wait_for(listening, TIMEOUT_S)
        broker = await Client.connect(address)
        await register(broker, "broker-a", "127.0.0.1:10911", "T1", "T2")
        await broker.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T1")
        await broker.call(RequestCode.UNREGISTER_BROKER,
                          **registration_fields("broker-a", "127.0.0.1:10911"))
        port = _metrics_port()
        text = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                           timeout=TIMEOUT_S).read().decode())
        assert 'routing_requests_total{code="103",response="0"} 1.0' in text
        assert 'routing_request_seconds_count{code="105"} 1.0' in text
        assert "routing_live_brokers 0.0" in text and "routing_connections 1.0" in text
        assert 'routing_brokers_removed_total{reason="unregistered"} 1.0' in text
        assert 'routing_queue_length{class="client"} 0.0' in text
        assert 'routing_system_busy_total{class="default"} 0.0' in text
        assert "routing_kv_writes_total 0.0" in text
        broker.close()
        stop.set()
        await asyncio.wait_for(task, TIMEOUT_S)

    _PORTS.clear()
    handler = _PortCatcher()
    logging.getLogger("routing.remoting").addHandler(handler)
    previous = logging.getLogger("routing.remoting").level
    logging.getLogger("routing.remoting").setLevel(logging.INFO)
    try:
        run(scenario)
    finally:
        logging.getLogger("routing.remoting").removeHandler(handler)
        logging.getLogger("routing.remoting").setLevel(previous)


_PORTS: list[int] = []


class _PortCatcher(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) == "metrics_listening":
            _PORTS.append(int(record.port))  # type: ignore[attr-defined]


def _metrics_port() -> int:
    assert _PORTS, "no metrics_listening event"
    return _PORTS[-1]


def test_serve_runs_on_uvloop_when_asked() -> None:
    pytest.importorskip("uvloop")
    proc, port, _ = _start_serve(["--loop", "uvloop"])
    try:
        async def ask() -> None:
            client = await Client.connect(("127.0.0.1", port))
            response = await client.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            assert response.code == ResponseCode.SUCCESS
            client.close()

        run(ask)
        _stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT_S)


def test_serve_runs_on_uvloop_by_default_when_installed_and_asyncio_when_asked() -> None:
    """``--loop auto`` (the default) is uvloop when it can be imported, else asyncio; the
    listening event says which loop serves."""
    try:
        import uvloop  # noqa: F401
        default = "uvloop"
    except ImportError:
        default = "asyncio"
    for args, expected in (([], default), (["--loop", "asyncio"], "asyncio")):
        proc, _, events = _start_serve(args)
        try:
            assert events[-1]["loop"] == expected, args
            _stop(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=TIMEOUT_S)


def test_optional_extras_are_imported_only_when_asked() -> None:
    code = ("import sys, routing.remoting, routing.cli._serve\n"
            "print(sorted({'prometheus_client', 'uvloop'} & set(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_host_follows_its_settings_changed_by_update_namesrv_config() -> None:
    proc = NameServerProcessor(r.RouteInfoManager())
    host = NameServerHost(proc, port=0, scan_interval_ms=5, default_queue_capacity=3)
    keys = ("scanNotActiveBrokerInterval", "clientRequestThreadPoolQueueCapacity",
            "defaultThreadPoolQueueCapacity", "serverChannelMaxIdleTimeSeconds")
    seen = tuple(proc.settings.get(k) for k in keys)
    assert host._follow_settings(seen) == seen  # nothing changed: the constructor's values
    assert (host.scan_interval_ms, host.queues["default"].capacity) == (5, 3)
    proc.update_config([("defaultThreadPoolQueueCapacity", "7"),
                        ("clientRequestThreadPoolQueueCapacity", "9"),
                        ("serverChannelMaxIdleTimeSeconds", "0"),
                        ("scanNotActiveBrokerInterval", "250")])
    host._follow_settings(seen)
    assert host.queues["default"].capacity == 7 and host.queues["client"].capacity == 9
    assert host.idle_timeout_ms is None and host.scan_interval_ms == 250
