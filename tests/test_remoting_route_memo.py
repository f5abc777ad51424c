"""A connection's repeated GET_ROUTEINFO_BY_TOPIC answered from memory
(`nameserver/_memo.py`, ``NameServerProcessor.route_current``): every read through a host
that may answer from memory and through one that may not writes the same bytes, while the
route changes between reads (registration, unregistration, expiry, topic deletion, the
order-topic KV config and its switch), in both header forms and both JSON dialects, with
and without a client zone; scripted and as seeded hypothesis sequences."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from routing.remoting import (
    CURRENT_VERSION,
    FrameDecoder,
    NameServerProcessor,
    RegisterBrokerBody,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    body_crc32,
    decode,
    encode,
)
from routing.remoting.nameserver._memo import FrameMemo
from routing.remoting.nameserver._shadow import ShadowProcessor
from test_remoting_beat_memo import Observed, Ordinary, Side

_BROKERS = {"a": ("broker-a", "10.0.0.1:10911", "z1"), "b": ("broker-b", "10.0.0.2:10911", "z2")}
_TOPICS = ("T1", "T2", "T3")
_OLD_VERSION = 317  # below V4_9_4: Java's own JSON dialect unless acceptStandardJsonOnly
_TIMEOUT_MS = 120_000


def _command(code: int, ext: dict[str, str], body: bytes = b"", opaque: int = 1,
             version: int = CURRENT_VERSION,
             kind: SerializeType = SerializeType.JSON) -> RemotingCommand:
    return RemotingCommand(code=code, opaque=opaque, version=version, ext_fields=ext,
                           body=body, serialize_type=kind)


def _read(topic: str, opaque: int, dialect: int = 0,
          kind: SerializeType = SerializeType.JSON) -> bytes:
    """A route read's frame; ``dialect`` 0: current client, 1: an old one, 2: an old one
    asking for standard JSON, 3: with a client zone (z1, zone mode on)."""
    ext = {"topic": topic}
    if dialect == 2:
        ext["acceptStandardJsonOnly"] = "true"
    if dialect == 3:
        ext.update({"__ZONE_NAME": "z1", "__ZONE_MODE": "true"})
    return encode(_command(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext, opaque=opaque,
                           version=_OLD_VERSION if dialect in (1, 2) else CURRENT_VERSION,
                           kind=kind))


def _change(side: Side, op: tuple[Any, ...]) -> None:
    """Apply one route change to ``side`` beside the connection (the brokers' own channel)."""
    name, args = op[0], op[1:]
    proc = side.processor
    process = type(proc).process  # (not the counted one: only reads are counted)
    if name == "register":
        broker, topics, version = args
        broker_name, addr, zone = _BROKERS[broker]
        body = RegisterBrokerBody(
            data_version=r.DataVersion(counter=version, timestamp=version),
            topics={t: r.TopicConfig(topic_name=t, read_queue_nums=version % 7 + 1)
                    for t in topics}).encode()
        process(proc, _command(RequestCode.REGISTER_BROKER, {
            "brokerName": broker_name, "brokerAddr": addr, "clusterName": "C",
            "brokerId": "0", "haServerAddr": addr, "__ZONE_NAME": zone,
            "bodyCrc32": str(body_crc32(body))}, body), f"broker-{broker}")
    elif name == "unregister":
        broker_name, addr, _ = _BROKERS[args[0]]
        process(proc, _command(RequestCode.UNREGISTER_BROKER, {
            "brokerName": broker_name, "brokerAddr": addr, "clusterName": "C",
            "brokerId": "0"}), f"broker-{args[0]}")
    elif name == "expire":
        side.manager.manager.clock.advance(_TIMEOUT_MS + 1)
        proc.scan()
    elif name == "delete":
        process(proc, _command(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": args[0]}), None)
    elif name == "kv":
        topic, value = args
        process(proc, _command(RequestCode.PUT_KV_CONFIG, {
            "namespace": "ORDER_TOPIC_CONFIG", "key": topic, "value": value}), None)
    elif name == "order":
        proc.update_config([("orderMessageEnable", "true" if args[0] else "false")])
    else:  # pragma: no cover
        raise AssertionError(name)


def _run(steps: list[tuple[Any, ...]], kind: SerializeType = SerializeType.JSON,
         fast_class: type[NameServerProcessor] = NameServerProcessor,
         slow_class: type[NameServerProcessor] = Ordinary) -> tuple[Side, Side]:
    """Each step through a host that may answer from memory and one that may not: the
    same bytes written for every read, and the same routes afterwards."""
    async def scenario() -> tuple[Side, Side]:
        fast, slow = Side(fast_class), Side(slow_class)
        for step in steps:
            if step[0] == "read":
                data = _read(*step[1:], kind=kind)  # type: ignore[misc]
                assert fast.read(data) == slow.read(data), step
                await fast.drain()
                await slow.drain()
                assert fast.transport.written == slow.transport.written
            else:
                for side in (fast, slow):
                    _change(side, step)
        for topic in _TOPICS:
            assert fast.manager.stored_route(topic) == slow.manager.stored_route(topic)
        fast.stop()
        slow.stop()
        return fast, slow

    return asyncio.run(scenario())


# (a first registration of one topic only would be taken for an incremental one, refused)
_SETUP = [("register", "a", ("T1", "T2"), 1), ("register", "b", ("T1", "T3"), 1)]


@pytest.mark.parametrize("kind", [SerializeType.JSON, SerializeType.ROCKETMQ])
@pytest.mark.parametrize("dialect", [0, 1, 2, 3])
def test_a_repeated_route_read_is_answered_from_memory_with_the_same_bytes(
        kind: SerializeType, dialect: int) -> None:
    reads = [("read", "T2", opaque, dialect) for opaque in range(100, 140)]
    fast, slow = _run(_SETUP + reads, kind)
    assert slow.processed == len(reads)
    assert fast.processed == 1  # the first read only
    assert isinstance(fast.conn.memo, FrameMemo)
    answer = decode(fast.read(_read("T2", 12_345, dialect, kind)))
    assert (answer.code, answer.opaque, answer.serialize_type) == (0, 12_345, kind)
    assert answer.body and b"broker-a" in answer.body


def test_a_route_the_client_zone_filters_is_never_answered_from_memory() -> None:
    reads = [("read", "T1", opaque, 3) for opaque in range(100, 105)]  # drops broker-b
    fast, slow = _run(_SETUP + reads)
    assert fast.processed == slow.processed == len(reads)
    assert b"broker-b" not in bytes(fast.transport.written)


@pytest.mark.parametrize("change", [
    ("register", "a", ("T1", "T2"), 2),       # a new data version: new queue counts
    ("register", "b", ("T1", "T3"), 2),
    ("unregister", "a"),
    ("unregister", "b"),
    ("expire",),
    ("delete", "T1"),
    ("kv", "T1", "broker-a:4"),              # order messages off: no effect on the answer
    ("order", True),
])
def test_every_route_change_between_repeated_reads_is_seen(change: tuple[Any, ...]) -> None:
    reads = [("read", "T1", opaque, 0) for opaque in range(100, 104)]
    more = [("read", "T1", opaque, 0) for opaque in range(200, 204)]
    fast, slow = _run([*_SETUP, ("kv", "T1", "broker-a:8"), *reads, change, *more])
    assert fast.processed < slow.processed


def test_after_a_route_change_the_new_answer_is_remembered_in_its_turn() -> None:
    reads = [("read", "T1", opaque, 0) for opaque in range(100, 104)]
    more = [("read", "T1", opaque, 0) for opaque in range(200, 204)]
    fast, slow = _run([*_SETUP, *reads, ("register", "a", ("T1", "T2"), 2), *more])
    assert fast.processed == 2 and slow.processed == len(reads) + len(more)
    assert b'"readQueueNums":3' in bytes(fast.transport.written)  # (2 % 7 + 1 queues)


def test_a_missing_topic_is_never_answered_from_memory() -> None:
    reads = [("read", "T9", opaque, 0) for opaque in range(100, 110)]
    fast, slow = _run(_SETUP + reads + [("register", "a", ("T9",), 2)]
                      + [("read", "T9", 200, 0)])
    assert fast.processed == slow.processed == len(reads) + 1
    answers = FrameDecoder().feed(bytes(fast.transport.written))
    assert [a.code for a in answers] == [ResponseCode.TOPIC_NOT_EXIST] * len(reads) + [0]


def test_order_messages_on_go_the_ordinary_way_every_time() -> None:
    reads = [("read", "T1", opaque, 0) for opaque in range(100, 106)]
    steps = [*_SETUP, ("order", True), ("kv", "T1", "broker-a:8"), *reads]
    steps += [("kv", "T1", "broker-a:2"), ("read", "T1", 300, 0), ("order", False)]
    steps += [("read", "T1", opaque, 0) for opaque in range(400, 404)]
    fast, slow = _run(steps)
    assert fast.processed == len(reads) + 1 + 1  # once learnt after the switch is off
    assert slow.processed == len(reads) + 1 + 4


class _OrdinaryShadow(ShadowProcessor):
    """A shadow with its own `process`: never answered from memory."""

    def process(self, request: RemotingCommand, channel: Any = None) -> Any:
        return super().process(request, channel)


def test_a_shadow_refuses_route_reads_the_ordinary_way() -> None:
    reads = [("read", "T1", opaque, 0) for opaque in range(100, 105)]
    fast, _ = _run(_SETUP + reads, fast_class=ShadowProcessor, slow_class=_OrdinaryShadow)
    assert fast.processed == len(reads)
    assert all(a.code == ResponseCode.SYSTEM_ERROR
               for a in FrameDecoder().feed(bytes(fast.transport.written)))
    manager = r.RouteInfoManager()
    assert NameServerProcessor(manager).plain_routes
    assert not ShadowProcessor(manager).plain_routes
    assert not Ordinary(manager).plain_routes


def test_while_route_reads_wait_in_the_queue_they_keep_their_order() -> None:
    async def scenario() -> None:
        side = Side(NameServerProcessor)
        for step in _SETUP:
            _change(side, step)
        side.read(_read("T1", 100))
        assert isinstance(side.conn.memo, FrameMemo)
        assert side.read(_read("T1", 101) + _read("T1", 102)) == b""  # queued
        assert side.read(_read("T1", 103)) == b""  # waits behind them
        await side.drain()
        answers = [c.opaque for c in FrameDecoder().feed(bytes(side.transport.written))]
        assert answers[-3:] == [101, 102, 103]
        assert side.read(_read("T1", 104)) != b""  # the queue is empty again: from memory
        side.stop()

    asyncio.run(scenario())


def test_metrics_count_remembered_route_reads_as_ordinary_ones() -> None:
    async def scenario() -> list[list[tuple[int, int | None]]]:
        seen = []
        for cls in (NameServerProcessor, Ordinary):
            side = Side(cls)
            side.host.metrics = Observed()  # type: ignore[assignment]
            for step in _SETUP:
                _change(side, step)
            for opaque in range(100, 110):
                side.read(_read("T1", opaque))
            seen.append(side.host.metrics.seen)  # type: ignore[union-attr]
            side.stop()
        return seen

    fast, slow = asyncio.run(scenario())
    assert fast == slow and fast.count((105, 0)) == 10


_OPAQUES = st.one_of(st.integers(100, 999), st.integers(100, 999),
                     st.integers(0, 2**31 - 1), st.integers(-(2**31), -1))
_READ = st.builds(lambda t, o, d: ("read", t, o, d), st.sampled_from(_TOPICS), _OPAQUES,
                  st.sampled_from([0, 0, 0, 1, 2, 3]))
_CHANGE = st.one_of(
    st.builds(lambda b, ts, v: ("register", b, tuple(ts), v), st.sampled_from("ab"),
              st.lists(st.sampled_from(_TOPICS), max_size=3, unique=True),
              st.integers(1, 20)),
    st.builds(lambda b: ("unregister", b), st.sampled_from("ab")),
    st.just(("expire",)),
    st.builds(lambda t: ("delete", t), st.sampled_from(_TOPICS)),
    st.builds(lambda t, v: ("kv", t, v), st.sampled_from(_TOPICS),
              st.sampled_from(["broker-a:4", "broker-b:2", ""])),
    st.builds(lambda on: ("order", on), st.booleans()))
# mostly the same read again (the case remembered), sometimes another or a change
_STEPS = st.lists(st.one_of(_READ, _CHANGE, st.just(("again",)), st.just(("again",)),
                            st.just(("again",))), max_size=40)


def _expand(steps: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """("again",) repeats the last read with the next opaque."""
    out: list[tuple[Any, ...]] = []
    last: tuple[Any, ...] = ("read", "T1", 99, 0)
    for step in steps:
        if step[0] == "again":
            last = (*last[:2], (last[2] + 1) % 2**31, last[3])
            out.append(last)
        else:
            if step[0] == "read":
                last = step
            out.append(step)
    return out


@pytest.mark.parametrize("kind", [SerializeType.JSON, SerializeType.ROCKETMQ])
@settings(max_examples=60, deadline=None, derandomize=True)
@given(steps=_STEPS)
def test_random_reads_and_route_changes_answer_the_same_bytes(
        kind: SerializeType, steps: list[tuple[Any, ...]]) -> None:
    fast, slow = _run(_SETUP + _expand(steps), kind)
    assert fast.processed <= slow.processed
