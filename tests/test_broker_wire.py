"""The broker's actions on the wire, sans-I/O: every request `request_for` builds is answered
by the library's own `NameServerProcessor`, and `deliver` feeds the answer back."""

from __future__ import annotations

from typing import Any

import pytest

import routing as r
from routing.heartbeat import (
    BrokerConfig,
    BrokerHeartbeat,
    CheckNameServer,
    MinBrokerChanged,
    SendHeartbeat,
    SendMemberGroupQuery,
    SendRegistration,
    SendTopicRegistration,
    SendUnregister,
    SendVersionQuery,
    UpdateMasterAddress,
)
from routing.remoting import (
    FLAG_ONEWAY,
    NAMESPACE_ORDER_TOPIC_CONFIG,
    NameServerProcessor,
    RemotingCommand,
    RequestCode,
    ResponseCode,
)
from routing.remoting.broker._wire import deliver, notify_fields, request_for

NS = "ns1:9876"


def broker(**kw: Any) -> BrokerHeartbeat:
    fields: dict[str, Any] = {"cluster": "c", "broker_name": "broker-a", "broker_id": 0,
                              "broker_addr": "10.0.0.1:10911", "name_servers": (NS,)}
    fields.update(kw)
    return BrokerHeartbeat(BrokerConfig(**fields), clock=r.ManualClock(start_ms=0),
                           topics=[r.TopicConfig(topic_name=t, order=(t == "B"))
                                   for t in ("A", "B")])


def exchange(proc: NameServerProcessor, hb: BrokerHeartbeat, actions: Any, *,
             compressed: bool = False) -> list[Any]:
    """Send every action through the processor and feed the answers back."""
    seen = []
    todo = list(actions)
    while todo:
        action = todo.pop(0)
        seen.append(action)
        wanted = request_for(action, len(seen), compressed=compressed)
        if wanted is None:
            continue
        command, timeout = wanted
        response = proc.process(command, channel="ch").response
        if timeout is None:
            assert response is None and command.flag & FLAG_ONEWAY
            continue
        todo += deliver(hb, NS, action, response)
    return seen


@pytest.mark.parametrize("compressed", [False, True])
def test_registration_round_trips_through_the_processor(compressed: bool) -> None:
    mgr = r.RouteInfoManager(clock=r.ManualClock(start_ms=0))
    proc = NameServerProcessor(mgr)
    proc.kv.put(NAMESPACE_ORDER_TOPIC_CONFIG, "A", "broker-a:8")
    hb = broker(enable_slave_acting_master=True, compatible_with_old_namesrv=False)
    seen = exchange(proc, hb, hb.start(), compressed=compressed)
    assert any(isinstance(a, UpdateMasterAddress) for a in seen)
    assert mgr.pickup_route("A") is not None
    assert hb.topics["A"].order  # the reply's KV table applied
    (reg,) = [a for a in seen if isinstance(a, SendRegistration)]
    command, _ = request_for(reg, 1, compressed=compressed) or (None, None)
    assert command is not None
    assert command.ext_fields["compressed"] == ("true" if compressed else "false")
    assert command.ext_fields["heartbeatTimeoutMillis"] == "10000"
    # heartbeats (BROKER_HEARTBEAT oneway, not compatible mode) and the member-group sync
    seen = exchange(proc, hb, hb.poll(1_000))
    assert {type(a) for a in seen} == {SendHeartbeat, SendMemberGroupQuery}
    assert dict(hb.member_group) == {0: "10.0.0.1:10911"}


def test_version_query_topic_registration_and_unregister() -> None:
    mgr = r.RouteInfoManager(clock=r.ManualClock(start_ms=0))
    proc = NameServerProcessor(mgr)
    hb = broker(force_register=False, enable_single_topic_register=True)
    exchange(proc, hb, hb.start())
    seen = exchange(proc, hb, hb.poll(10_000))  # a need_register round: unchanged
    assert [type(a) for a in seen] == [SendVersionQuery]
    seen = exchange(proc, hb, hb.update_topics([r.TopicConfig(topic_name="C")], now_ms=10_001))
    assert [type(a) for a in seen] == [SendTopicRegistration]
    assert not hb.registering and mgr.pickup_route("C") is not None
    exchange(proc, hb, hb.shutdown())
    assert mgr.pickup_route("A") is None


def test_member_group_via_the_sync_route() -> None:
    mgr = r.RouteInfoManager(clock=r.ManualClock(start_ms=0))
    proc = NameServerProcessor(mgr)
    sync = "rmq_sys_SYNC_BROKER_MEMBER_broker-a"
    slave = BrokerHeartbeat(BrokerConfig(
        cluster="c", broker_name="broker-a", broker_id=1, broker_addr="10.0.0.2:10911",
        name_servers=(NS,), enable_slave_acting_master=True), clock=r.ManualClock(start_ms=0),
        topics=[r.TopicConfig(topic_name=t) for t in ("A", sync)])
    exchange(proc, slave, slave.start())  # a prime slave: it writes the rows
    seen = exchange(proc, slave, slave.poll(1_000))
    assert any(isinstance(a, SendMemberGroupQuery) and a.via_route for a in seen)
    assert [e.acting_as_master for e in seen if isinstance(e, MinBrokerChanged)] == [True]


def test_deliver_maps_failures_and_odd_answers() -> None:
    hb = broker()
    (reg,) = hb.start()
    assert isinstance(reg, SendRegistration)
    command, _ = request_for(reg, 1) or (None, None)
    assert command is not None
    bad = command.make_response(ResponseCode.SUCCESS, body=b"not json")
    assert deliver(hb, NS, reg, bad) == ()  # an unreadable body counts as a failure
    assert not hb.registering
    assert deliver(hb, NS, CheckNameServer(name_server=NS, timeout_ms=1), None) == ()
    assert request_for(CheckNameServer(name_server=NS, timeout_ms=1), 1) is None
    unreg = SendUnregister(name_server=NS, cluster="c", broker_addr="10.0.0.1:10911",
                           broker_name="broker-a", broker_id=0, timeout_ms=3_000)
    command, timeout = request_for(unreg, 7) or (None, None)
    assert command is not None and timeout == 3_000
    assert command.code == RequestCode.UNREGISTER_BROKER and command.opaque == 7


def test_a_null_changed_header_counts_as_changed() -> None:
    hb = broker(force_register=False)
    (reg,) = hb.start()
    hb.on_register_reply(NS, reg.request_id, r.RegisterResult(accepted=True))  # type: ignore[union-attr]
    (q,) = hb.poll(10_000)
    assert isinstance(q, SendVersionQuery)
    answer = RemotingCommand(code=ResponseCode.SUCCESS, flag=1)
    out = deliver(hb, NS, q, answer)
    assert [type(a) for a in out] == [SendRegistration]


def test_notify_fields() -> None:
    cmd = RemotingCommand(code=RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE, ext_fields={
        "minBrokerId": "1", "minBrokerAddr": "10.0.0.2:10911",
        "offlineBrokerAddr": "10.0.0.1:10911"})
    assert notify_fields(cmd) == {"min_broker_id": 1, "min_broker_addr": "10.0.0.2:10911",
                                  "offline_broker_addr": "10.0.0.1:10911",
                                  "ha_broker_addr": None}
    with pytest.raises(r.InvalidRequest, match="minBrokerId"):
        notify_fields(RemotingCommand(code=RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE))
