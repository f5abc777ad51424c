"""``syncBrokerMemberGroup`` / min-broker-id view, and the available name-server list."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from routing.heartbeat import (
    MEMBER_GROUP_TIMEOUT_MS,
    Action,
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
    member_group_from_route,
)

NS = ("ns1:9876", "ns2:9876")
MASTER, SLAVE = "10.0.0.1:10911", "10.0.0.2:10911"
SYNC_TOPIC = "rmq_sys_SYNC_BROKER_MEMBER_broker-a"


def cfg(**overrides: Any) -> BrokerConfig:
    fields: dict[str, Any] = {"cluster": "c", "broker_name": "broker-a", "broker_id": 1,
                              "broker_addr": SLAVE, "name_servers": NS,
                              "enable_slave_acting_master": True}
    fields.update(overrides)
    return BrokerConfig(**fields)


def of(kind: type, actions: Iterable[Action]) -> list[Any]:
    return [a for a in actions if isinstance(a, kind)]


def register(mgr: r.RouteInfoManager, broker_id: int, addr: str) -> None:
    result = mgr.register(r.Registration(
        cluster="c", broker_name="broker-a", broker_id=broker_id, broker_addr=addr,
        enable_acting_master=True, topics={
            t: r.TopicConfig(topic_name=t) for t in ("TopicTest", SYNC_TOPIC)}))
    assert result.accepted


def answer(hb: BrokerHeartbeat, mgr: r.RouteInfoManager, q: SendMemberGroupQuery
           ) -> tuple[Action, ...]:
    if q.via_route:
        group = member_group_from_route(mgr.pickup_route(q.route_topic), q.cluster,
                                        q.broker_name)
    else:
        group = mgr.broker_member_group(q.cluster, q.broker_name)
    return hb.on_member_group(q.name_server, q.request_id, group)


# =========================================================================== member group


@pytest.mark.parametrize("compatible", [True, False])
def test_master_dies_slave_acts_master_returns_slave_stops(compatible: bool) -> None:
    clock = r.ManualClock(start_ms=0)
    mgr = r.RouteInfoManager(clock=clock)
    register(mgr, 0, MASTER)
    register(mgr, 1, SLAVE)
    hb = BrokerHeartbeat(cfg(compatible_with_old_namesrv=compatible), clock=clock)
    hb.start()
    assert not hb.acting_as_master and hb.min_broker_id == 0
    clock.set(1_000)
    (q,) = of(SendMemberGroupQuery, hb.poll())
    assert q.via_route is compatible and q.timeout_ms == MEMBER_GROUP_TIMEOUT_MS
    assert of(MinBrokerChanged, answer(hb, mgr, q)) == []  # the master is there: no change
    assert dict(hb.member_group) == {0: MASTER, 1: SLAVE}

    mgr.unregister(cluster="c", broker_addr=MASTER, broker_name="broker-a", broker_id=0)
    clock.set(2_000)
    (q,) = of(SendMemberGroupQuery, hb.poll())
    (event,) = of(MinBrokerChanged, answer(hb, mgr, q))
    assert (event.min_broker_id, event.min_broker_addr, event.acting_as_master) == (
        1, SLAVE, True)
    assert hb.acting_as_master and hb.min_broker_id == 1 and hb.min_broker_addr == SLAVE

    register(mgr, 0, MASTER)
    clock.set(3_000)
    (q,) = of(SendMemberGroupQuery, hb.poll())
    (event,) = of(MinBrokerChanged, answer(hb, mgr, q))
    assert (event.min_broker_id, event.acting_as_master) == (0, False)
    assert not hb.acting_as_master
    clock.set(4_000)
    (q,) = of(SendMemberGroupQuery, hb.poll())
    assert of(MinBrokerChanged, answer(hb, mgr, q)) == []  # no change, no event


def test_losing_the_known_master_reports_it_offline() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = BrokerHeartbeat(cfg(), clock=clock)
    (reg, _) = of(SendRegistration, hb.start())
    hb.on_register_reply(reg.name_server, reg.request_id,
                         r.RegisterResult(accepted=True, master_addr=MASTER))
    assert hb.master_addr == MASTER
    # a push first names the master (as after a restart of the group) ...
    (e,) = hb.on_min_broker_id_changed(1, SLAVE, offline_broker_addr=MASTER, now_ms=10)
    assert isinstance(e, MinBrokerChanged)
    assert e.master_offline and e.acting_as_master and hb.master_addr is None
    # ... then a push says the master is back, with its HA address
    (e,) = hb.on_min_broker_id_changed(0, MASTER, ha_broker_addr="10.0.0.1:10912", now_ms=20)
    assert isinstance(e, MinBrokerChanged)
    assert (e.acting_as_master, e.master_offline, e.ha_broker_addr) == (
        False, False, "10.0.0.1:10912")
    assert hb.on_min_broker_id_changed(0, MASTER, now_ms=30) == ()  # same id: nothing


def test_a_sync_answer_that_raises_the_min_id_names_the_old_one_offline() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = BrokerHeartbeat(cfg(broker_id=2), clock=clock)
    hb.start()
    group = r.BrokerMemberGroup(cluster="c", broker_name="broker-a",
                                broker_addrs={1: SLAVE, 2: "10.0.0.3:10911"})
    (q,) = of(SendMemberGroupQuery, hb.poll(1_000))
    (e,) = hb.on_member_group(q.name_server, q.request_id, group)
    assert isinstance(e, MinBrokerChanged) and e.offline_broker_addr is None  # none known yet
    group2 = r.BrokerMemberGroup(cluster="c", broker_name="broker-a",
                                 broker_addrs={2: "10.0.0.3:10911"})
    (q,) = of(SendMemberGroupQuery, hb.poll(2_000))
    (e,) = hb.on_member_group(q.name_server, q.request_id, group2)
    assert isinstance(e, MinBrokerChanged)
    assert e.offline_broker_addr == SLAVE and e.acting_as_master


def test_a_master_and_a_non_acting_broker_never_change_their_view() -> None:
    clock = r.ManualClock(start_ms=0)
    master = BrokerHeartbeat(cfg(broker_id=0, broker_addr=MASTER), clock=clock)
    master.start()
    assert master.acting_as_master
    assert master.on_min_broker_id_changed(1, SLAVE) == ()
    assert master.acting_as_master
    plain = BrokerHeartbeat(cfg(enable_slave_acting_master=False), clock=clock)
    plain.start()
    assert of(SendMemberGroupQuery, plain.poll(5_000)) == []
    assert plain.on_min_broker_id_changed(1, SLAVE) == ()


def test_isolated_broker_records_the_group_but_not_the_min_id() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = BrokerHeartbeat(cfg(total_replicas=2), clock=clock)
    hb.start()
    group = r.BrokerMemberGroup(cluster="c", broker_name="broker-a", broker_addrs={1: SLAVE})
    (q,) = of(SendMemberGroupQuery, hb.poll(1_000))
    assert hb.on_member_group(q.name_server, q.request_id, group) == ()
    assert dict(hb.member_group) == {1: SLAVE} and hb.min_broker_id == 0
    hb.on_min_broker_id_changed(1, SLAVE, now_ms=1_500)  # a push is not gated on isolation
    assert hb.min_broker_id == 1 and hb.acting_as_master
    hb.isolate(now_ms=1_600)
    assert not hb.acting_as_master
    hb.end_isolation(now_ms=1_700)
    assert hb.acting_as_master  # startService: brokerId == minBrokerId


def test_sync_schedule_timeouts_and_failover() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = BrokerHeartbeat(cfg(sync_broker_member_group_period_ms=500), clock=clock)
    hb.start()
    (q,) = of(SendMemberGroupQuery, hb.poll(1_000))
    assert q.name_server == NS[0]
    assert of(SendMemberGroupQuery, hb.poll(1_500)) == []  # one query at a time
    (q2,) = of(SendMemberGroupQuery, hb.poll(4_000))  # the first timed out at 4 000
    assert q2.name_server == NS[1]  # Java picks another name server after a failure
    hb.on_failure(q2.name_server, q2.request_id, now_ms=4_100)
    (q3,) = of(SendMemberGroupQuery, hb.poll(4_500))
    assert q3.name_server == NS[0]
    hb.on_error_response(q3.name_server, q3.request_id, now_ms=4_600)  # empty group: no change
    (q4,) = of(SendMemberGroupQuery, hb.poll(5_000))
    assert q4.name_server == NS[0] and hb.min_broker_id == 0
    assert hb.on_member_group("ns9:1", 999, None) == ()  # unknown id: ignored
    with pytest.raises(r.InvalidRequest, match="group"):
        hb.on_member_group(q4.name_server, q4.request_id, {"0": MASTER})  # type: ignore[arg-type]


def test_member_group_from_route_picks_the_group() -> None:
    assert member_group_from_route(None, "c", "b").broker_addrs == {}
    route = r.TopicRouteData(broker_datas=(
        r.BrokerData(cluster="other", broker_name="b", broker_addrs={0: MASTER}),
        r.BrokerData(cluster="c", broker_name="b", broker_addrs={1: SLAVE})))
    assert dict(member_group_from_route(route, "c", "b").broker_addrs) == {1: SLAVE}


# =========================================================================== available


def test_registrations_and_heartbeats_go_to_available_name_servers_only() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = BrokerHeartbeat(cfg(broker_id=0, broker_addr=MASTER, compatible_with_old_namesrv=False),
                         clock=clock)
    assert hb.on_connect_result("ns2:9876", False) == ()
    assert hb.available_name_servers == ("ns1:9876",)
    assert [a.name_server for a in of(SendRegistration, hb.start())] == ["ns1:9876"]
    assert [a.name_server for a in of(SendHeartbeat, hb.poll(1_000))] == ["ns1:9876"]
    hb.on_connect_result("ns2:9876", True, now_ms=1_500)
    assert [a.name_server for a in of(SendHeartbeat, hb.poll(2_000))] == list(NS)


def test_need_register_queries_and_unregisters_go_to_the_full_list() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = BrokerHeartbeat(cfg(broker_id=0, broker_addr=MASTER, force_register=False,
                             enable_slave_acting_master=False), clock=clock)
    hb.on_connect_result("ns2:9876", False)
    (reg,) = of(SendRegistration, hb.start())
    hb.on_register_reply(reg.name_server, reg.request_id, r.RegisterResult(accepted=True))
    qs = of(SendVersionQuery, hb.poll(10_000))
    assert [q.name_server for q in qs] == list(NS)
    out: list[Action] = []
    for q in qs:
        out += hb.on_failure(q.name_server, q.request_id)  # failures count as "register" ...
    # ... and the registration then goes to the available list only
    assert [a.name_server for a in of(SendRegistration, out)] == ["ns1:9876"]
    assert [a.name_server for a in of(SendUnregister, hb.shutdown())] == list(NS)


def test_failed_queries_register_to_available_only() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = BrokerHeartbeat(cfg(broker_id=0, broker_addr=MASTER, force_register=False,
                             enable_slave_acting_master=False), clock=clock)
    hb.on_connect_result("ns2:9876", False)
    (reg,) = of(SendRegistration, hb.start())
    hb.on_register_reply(reg.name_server, reg.request_id, r.RegisterResult(accepted=True))
    q1, q2 = of(SendVersionQuery, hb.poll(10_000))
    hb.on_version_reply(q1.name_server, q1.request_id,
                        r.VersionAnswer(changed=False, stored=hb.data_version))
    out = hb.on_failure(q2.name_server, q2.request_id)
    assert [a.name_server for a in of(SendRegistration, out)] == ["ns1:9876"]


def test_single_topic_registration_ignores_availability() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = BrokerHeartbeat(cfg(broker_id=0, broker_addr=MASTER, enable_single_topic_register=True,
                             enable_slave_acting_master=False), clock=clock)
    hb.on_connect_result("ns1:9876", False)
    (reg,) = of(SendRegistration, hb.start())
    hb.on_register_reply(reg.name_server, reg.request_id, r.RegisterResult(accepted=True))
    out = hb.update_topics([r.TopicConfig(topic_name="T")], now_ms=5)
    assert [a.name_server for a in of(SendTopicRegistration, out)] == list(NS)


def test_scan_checks_every_name_server_every_connect_timeout() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = BrokerHeartbeat(cfg(broker_id=0, broker_addr=MASTER, scan_available_name_servers=True,
                             connect_timeout_ms=2_000, enable_slave_acting_master=False),
                         clock=clock)
    out = hb.start()
    assert out[:2] == tuple(CheckNameServer(name_server=ns, timeout_ms=2_000) for ns in NS)
    assert len(of(SendRegistration, out)) == 2  # Java's scan and registration race: all
    assert hb.next_deadline_ms() == 2_000
    assert of(CheckNameServer, hb.poll(1_999)) == []
    assert len(of(CheckNameServer, hb.poll(2_000))) == 2
    assert len(of(CheckNameServer, hb.poll(7_000))) == 2  # late: once, not twice
    assert hb.next_deadline_ms() == 8_000
    hb.on_connect_result("ns1:9876", False, now_ms=7_001)
    hb.on_connect_result("ns1:9876", False, now_ms=7_002)  # twice: the same
    assert hb.available_name_servers == ("ns2:9876",)
    hb.shutdown(now_ms=7_003)
    assert hb.poll(9_000) == ()


def test_connect_results_are_validated() -> None:
    hb = BrokerHeartbeat(cfg(), clock=r.ManualClock(start_ms=0))
    with pytest.raises(r.InvalidRequest, match="name_server"):
        hb.on_connect_result("ns9:9876", False)
    with pytest.raises(r.InvalidRequest, match="ok"):
        hb.on_connect_result("ns1:9876", "no")  # type: ignore[arg-type]
    assert hb.available_name_servers == NS
    with pytest.raises(r.InvalidRequest, match="min_broker_id"):
        hb.on_min_broker_id_changed(-1, SLAVE)
    with pytest.raises(r.InvalidRequest, match="offline_broker_addr"):
        hb.on_min_broker_id_changed(1, SLAVE, offline_broker_addr="nope")
    assert hb.min_broker_id == 0


_ops = st.lists(st.one_of(
    st.tuples(st.just("connect"), st.sampled_from((*NS, "ns3:9876", "ns9:9876")), st.booleans()),
    st.tuples(st.just("advance"), st.integers(1, 12_000), st.booleans()),
    st.tuples(st.just("topic"), st.sampled_from(["T1", "T2", "T3"]), st.booleans()),
), max_size=25)


@settings(max_examples=80, deadline=None)
@given(ops=_ops, force=st.booleans(), single=st.booleans(), compatible=st.booleans())
def test_sends_respect_availability(ops: list[tuple[str, Any, bool]], force: bool,
                                    single: bool, compatible: bool) -> None:
    """Whatever happens, registrations and heartbeats go only to the servers available when
    they are sent; version queries and single-topic registrations to all of them, each round
    of them in configured order; unregisters to every configured server."""
    servers = (*NS, "ns3:9876")
    clock = r.ManualClock(start_ms=0)
    hb = BrokerHeartbeat(cfg(broker_id=0, broker_addr=MASTER, name_servers=servers,
                             force_register=force, enable_single_topic_register=single,
                             compatible_with_old_namesrv=compatible), clock=clock)
    pending: list[Action] = []

    def check(actions: Iterable[Action]) -> None:
        available = set(hb.available_name_servers)
        for a in actions:
            if isinstance(a, SendRegistration | SendHeartbeat) or (
                    isinstance(a, SendVersionQuery) and a.oneway):
                assert a.name_server in available, a
            pending.append(a)
        queries = [a.name_server for a in actions
                   if isinstance(a, SendVersionQuery) and not a.oneway]
        assert queries in ([], list(servers))
        topics = [a for a in actions if isinstance(a, SendTopicRegistration)]
        assert [a.name_server for a in topics] in ([], list(servers))

    check(hb.start())
    for kind, arg, flag in ops:
        if kind == "connect":
            if arg in servers:
                check(hb.on_connect_result(arg, flag))
            else:
                with pytest.raises(r.InvalidRequest):
                    hb.on_connect_result(arg, flag)
        elif kind == "advance":
            clock.advance(arg)
            check(hb.poll())
            if flag and pending:  # answer the oldest request that expects an answer
                a = pending.pop(0)
                if isinstance(a, SendRegistration) and not a.oneway:
                    check(hb.on_register_reply(a.name_server, a.request_id,
                                               r.RegisterResult(accepted=True)))
                elif isinstance(a, SendVersionQuery) and not a.oneway:
                    check(hb.on_failure(a.name_server, a.request_id))
                elif isinstance(a, SendTopicRegistration):
                    check(hb.on_topic_reply(a.name_server, a.request_id))
        else:
            check(hb.update_topics([r.TopicConfig(topic_name=arg, read_queue_nums=4 if flag
                                                  else 8)]))
    assert [a.name_server for a in hb.shutdown()] == list(servers)
