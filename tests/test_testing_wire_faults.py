"""Faults on demand for a fake on the wire: each action, the filters, the budgets, the
seeded shares, the event log, and rules that cannot be (named field and value, nothing
added). No test waits for a reply that should not come: it sends a second request and
checks which answer arrives first."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routing.remoting import RequestCode, ResponseCode
from routing.testing import FakeNameServer, FaultError, Faults, serve_on_wire
from routing.testing._faults import fault_from_json
from wire_helpers import WireClient, register, register_fields, registration_body

ROUTE = RequestCode.GET_ROUTEINFO_BY_TOPIC


@pytest.fixture
def ns(nameserver_on_wire: FakeNameServer) -> FakeNameServer:
    nameserver_on_wire.broker(name="broker-a", topics=["TopicTest"], queues=4)
    return nameserver_on_wire


def test_busy_for_the_next_request_only(ns: FakeNameServer) -> None:
    rule = ns.wire.faults.add("busy", code="GET_ROUTEINFO_BY_TOPIC", count=1)
    with WireClient(ns.wire.address) as client:
        busy = client.route("TopicTest")
        assert busy.code == ResponseCode.SYSTEM_BUSY
        assert busy.remark == "[OVERLOAD]system busy, start flow control for a while"
        assert client.route("TopicTest").code == ResponseCode.SUCCESS
    assert ns.wire.faults.rules == () and ns.wire.faults.hits(rule) == 1
    [hit] = ns.events_of("fault")
    assert "answered SYSTEM_BUSY (rule 1)" in hit.detail
    assert [r.fault for r in ns.wire.requests()] == [1, None]


def test_answer_another_code_with_a_remark(ns: FakeNameServer) -> None:
    ns.wire.faults.add("answer", code=ROUTE, response_code="SYSTEM_ERROR", remark="boom",
                       count=2)
    with WireClient(ns.wire.address) as client:
        answers = [client.route("TopicTest") for _ in range(3)]
    assert [(a.code, a.remark) for a in answers[:2]] == [(ResponseCode.SYSTEM_ERROR, "boom")] * 2
    assert answers[2].code == ResponseCode.SUCCESS


def test_drop_reply_applies_the_request_but_answers_nothing(ns: FakeNameServer) -> None:
    ns.wire.faults.add("drop_reply", code="REGISTER_BROKER", count=1)
    with WireClient(ns.wire.address) as broker:
        body = registration_body("TopicT")
        lost = broker.send(RequestCode.REGISTER_BROKER,
                           register_fields("broker-t", "127.0.0.1:10911", body), body)
        answered = broker.send(ROUTE, {"topic": "TopicT"})
        first = broker.recv()
        assert first.opaque == answered != lost and first.code == ResponseCode.SUCCESS
        ns.assert_route("TopicT", brokers=["broker-t"])  # it was applied


def test_drop_request_loses_it(ns: FakeNameServer) -> None:
    ns.wire.faults.add("drop_request", code="REGISTER_BROKER")
    with WireClient(ns.wire.address) as broker:
        body = registration_body("TopicT")
        broker.send(RequestCode.REGISTER_BROKER,
                    register_fields("broker-t", "127.0.0.1:10911", body), body)
        asked = broker.send(ROUTE, {"topic": "TopicT"})
        first = broker.recv()
        assert first.opaque == asked and first.code == ResponseCode.TOPIC_NOT_EXIST
    ns.assert_no_route("TopicT")


def test_close_the_connection_of_one_broker(ns: FakeNameServer) -> None:
    with WireClient(ns.wire.address) as b1, WireClient(ns.wire.address) as b2:
        register(b1, "broker-1", "127.0.0.1:10911", "TopicT")
        register(b2, "broker-2", "127.0.0.1:10921", "TopicT")
        ns.wire.faults.add("close", broker="127.0.0.1:10911")
        b2.route("TopicT")           # another connection: untouched
        b1.send(ROUTE, {"topic": "TopicT"})
        assert b1.closed_by_server()
        ns.wire.wait_for(lambda: ns.events_of("channel_closed") != ())
        ns.assert_route("TopicT", brokers=["broker-2"])   # D6: its broker went with it
        assert b2.route_brokers("TopicT") == ["broker-2"]
    kinds = [e.kind for e in ns.events if e.kind in ("fault", "channel_closed")]
    assert kinds[:2] == ["fault", "channel_closed"]


def test_per_connection_filter(ns: FakeNameServer) -> None:
    with WireClient(ns.wire.address) as c1, WireClient(ns.wire.address) as c2:
        c1.route("TopicTest")
        c2.route("TopicTest")
        [first, second] = ns.wire.connections()
        ns.wire.faults.add("busy", connection=second.id)
        assert c1.route("TopicTest").code == ResponseCode.SUCCESS
        assert c2.route("TopicTest").code == ResponseCode.SYSTEM_BUSY
        assert c1.route("TopicTest").code == ResponseCode.SUCCESS
        assert first.id != second.id


def test_delay_holds_the_reply_until_the_clock_moves(ns: FakeNameServer) -> None:
    ns.wire.faults.add("delay", code=ROUTE, delay_ms=3_000, count=1)
    with WireClient(ns.wire.address) as client:
        held = client.send(ROUTE, {"topic": "TopicTest"})
        ns.wire.wait_for(lambda: ns.wire.held == 1)
        ns.tick(2_999)
        assert ns.wire.held == 1
        ns.tick(1)   # now the reply goes out
        first = client.recv()
        assert first.opaque == held and first.code == ResponseCode.SUCCESS
    released = [e.detail for e in ns.events_of("fault")]
    assert "reply held until 3000 ms" in released[0] and "released" in released[1]


def test_a_delayed_reply_is_lost_when_the_server_stops(ns: FakeNameServer) -> None:
    ns.wire.faults.add("delay", delay_ms=1_000)
    with WireClient(ns.wire.address) as client:
        client.send(ROUTE, {"topic": "TopicTest"})
        ns.wire.wait_for(lambda: ns.wire.held == 1)
        ns.stop()
        assert client.closed_by_server()
        assert ns.wire.held == 0
        ns.tick(5_000)
    ns.start()


def _pattern(seed: int, share: float, n: int = 40) -> list[bool]:
    ns = FakeNameServer()
    with serve_on_wire(ns):
        assert ns.wire is not None
        ns.wire.faults.add("busy", code=ROUTE, share=share, seed=seed)
        with WireClient(ns.wire.address) as client:
            return [client.route("X").code == ResponseCode.SYSTEM_BUSY for _ in range(n)]


def test_a_share_is_deterministic_for_a_seed() -> None:
    first, again, other = _pattern(7, 0.5), _pattern(7, 0.5), _pattern(8, 0.5)
    assert first == again
    assert first != other
    assert 5 < sum(first) < 35
    assert all(_pattern(1, 1.0, 5))


def test_share_and_count_together_and_rule_order() -> None:
    faults = Faults()
    limited = faults.add("busy", code=ROUTE, share=0.5, seed=3, count=2)
    fallback = faults.add("drop_reply")
    hits = [faults.match(ROUTE, 1, ()) for _ in range(20)]
    assert [h.id for h in hits if h is not None and h.id == limited.id] == [1, 1]
    assert faults.hits(limited) == 2 and faults.rules == (fallback,)
    assert all(h is not None for h in hits)   # the rest fell to the second rule
    assert faults.match(RequestCode.REGISTER_BROKER, 1, ()) == fallback
    assert faults.remove(fallback) and not faults.remove(fallback)
    assert faults.match(ROUTE, 1, ()) is None


@pytest.mark.parametrize(("kwargs", "field", "value"), [
    ({"action": "explode"}, "action", "explode"),
    ({"action": "busy", "code": "NOPE"}, "code", "NOPE"),
    ({"action": "busy", "code": []}, "code", []),
    ({"action": "busy", "code": 2**40}, "code", 2**40),
    ({"action": "busy", "count": 0}, "count", 0),
    ({"action": "busy", "count": "3"}, "count", "3"),
    ({"action": "busy", "share": 0}, "share", 0),
    ({"action": "busy", "share": 1.5}, "share", 1.5),
    ({"action": "busy", "share": True}, "share", True),
    ({"action": "busy", "connection": 0}, "connection", 0),
    ({"action": "busy", "broker": ""}, "broker", ""),
    ({"action": "delay"}, "delay_ms", None),
    ({"action": "delay", "delay_ms": -1}, "delay_ms", -1),
    ({"action": "busy", "delay_ms": 5}, "delay_ms", 5),
    ({"action": "answer"}, "response_code", None),
    ({"action": "answer", "response_code": "NOPE"}, "response_code", "NOPE"),
    ({"action": "busy", "response_code": 1}, "response_code", 1),
    ({"action": "busy", "remark": "x" * 1001}, "remark", "x" * 1001),
    ({"action": "busy", "seed": 1.5}, "seed", 1.5),
])
def test_a_rule_that_cannot_be_names_field_and_value(kwargs, field, value) -> None:
    faults = Faults()
    with pytest.raises(FaultError) as bad:
        faults.add(**kwargs)
    assert (bad.value.field, bad.value.value) == (field, value)
    assert isinstance(bad.value, ValueError)
    assert faults.rules == ()
    with pytest.raises(FaultError) as from_json:
        fault_from_json(kwargs)
    assert (from_json.value.field, from_json.value.value) == (field, value)


def test_json_rules_refuse_unknown_keys() -> None:
    with pytest.raises(FaultError) as bad:
        fault_from_json({"action": "busy", "colour": "red"})
    assert (bad.value.field, bad.value.value) == ("colour", "red")
    with pytest.raises(FaultError) as missing:
        fault_from_json({})
    assert missing.value.field == "action"


@settings(max_examples=50)
@given(codes=st.lists(st.sampled_from([105, 103, 106]), max_size=60),
       count=st.integers(1, 10), share=st.floats(0.01, 1.0), seed=st.integers(0, 2**32))
def test_a_rule_hits_at_most_count_matching_requests(codes, count, share, seed) -> None:
    faults = Faults()
    rule = faults.add("busy", code=[105, 106], count=count, share=share, seed=seed)
    hit = [c for c in codes if faults.match(c, 1, ()) is not None]
    assert len(hit) <= count and set(hit) <= {105, 106}
    assert faults.hits(rule) == len(hit)
    assert (rule in faults.rules) == (len(hit) < count)
