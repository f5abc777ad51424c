"""A connection's repeated BROKER_HEARTBEAT answered from memory (`nameserver/_memo.py`):
the same bytes written, the same liveness refreshes and the same errors as the ordinary
path (decode, process, encode) — on fixed adversarial frames and on random sequences
(hypothesis), in both header forms; and the cases where the memory must not be used."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from routing.remoting import (
    CURRENT_VERSION,
    NameServerHost,
    NameServerProcessor,
    RegisterBrokerBody,
    RemotingCommand,
    RequestCode,
    SerializeType,
    body_crc32,
    decode,
    encode,
)
from routing.remoting.nameserver._memo import FrameMemo, heartbeat_proof, learn
from routing.remoting.nameserver._shadow import ShadowProcessor

_EXT = {"brokerName": "broker-a", "brokerAddr": "10.0.0.1:10911",
        "clusterName": "C", "brokerId": "0"}
_PREFIX = struct.Struct(">ii")


class Recording:
    """A manager that records every heartbeat (and can be told to fail them)."""

    def __init__(self) -> None:
        self.manager = r.RouteInfoManager(clock=r.ManualClock(start_ms=0))
        self.beats: list[tuple[str, str]] = []
        self.fail: Exception | None = None

    def heartbeat(self, *, cluster: str, broker_addr: str) -> bool:
        self.beats.append((cluster, broker_addr))
        if self.fail is not None:
            raise self.fail
        return self.manager.heartbeat(cluster=cluster, broker_addr=broker_addr)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.manager, name)


class Ordinary(NameServerProcessor):
    """The same processor with its own `process`: never answered from memory."""

    def process(self, request: RemotingCommand, channel: Any = None) -> Any:
        return super().process(request, channel)


class _Transport:
    """A socket's transport as the host sees it: keeps what is written; the flow-control
    and closing calls do nothing."""

    def __init__(self) -> None:
        self.written = bytearray()

    def write(self, data: bytes) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40_000) if name == "peername" else default

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None  # set_write_buffer_limits, pause_reading, ...


class Side:
    """One host with one connection, fed reads by hand (no socket)."""

    def __init__(self, processor_class: type[NameServerProcessor], **kwargs: Any) -> None:
        self.manager = Recording()
        self.processor = processor_class(self.manager, **kwargs)  # type: ignore[arg-type]
        self.host = NameServerHost(self.processor, port=0, scan_interval_ms=None)
        self.conn = self.host._connection()
        self.transport = _Transport()
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]
        self.processed = 0
        process = self.processor.process

        def counting(request: RemotingCommand, channel: Any = None) -> Any:
            self.processed += 1
            return process(request, channel)

        self.processor.process = counting  # type: ignore[method-assign]
        self.host._workers = [asyncio.create_task(self.host._worker(q))
                              for q in self.host.queues.values()]

    def read(self, data: bytes) -> bytes:
        """Feed one read; return what was written in answer at once."""
        before = len(self.transport.written)
        buffer = self.conn.get_buffer(len(data))
        buffer[:len(data)] = data
        self.conn.buffer_updated(len(data))
        return bytes(self.transport.written[before:])

    async def drain(self) -> None:
        """Let the queue workers answer what waits (the loop only: no socket)."""
        for _ in range(100):
            if not any(len(q) or q.busy for q in self.host.queues.values()):
                return
            await asyncio.sleep(0)
        raise AssertionError("the queues did not drain")

    def stop(self) -> None:
        for task in self.host._workers:
            task.cancel()


def _register(kind: SerializeType) -> bytes:
    body = RegisterBrokerBody(data_version=r.DataVersion(counter=1, timestamp=1)).encode()
    return encode(RemotingCommand(
        code=RequestCode.REGISTER_BROKER, opaque=1, version=CURRENT_VERSION, body=body,
        ext_fields={**_EXT, "haServerAddr": _EXT["brokerAddr"],
                    "bodyCrc32": str(body_crc32(body))}, serialize_type=kind))


def _beat(opaque: int, kind: SerializeType = SerializeType.JSON, flag: int = 0,
          ext: dict[str, str] | None = None) -> bytes:
    return encode(RemotingCommand(code=RequestCode.BROKER_HEARTBEAT, opaque=opaque, flag=flag,
                                  version=CURRENT_VERSION, ext_fields=_EXT if ext is None else ext,
                                  serialize_type=kind))


def _with_opaque(frame: bytes, digits: bytes) -> bytes:
    """A JSON frame with its opaque's digits replaced by ``digits`` (any bytes)."""
    header = frame[8:]
    start = header.index(b'"opaque":') + len(b'"opaque":')
    end = start
    while header[end:end + 1] not in (b",", b"}"):
        end += 1
    header = header[:start] + digits + header[end:]
    return _PREFIX.pack(4 + len(header), len(header)) + header


