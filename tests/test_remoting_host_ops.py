"""`routing serve` as operators run it: removal notices sent, graceful SIGTERM with the same
files on restart, logs, overload. Every wait is on a condition with a timeout."""

from __future__ import annotations

import asyncio

import routing as r
from routing.remoting import (
    FrameDecoder,
    NameServerProcessor,
    RemotingCommand,
    RequestCode,
    serve,
)
from test_remoting_server import TIMEOUT_S, Client, register, run


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
