"""`BrokerHost` and a name server it cannot reach: retried with exponential backoff (200 ms
doubling to 10 s, docs/heartbeat.md), and still unregistered from on stop when it came back
during a backoff.

The backoff test runs on an event loop whose clock is virtual: when nothing is ready, time
jumps to the next timer instead of waiting, so 60 s of retries take milliseconds and every
instant is exact. Connections are refused by a stand-in for ``asyncio.open_connection``
(no socket: nothing happens outside the loop's timers)."""

from __future__ import annotations

import asyncio
import itertools
import selectors
from typing import Any

import pytest

import routing as r
from routing.heartbeat import BrokerConfig, BrokerHeartbeat
from routing.remoting import BrokerHost, NameServerHost, NameServerProcessor
from test_broker_host import TIMEOUT_S, free_port, heartbeat, until


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose `time` moves only when nothing is ready: a wait for the next
    timer returns at once, its length added to the clock. Only for code whose every wait
    is a timer or a future of the loop itself (no sockets, no threads)."""

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0
        real: Any = self._selector.select  # type: ignore[attr-defined]

        def select(timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            events: list[tuple[selectors.SelectorKey, int]] = real(0)
            if not events and timeout is not None and timeout > 0:
                self._now += timeout
            elif not events and timeout is None:
                raise AssertionError("the loop would wait forever: nothing is scheduled")
            return events

        self._selector.select = select  # type: ignore[attr-defined]

    def time(self) -> float:
        return self._now


class LoopClock:
    """The heartbeat's clock read from the loop's (virtual) time, in ms."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def now_ms(self) -> int:
        return int(self.loop.time() * 1000)


def test_an_unreachable_name_server_is_retried_at_200_ms_doubling_to_10_s(
        monkeypatch: pytest.MonkeyPatch) -> None:
    loop = VirtualTimeLoop()
    attempts: list[float] = []
    enough = asyncio.Event()

    async def refuse(host: str, port: int, **_kw: Any) -> Any:
        attempts.append(loop.time())
        if len(attempts) == 12:
            enough.set()
        raise ConnectionRefusedError(111, f"Connect call failed ({host!r}, {port})")

    monkeypatch.setattr(asyncio, "open_connection", refuse)

    async def scenario() -> None:
        config = BrokerConfig(cluster="c", broker_name="broker-a", broker_id=0,
                              broker_addr="127.0.0.1:10911", name_servers=("127.0.0.1:1",),
                              scan_available_name_servers=True, connect_timeout_ms=3_000)
        hb = BrokerHeartbeat(config, clock=LoopClock(loop),
                             topics=[r.TopicConfig(topic_name=t) for t in ("T1", "T2")])
        host = BrokerHost(hb)
        await host.start()
        await enough.wait()
        assert loop.time() < 100  # (virtual seconds)
        await host.shutdown()

    async def bounded() -> None:
        # (virtual seconds: a shutdown that never returns fails here instead of hanging;
        # before, 3.11's wait_for in the driver could swallow shutdown's cancel)
        async with asyncio.timeout(600):
            await scenario()

    try:
        loop.run_until_complete(bounded())
    finally:
        loop.close()
    gaps = [round(b - a, 6) for a, b in itertools.pairwise(attempts[:11])]
    # every 3 s connect scan falls inside a backoff: it adds no attempt
    assert gaps == [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0, 10.0, 10.0]
    assert attempts[0] == 0.0


def test_stop_unregisters_from_a_name_server_back_during_its_backoff() -> None:
    """The name server went away, a connect failed (the next try is a minute away), and it
    came back: `shutdown` does not wait for the backoff, it connects and unregisters."""
    async def scenario() -> None:
        port = free_port()
        ns = f"127.0.0.1:{port}"
        first = NameServerHost(NameServerProcessor(r.RouteInfoManager()), host="127.0.0.1",
                               port=port)
        await first.start()
        hb = heartbeat((ns,), connect_timeout_ms=100)  # a scan every 100 ms
        host = BrokerHost(hb, backoff_initial_ms=60_000, backoff_max_ms=60_000)
        await host.start()
        await until(lambda: first.processor.manager.pickup_route("T1") is not None,
                    "the registration")
        await first.close()
        link = host._links[ns]
        await until(lambda: not link.up, "the connection to drop")
        loop = asyncio.get_running_loop()  # a scan's connect fails: the backoff starts
        await until(lambda: link.next_attempt_s > loop.time() + 30, "a failed connect")
        manager = r.RouteInfoManager()
        second = NameServerHost(NameServerProcessor(manager), host="127.0.0.1", port=port)
        await second.start()
        manager.register(r.Registration(
            cluster="c", broker_name="broker-a", broker_id=0, broker_addr=hb.config.broker_addr,
            topics={t: r.TopicConfig(topic_name=t) for t in ("T1", "T2")}))
        assert not link.up and link.next_attempt_s > loop.time() + 30  # still backing off
        await host.shutdown()
        assert manager.pickup_route("T1") is None and not manager.live_brokers()
        await second.close()

    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))