def _both(reads: list[bytes], kind: SerializeType = SerializeType.JSON,
          prepare: Callable[[Side], None] | None = None) -> tuple[Side, Side]:
    """The same reads through a host that may answer from memory and one that may not;
    asserts they wrote the same bytes and refreshed the same brokers, read by read."""
    async def scenario() -> tuple[Side, Side]:
        fast, slow = Side(NameServerProcessor), Side(Ordinary)
        for side in (fast, slow):
            side.read(_register(kind))
            if prepare is not None:
                prepare(side)
        for data in reads:
            if fast.conn.eof:
                break
            assert fast.read(data) == slow.read(data), data
            await fast.drain()
            await slow.drain()
            assert fast.transport.written == slow.transport.written
            assert fast.manager.beats == slow.manager.beats
            assert fast.conn.eof == slow.conn.eof
        fast.stop()
        slow.stop()
        return fast, slow

    return asyncio.run(scenario())


@pytest.mark.parametrize("kind", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_a_repeated_heartbeat_is_answered_from_memory_with_the_same_bytes(
        kind: SerializeType) -> None:
    reads = [_beat(opaque, kind) for opaque in range(100, 140)]
    fast, slow = _both(reads, kind)
    assert slow.processed == 1 + len(reads)
    assert fast.processed == 1 + 1  # the registration, then the first heartbeat only
    assert isinstance(fast.conn.memo, FrameMemo)
    answer = decode(fast.read(_beat(12_345, kind)))
    assert (answer.code, answer.opaque, answer.flag, answer.serialize_type) == (0, 12_345, 1, kind)
    assert len(fast.manager.beats) == len(reads) + 1


@pytest.mark.parametrize("kind", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_a_oneway_heartbeat_as_java_brokers_send_it_is_remembered_too(
        kind: SerializeType) -> None:
    reads = [_beat(opaque, kind, flag=2) for opaque in range(100, 120)]
    fast, slow = _both(reads, kind)
    assert fast.processed == 1 + 1 and slow.processed == 1 + len(reads)
    assert fast.read(_beat(5_000, kind, flag=2)) == b""  # no answer, as Java
    assert len(fast.manager.beats) == len(reads) + 1


def test_a_new_digit_count_goes_the_ordinary_way_once_then_is_remembered() -> None:
    reads = [_beat(opaque) for opaque in (7, 8, 9, 10, 11, 99, 100, 101, 2**31 - 1, 0, 1)]
    fast, _ = _both(reads)
    # learnt at 7, 10, 100, 2**31 - 1 and 0 (each time the number of digits changed)
    assert fast.processed == 1 + 5


@pytest.mark.parametrize("digits", [b"-0", b"-5", b"007", b"00", b"1e3", b"1.0", b"+1",
                                    b"2147483648", b"9999999999", b" 1", b"\xd9\xa1"])
def test_an_odd_opaque_in_the_remembered_place_gets_the_ordinary_answer(digits: bytes) -> None:
    first = _beat(1_000_000_000)
    odd = _with_opaque(first, digits)
    fast, _ = _both([first, odd, first])
    assert fast.processed >= 2


def test_a_changed_byte_outside_the_opaque_is_not_the_remembered_heartbeat() -> None:
    first = _beat(100)
    other = _beat(101, ext={**_EXT, "brokerAddr": "10.0.0.2:10911"})  # unknown broker
    missing = _beat(102, ext={k: v for k, v in _EXT.items() if k != "clusterName"})
    bad = _beat(103, ext={**_EXT, "clusterName": "C\x00"})  # another, unknown broker
    oneway = _beat(104, flag=2)
    reads = [first, _beat(105), other, _beat(106), missing, bad, oneway, _beat(107)]
    fast, slow = _both(reads)
    answers = {c.opaque: c for c in _decoded(bytes(fast.transport.written))}
    assert answers[101].code == 0  # Java answers SUCCESS for an unknown broker
    assert answers[102].code == 1 and "clusterName" in (answers[102].remark or "")
    assert answers[103].code == 0
    assert 104 not in answers
    assert [answers[o].code for o in (105, 106, 107)] == [0, 0, 0]
    assert fast.processed < slow.processed


def test_a_failing_manager_gets_the_ordinary_system_error() -> None:
    def failing_after_learning(side: Side) -> None:
        side.read(_beat(100))
        side.manager.fail = OSError("disk full")

    fast, _ = _both([_beat(101), _beat(102)], prepare=failing_after_learning)
    assert isinstance(fast.conn.memo, FrameMemo)
    answers = _decoded(bytes(fast.transport.written))[-2:]
    assert [(a.opaque, a.code, a.remark) for a in answers] == [
        (101, 1, "OSError: disk full"), (102, 1, "OSError: disk full")]
    assert fast.processed == 1 + 1


def test_while_heartbeats_wait_in_the_queue_they_keep_their_order() -> None:
    """A read of several frames goes through the queue; a remembered heartbeat read
    while the queue holds some is not answered ahead of them."""
    async def scenario() -> None:
        side = Side(NameServerProcessor)
        side.read(_register(SerializeType.JSON))
        side.read(_beat(100))
        assert isinstance(side.conn.memo, FrameMemo)
        assert side.read(_beat(101) + _beat(102)) == b""  # queued: the worker runs later
        assert side.read(_beat(103)) == b""  # waits behind them
        await side.drain()
        answers = [c.opaque for c in _decoded(bytes(side.transport.written))]
        assert answers[-3:] == [101, 102, 103]
        assert side.read(_beat(104)) != b""  # the queue is empty again: from memory
        side.stop()

    asyncio.run(scenario())


def _decoded(data: bytes) -> list[RemotingCommand]:
    from routing.remoting import FrameDecoder
    return FrameDecoder().feed(data)


def test_at_debug_every_heartbeat_goes_the_ordinary_way(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> Side:
        side = Side(NameServerProcessor)
        side.read(_register(SerializeType.JSON))
        side.read(_beat(100))
        with caplog.at_level(logging.DEBUG, logger="routing.remoting"):
            for opaque in (101, 102):
                assert decode(side.read(_beat(opaque))).opaque == opaque
        side.stop()
        return side

    side = asyncio.run(scenario())
    assert side.processed == 1 + 3
    assert sum("broker_request" in rec.getMessage() or "heartbeat" in rec.getMessage()
               for rec in caplog.records) >= 2


class Observed:
    """The host's metrics as far as requests go: every ``(code, response code)`` seen."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int | None]] = []

    def observe(self, code: int, response: int | None, seconds: float) -> None:
        assert seconds >= 0
        self.seen.append((code, response))


def test_metrics_count_remembered_heartbeats_as_ordinary_ones() -> None:
    def metered(side: Side) -> None:
        side.host.metrics = Observed()  # type: ignore[assignment]

    fast, slow = _both([_beat(o) for o in range(100, 110)], prepare=metered)
    assert fast.host.metrics.seen == slow.host.metrics.seen  # type: ignore[union-attr]
    assert fast.host.metrics.seen.count((904, 0)) == 10  # type: ignore[union-attr]
    assert fast.processed == 1 + 1


def test_which_processors_may_answer_from_memory() -> None:
    manager = r.RouteInfoManager()
    assert NameServerProcessor(manager).plain_heartbeats
    assert ShadowProcessor(manager).plain_heartbeats
    assert not Ordinary(manager).plain_heartbeats
    changed = NameServerProcessor(manager)
    changed._handlers[RequestCode.BROKER_HEARTBEAT] = lambda *a: None  # type: ignore[assignment,return-value]
    assert not changed.plain_heartbeats


def _learn(frame: bytes, request: RemotingCommand, answer: bytes | None) -> FrameMemo | None:
    """`learn` as the host calls it for a heartbeat (with its `heartbeat_proof`)."""
    proof = heartbeat_proof(request)
    return None if proof is None else learn(frame, request, answer, proof)


def test_what_cannot_be_remembered_exactly_is_not() -> None:
    request = RemotingCommand(code=RequestCode.BROKER_HEARTBEAT, opaque=5, ext_fields=_EXT,
                              version=CURRENT_VERSION)
    answer = encode(request.make_response(0))
    assert _learn(encode(request), request, answer) is not None
    escaped = RemotingCommand(code=RequestCode.BROKER_HEARTBEAT, opaque=5,
                              ext_fields={**_EXT, "brokerName": "a\"b"})
    assert _learn(encode(escaped), escaped, encode(escaped.make_response(0))) is None
    negative = RemotingCommand(code=RequestCode.BROKER_HEARTBEAT, opaque=-5, ext_fields=_EXT)
    assert _learn(encode(negative), negative, encode(negative.make_response(0))) is None
    no_name = RemotingCommand(code=RequestCode.BROKER_HEARTBEAT, opaque=5, flag=2,
                              ext_fields={k: v for k, v in _EXT.items() if k != "brokerName"})
    assert _learn(encode(no_name), no_name, None) is None  # its error was not written
    assert _learn(encode(request), request, None) is None  # answered, yet not oneway
    with_body = RemotingCommand(code=RequestCode.BROKER_HEARTBEAT, opaque=5, ext_fields=_EXT,
                                body=b"x")
    assert _learn(encode(with_body), with_body, encode(with_body.make_response(0))) is None
    binary_negative = RemotingCommand(code=RequestCode.BROKER_HEARTBEAT, opaque=-5,
                                      ext_fields=_EXT, serialize_type=SerializeType.ROCKETMQ)
    memo = _learn(encode(binary_negative), binary_negative,
                 encode(binary_negative.make_response(0)))
    assert memo is not None and memo.opaque(encode(binary_negative)) is not None


# mostly three digits (a broker counts up: the digit count seldom changes), and any int32
_OPAQUES = st.one_of(st.integers(100, 999), st.integers(100, 999), st.integers(100, 999),
                     st.integers(0, 2**31 - 1), st.integers(-(2**31), -1))
_BEAT = st.builds(lambda o: ("beat", o), _OPAQUES)
_READS = st.lists(st.one_of(
    _BEAT, _BEAT, _BEAT, _BEAT,
    st.builds(lambda o, d: ("odd", o, d), _OPAQUES,
              st.one_of(st.from_regex(rb"\A-?[0-9]{1,11}\Z"),
                        st.binary(min_size=1, max_size=11))),
    st.builds(lambda o, f: ("flag", o, f), _OPAQUES, st.sampled_from([1, 2, 3])),
    st.builds(lambda o, a: ("other", o, a), _OPAQUES,
              st.sampled_from(["10.0.0.1:10911", "10.0.0.2:10911", "bad addr", ""])),
    st.builds(lambda o, n: ("twice", o, n), _OPAQUES, _OPAQUES),
), min_size=1, max_size=25)


def _read_of(op: tuple[Any, ...], kind: SerializeType) -> bytes:
    if op[0] == "beat":
        return _beat(op[1], kind)
    if op[0] == "odd":
        frame = _beat(op[1], kind)
        if kind is SerializeType.JSON:
            return _with_opaque(frame, op[2])
        return frame[:13] + (op[2] * 4)[:4] + frame[17:]
    if op[0] == "flag":
        return _beat(op[1], kind, flag=op[2])
    if op[0] == "other":
        return _beat(op[1], kind, ext={**_EXT, "brokerAddr": op[2]})
    return _beat(op[1], kind) + _beat(op[2], kind)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(_READS, st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]))
def test_any_sequence_of_heartbeat_reads_answers_as_the_ordinary_path(
        ops: list[tuple[Any, ...]], kind: SerializeType) -> None:
    """Whatever a connection sends — its heartbeat with any opaque, any bytes in the
    opaque's place, other flags, other brokers, two frames in one read — the host that
    answers from memory writes what the ordinary host writes, refreshes the same brokers
    and closes the connection as it does."""
    _both([_read_of(op, kind) for op in ops], kind)
