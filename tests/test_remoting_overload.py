"""`NameServerHost` under overload (issue 27): every connection keeps being read and
answered, fairly, while far more registrations are in flight than its queue holds.

The host's connections are driven directly (a fake transport per connection, frames handed
to the protocol as the event loop would), in rounds: each round every connection's new
frames are read, then the loop runs once, as one iteration of a real event loop reads each
ready socket once and lets the workers take a turn. No sockets, no clocks, no sleeps: the
same rounds give the same answers every run. Each connection is a broker keeping
``IN_FLIGHT`` unchanged registrations outstanding (a new one for every answer).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import routing as r
from routing.remoting import (
    CURRENT_VERSION,
    FrameDecoder,
    NameServerHost,
    NameServerProcessor,
    RegisterBrokerBody,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    body_crc32,
    encode,
)

CONNECTIONS, IN_FLIGHT, CAPACITY, ROUNDS = 8, 64, 256, 40


class FakeTransport(asyncio.Transport):
    """Collects what the host writes; closing tells the protocol the connection is gone."""

    def __init__(self, protocol: Any, n: int) -> None:
        super().__init__()
        self.protocol, self.n, self.written = protocol, n, bytearray()
        self.reading, self.closing = True, False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("10.0.0.1", 40_000 + self.n) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: Any) -> None:
        self.written += data

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def abort(self) -> None:
        self.close()


class Broker:
    """One connection of the flood: its frames, its answers by round."""

    def __init__(self, host: NameServerHost, n: int) -> None:
        self.protocol = host._connection()
        self.transport = FakeTransport(self.protocol, n)
        self.protocol.connection_made(self.transport)
        body = RegisterBrokerBody(data_version=r.DataVersion(counter=1, timestamp=1),
                                  topics={f"T{i}": r.TopicConfig(topic_name=f"T{i}")
                                          for i in range(5)}).encode()
        addr = f"10.0.1.{n}:10911"
        self.frame = encode(RemotingCommand(
            code=RequestCode.REGISTER_BROKER, version=CURRENT_VERSION, body=body,
            ext_fields={"brokerName": f"broker-{n}", "brokerAddr": addr,
                        "clusterName": "flood", "haServerAddr": addr, "brokerId": "0",
                        "bodyCrc32": str(body_crc32(body))}))
        self.decoder = FrameDecoder()
        self.sent = self.answered = self.read_at = 0
        self.codes: dict[int, int] = {}
        self.last_answer_round = 0
        self.longest_silence = 0  # rounds with requests outstanding and no answer

    def send(self) -> int:
        """Read the frames this broker has sent since the last round (as the loop would):
        enough to have ``IN_FLIGHT`` outstanding again. Returns how many."""
        count = IN_FLIGHT - (self.sent - self.answered)
        data = self.frame * count
        buffer = self.protocol.get_buffer(len(data))
        assert len(buffer) >= len(data)
        buffer[:len(data)] = data
        self.protocol.buffer_updated(len(data))
        self.sent += count
        return count

    def collect(self, round_: int) -> int:
        """The answers written since the last call; tracks the longest silence."""
        got = self.decoder.feed(bytes(self.transport.written[self.read_at:]))
        self.read_at = len(self.transport.written)
        for answer in got:
            self.codes[answer.code] = self.codes.get(answer.code, 0) + 1
        self.answered += len(got)
        if got:
            self.last_answer_round = round_
        elif self.sent > self.answered:
            self.longest_silence = max(self.longest_silence, round_ - self.last_answer_round)
        return len(got)


def _flood() -> list[Broker]:
    async def scenario() -> list[Broker]:
        host = NameServerHost(NameServerProcessor(r.RouteInfoManager(), renew_unchanged=True),
                              host="127.0.0.1", port=0, default_queue_capacity=CAPACITY,
                              scan_interval_ms=3_600_000)
        async with host:
            brokers = [Broker(host, n) for n in range(CONNECTIONS)]
            for round_ in range(1, ROUNDS + 1):
                for broker in brokers:
                    broker.send()
                    # SYSTEM_BUSY is written while the frames are read, before any turn
                    busy_now = broker.collect(round_)
                    assert broker.codes.get(ResponseCode.SYSTEM_BUSY, 0) >= busy_now
                await asyncio.sleep(0)  # one loop iteration: the workers take a turn
                for broker in brokers:
                    broker.collect(round_)
            for broker in brokers:
                assert broker.transport.reading  # never paused: always read
        return brokers

    return asyncio.run(scenario())


@pytest.fixture(scope="module")
def flooded() -> list[Broker]:
    return _flood()


def test_every_connection_is_answered_every_round_of_the_flood(flooded: list[Broker]) -> None:
    silences = [b.longest_silence for b in flooded]
    assert max(silences) <= 1, silences
    for broker in flooded:
        assert broker.answered >= (ROUNDS - 2) * IN_FLIGHT // 2


def test_the_queue_is_shared_fairly_between_the_connections(flooded: list[Broker]) -> None:
    served = [b.codes.get(ResponseCode.SUCCESS, 0) for b in flooded]
    assert min(served) > 0, served
    assert max(served) <= 2 * min(served), served
    assert set().union(*(b.codes for b in flooded)) <= {ResponseCode.SUCCESS,
                                                         ResponseCode.SYSTEM_BUSY}


def test_the_flood_is_the_same_every_run(flooded: list[Broker]) -> None:
    again = _flood()
    assert [b.codes for b in again] == [b.codes for b in flooded]
    assert [b.longest_silence for b in again] == [b.longest_silence for b in flooded]


# --------------------------------------------------------------------------- the queue itself


def _job(conn: str, opaque: int, code: int = RequestCode.REGISTER_BROKER) -> Any:
    from routing.remoting.nameserver._admission import Job

    return Job(conn, RemotingCommand(code=code, opaque=opaque))


def test_connections_take_turns_and_each_keeps_its_order() -> None:
    from routing.remoting.nameserver._admission import ClassQueue

    queue = ClassQueue("default", capacity=100, max_bytes=1 << 20)
    for opaque in range(3):
        assert queue.offer(_job("a", opaque))
    assert queue.offer(_job("b", 10))
    assert queue.offer(_job("c", 20)) and queue.offer(_job("c", 21))
    order = []
    while (job := queue.take_nowait()) is not None:
        order.append((job.conn, job.command.opaque))
    assert order == [("a", 0), ("b", 10), ("c", 20), ("a", 1), ("c", 21), ("a", 2)]
    assert len(queue) == 0 and queue.queued_bytes == 0


def test_a_connection_alone_may_fill_the_queue_but_not_beyond_its_share() -> None:
    from routing.remoting.nameserver._admission import MIN_TURN, ClassQueue

    queue = ClassQueue("default", capacity=8, max_bytes=1 << 20)
    assert [queue.offer(_job("a", i)) for i in range(9)] == [True] * 8 + [False]
    assert queue.turn() == max(MIN_TURN, 9)
    while queue.take_nowait() is not None:
        pass
    # two connections send now: each may hold half
    admitted = [queue.offer(_job(conn, i)) for i in range(6) for conn in ("a", "b")]
    assert admitted.count(True) == 8 and queue.rejected == 1 + 4
    held = {"a": 0, "b": 0}
    while (job := queue.take_nowait()) is not None:
        held[job.conn] += 1
    assert held == {"a": 4, "b": 4}
    assert queue.turn() == max(MIN_TURN, 12)  # as many as arrived since the last turn
    # two connections sent in the last turn: c alone now still gets half until the next
    assert [queue.offer(_job("c", i)) for i in range(5)] == [True] * 4 + [False]


def test_a_run_of_kv_writes_is_taken_together_in_turn_order() -> None:
    from routing.remoting.nameserver._admission import ClassQueue

    put = RequestCode.PUT_KV_CONFIG
    queue = ClassQueue("default", capacity=100, max_bytes=1 << 20)
    for conn, opaque, code in (("a", 1, put), ("b", 2, put),
                               ("a", 3, RequestCode.REGISTER_BROKER), ("c", 4, put)):
        queue.offer(_job(conn, opaque, code))
    first = queue.take_nowait()
    assert first is not None and first.command.opaque == 1
    run = queue.take_while(frozenset({put}))
    assert [j.command.opaque for j in run] == [2, 4]  # then a's registration is next
    rest = queue.take_nowait()
    assert rest is not None and rest.command.opaque == 3


def test_a_lone_request_is_answered_as_it_is_read_and_a_batch_waits_its_turn() -> None:
    """A read that brings one request, with nothing of its class queued, is answered in
    the read itself (no worker turn); a read of several, and any request while some wait,
    is queued and answered in the worker's turn, in arrival order."""

    def heartbeat(opaque: int, n: int = 0) -> bytes:
        return encode(RemotingCommand(code=RequestCode.BROKER_HEARTBEAT, opaque=opaque,
                                      version=CURRENT_VERSION,
                                      ext_fields={"brokerName": f"b{n}", "clusterName": "c",
                                                  "brokerAddr": f"10.0.0.{n}:10911"}))

    async def scenario() -> None:
        host = NameServerHost(NameServerProcessor(r.RouteInfoManager()), host="127.0.0.1",
                              port=0, scan_interval_ms=3_600_000)
        async with host:
            one, two = Broker(host, 1), Broker(host, 2)
            for broker in (one, two):
                broker.frame = b""  # reads are what each step hands over
            answers = FrameDecoder()

            def read(broker: Broker, data: bytes) -> None:
                buffer = broker.protocol.get_buffer(len(data))
                buffer[:len(data)] = data
                broker.protocol.buffer_updated(len(data))

            def opaques(broker: Broker) -> list[int]:
                got = answers.feed(bytes(broker.transport.written[broker.read_at:]))
                broker.read_at = len(broker.transport.written)
                return [c.opaque for c in got]

            read(one, heartbeat(1))
            assert opaques(one) == [1]  # answered while read
            read(one, heartbeat(2) + heartbeat(3))
            read(two, heartbeat(4, 2))  # alone, but requests of its class wait
            assert opaques(one) == [] and opaques(two) == []
            await asyncio.sleep(0)  # the worker's turn
            assert opaques(one) == [2, 3] and opaques(two) == [4]
            read(two, heartbeat(5, 2))
            assert opaques(two) == [5]
            assert len(host.queues["default"]) == 0

    asyncio.run(scenario())
