"""Topic changes on the broker side (Java study §3.8) and the reply's order-topic KV table.

Incremental and single-topic registrations are checked against the library's own
`RouteInfoManager`, including its single-topic guard and ``delete_topic_with_broker_registration``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from routing.heartbeat import (
    SINGLE_TOPIC_TIMEOUT_MS,
    Action,
    BrokerConfig,
    BrokerHeartbeat,
    SendRegistration,
    SendTopicRegistration,
    SendVersionQuery,
    UpdateMasterAddress,
)

NS = ("ns1:9876", "ns2:9876")
NAME = "broker-a"


def make(clock: r.ManualClock, topics: Iterable[str] = ("A", "B"), **overrides: Any
         ) -> BrokerHeartbeat:
    fields: dict[str, Any] = {"cluster": "c", "broker_name": NAME, "broker_id": 0,
                              "broker_addr": "10.0.0.1:10911", "name_servers": NS}
    fields.update(overrides)
    return BrokerHeartbeat(BrokerConfig(**fields), clock=clock,
                           topics=[r.TopicConfig(topic_name=t) for t in topics])


class Servers:
    """In-process name servers answering the broker's actions, as a host would."""

    def __init__(self, clock: r.ManualClock, **config: Any) -> None:
        self.mgrs = {ns: r.RouteInfoManager(clock=clock, config=r.RoutingConfig(**config))
                     for ns in NS}
        self.drop_partial = False  # what a wire hop does: REGISTER_BROKER has no such flag

    def serve(self, hb: BrokerHeartbeat, actions: Iterable[Action]) -> list[Action]:
        """Answer everything, follow-ups included; return every action seen."""
        seen: list[Action] = []
        todo = list(actions)
        while todo:
            a = todo.pop(0)
            seen.append(a)
            if isinstance(a, SendRegistration) and not a.oneway:
                reg = a.registration
                if self.drop_partial:
                    reg = r.Registration(**{**_fields(reg), "partial": False})
                todo += hb.on_register_reply(a.name_server, a.request_id,
                                             self.mgrs[a.name_server].register(reg))
            elif isinstance(a, SendTopicRegistration):
                try:
                    self.mgrs[a.name_server].register_topic(a.topic, [a.queue_data])
                except r.InvalidRequest:
                    todo += hb.on_error_response(a.name_server, a.request_id)
                else:
                    todo += hb.on_topic_reply(a.name_server, a.request_id)
            elif isinstance(a, SendVersionQuery) and not a.oneway:
                got = self.mgrs[a.name_server].query_data_version(
                    cluster=a.cluster, broker_addr=a.broker_addr, data_version=a.data_version)
                todo += hb.on_version_reply(a.name_server, a.request_id, got)
        return seen

    def rows(self, ns: str = NS[0]) -> dict[str, r.QueueData]:
        mgr = self.mgrs[ns]
        out = {}
        for topic in mgr.all_topics():
            route = mgr.pickup_route(topic)
            assert route is not None
            for q in route.queue_datas:
                if q.broker_name == NAME:
                    out[topic] = q
        return out


def _fields(reg: r.Registration) -> dict[str, Any]:
    return {f: getattr(reg, f) for f in ("cluster", "broker_name", "broker_id", "broker_addr",
                                         "ha_server_addr", "zone_name", "heartbeat_timeout_ms",
                                         "enable_acting_master", "data_version", "topics",
                                         "topic_queue_mappings", "filter_servers", "channel")}


def sends(actions: Iterable[Action]) -> list[SendRegistration]:
    return [a for a in actions if isinstance(a, SendRegistration)]


def topic_sends(actions: Iterable[Action]) -> list[SendTopicRegistration]:
    return [a for a in actions if isinstance(a, SendTopicRegistration)]


# =========================================================================== incremental


def test_an_update_sends_an_incremental_registration_with_only_the_changed_topics() -> None:
    clock = r.ManualClock(start_ms=0)
    servers = Servers(clock)
    hb = make(clock)
    info = r.TopicQueueMappingInfo(topic="C", bname=NAME)
    hb.set_queue_mappings({"C": info, "A": r.TopicQueueMappingInfo(topic="A", bname=NAME)})
    servers.serve(hb, hb.start())
    clock.set(5_000)
    out = hb.update_topics([r.TopicConfig(topic_name="C", read_queue_nums=4),
                            r.TopicConfig(topic_name="A")])  # A is unchanged: left out
    regs = sends(out)
    assert [a.name_server for a in regs] == list(NS)
    reg = regs[0].registration
    assert set(reg.topics) == {"C"}
    assert reg.data_version == hb.data_version == r.DataVersion(timestamp=5_000, counter=1)
    assert dict(reg.topic_queue_mappings) == {"C": info}
    assert reg.partial  # spec D12: never deletes by omission
    seen = servers.serve(hb, out)
    assert sum(isinstance(a, UpdateMasterAddress) for a in seen) == 1  # the first reply wins
    for ns in NS:
        assert set(servers.rows(ns)) == {"A", "B", "C"}
        assert servers.rows(ns)["C"].read_queue_nums == 4
    assert not hb.registering


def test_an_unchanged_update_sends_nothing_and_keeps_the_version() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = make(clock)
    Servers(clock).serve(hb, hb.start())
    assert hb.update_topics([r.TopicConfig(topic_name="A")], now_ms=10) == ()
    assert hb.data_version.counter == 0


def test_increment_rewrites_perm_but_keeps_the_system_flag() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = make(clock, broker_permission=r.Perm.READ)
    Servers(clock).serve(hb, hb.start())
    (reg, _) = sends(hb.update_topics([r.TopicConfig(topic_name="S", topic_sys_flag=1,
                                                     order=True)], now_ms=1))
    t = reg.registration.topics["S"]
    assert (t.perm, int(t.topic_sys_flag), t.order) == (r.Perm.READ, 1, False)


def test_an_increment_waits_for_the_round_in_flight() -> None:
    clock = r.ManualClock(start_ms=0)
    servers = Servers(clock)
    hb = make(clock)
    start = hb.start()  # not answered yet: the round holds registerBrokerAll's monitor
    assert sends(hb.update_topics([r.TopicConfig(topic_name="C")], now_ms=1)) == []
    seen = servers.serve(hb, start)
    incs = [a for a in sends(seen) if set(a.registration.topics) == {"C"}]
    assert len(incs) == 2
    assert set(servers.rows()) == {"A", "B", "C"}


def test_increments_go_to_available_name_servers_only() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = make(clock)
    Servers(clock).serve(hb, hb.start())
    hb.on_connect_result("ns2:9876", False, now_ms=1)
    assert [a.name_server for a in sends(hb.update_topics(
        [r.TopicConfig(topic_name="C")], now_ms=2))] == ["ns1:9876"]


def test_single_topic_guard_refuses_an_increment_to_a_name_server_that_lost_the_broker() -> None:
    clock = r.ManualClock(start_ms=0)
    servers = Servers(clock)
    hb = make(clock)
    servers.serve(hb, hb.start())
    servers.mgrs["ns2:9876"] = r.RouteInfoManager(clock=clock)  # restarted: knows nobody
    seen = servers.serve(hb, hb.update_topics([r.TopicConfig(topic_name="C")], now_ms=1))
    assert "C" in servers.rows("ns1:9876")
    assert servers.mgrs["ns2:9876"].all_topics() == ()  # refused (Java: SYSTEM_ERROR)
    assert [a.name_server for a in seen if isinstance(a, UpdateMasterAddress)] == ["ns1:9876"]
    clock.set(10_000)  # the next full registration repairs it
    servers.serve(hb, hb.poll())
    assert set(servers.rows("ns2:9876")) == {"A", "B", "C"}


def test_delete_topic_with_broker_registration_and_increments() -> None:
    """Java's NamesrvConfig warns: with deleteTopicWithBrokerRegistration an increment deletes
    the group's other topics. Marked partial (D12), it does not here; without the mark (what a
    REGISTER_BROKER over the wire carries) it does, as in Java."""
    clock = r.ManualClock(start_ms=0)
    servers = Servers(clock, delete_topic_with_broker_registration=True)
    hb = make(clock)
    servers.serve(hb, hb.start())
    servers.serve(hb, hb.update_topics([r.TopicConfig(topic_name="C")], now_ms=1))
    assert set(servers.rows()) == {"A", "B", "C"}
    servers.drop_partial = True
    servers.serve(hb, hb.update_topics([r.TopicConfig(topic_name="D")], now_ms=2))
    assert set(servers.rows()) == {"D"}  # the hazard Java's comment warns about


# =========================================================================== single topic


def test_single_topic_registration_goes_topic_by_topic_to_the_full_list() -> None:
    clock = r.ManualClock(start_ms=0)
    servers = Servers(clock, delete_topic_with_broker_registration=True)
    hb = make(clock, enable_single_topic_register=True, broker_permission=r.Perm.READ)
    servers.serve(hb, hb.start())
    hb.on_connect_result("ns2:9876", False, now_ms=1)  # still gets single-topic sends
    out = hb.update_topics([r.TopicConfig(topic_name="C", topic_sys_flag=1),
                            r.TopicConfig(topic_name="D")], now_ms=2)
    first = topic_sends(out)
    assert [(a.name_server, a.topic) for a in first] == [(ns, "C") for ns in NS]
    assert first[0].queue_data == r.QueueData(broker_name=NAME, perm=r.Perm.READ,
                                              topic_sys_flag=1)
    assert first[0].timeout_ms == SINGLE_TOPIC_TIMEOUT_MS
    assert sends(out) == []
    seen = servers.serve(hb, out)
    assert [a.topic for a in topic_sends(seen)] == ["C", "C", "D", "D"]
    assert set(servers.rows("ns2:9876")) == {"A", "B", "C", "D"}  # nothing deleted
    assert servers.rows()["C"].perm == r.Perm.READ


def test_single_topic_wait_ends_after_three_seconds() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = make(clock, enable_single_topic_register=True)
    Servers(clock).serve(hb, hb.start())
    out = hb.update_topics([r.TopicConfig(topic_name="C"), r.TopicConfig(topic_name="D")],
                           now_ms=100)
    a, b = topic_sends(out)
    assert hb.on_topic_reply(a.name_server, a.request_id) == ()
    assert hb.next_deadline_ms() == 100 + SINGLE_TOPIC_TIMEOUT_MS
    d1, d2 = topic_sends(hb.poll(3_100))  # b never answered: the wait ended
    assert (d1.topic, d2.topic) == ("D", "D")
    # a registration reply with a topic-send id is not taken for one
    assert hb.on_register_reply(d1.name_server, d1.request_id,
                                r.RegisterResult(accepted=True, master_addr="10.9.9.9:1")) == ()
    assert hb.registering and hb.master_addr is None
    hb.on_topic_reply(d1.name_server, d1.request_id)
    hb.on_failure(d2.name_server, d2.request_id)
    assert not hb.registering
    assert b.topic == "C"


def test_single_topic_to_a_name_server_without_the_group_is_an_error_response() -> None:
    clock = r.ManualClock(start_ms=0)
    servers = Servers(clock)
    hb = make(clock, enable_single_topic_register=True)
    servers.serve(hb, hb.start())
    servers.mgrs["ns2:9876"] = r.RouteInfoManager(clock=clock)
    servers.serve(hb, hb.update_topics([r.TopicConfig(topic_name="C")], now_ms=1))
    assert not hb.registering
    assert servers.mgrs["ns2:9876"].all_topics() == ()


# =========================================================================== KV table


def test_the_winning_replys_order_config_marks_local_topics_ordered() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = make(clock, topics=("A", "B", "C"))
    a, b = sends(hb.start())
    hb.on_register_reply(a.name_server, a.request_id, r.RegisterResult(accepted=True),
                         kv_table={"A": "broker-a:8", "Missing": "broker-a:4"}, now_ms=50)
    assert hb.topics["A"].order and not hb.topics["B"].order
    assert hb.data_version == r.DataVersion(timestamp=50, counter=1)  # bumped once
    assert dict(hb.order_topic_config or {}) == {"A": "broker-a:8", "Missing": "broker-a:4"}
    # a later reply of the same send does not win: its table is ignored
    hb.on_register_reply(b.name_server, b.request_id, r.RegisterResult(accepted=True),
                         kv_table={"B": "x"}, now_ms=60)
    assert not hb.topics["B"].order
    # the next round carries the ordered topic and the new version
    clock.set(10_000)
    reg = sends(hb.poll())[0].registration
    assert reg.topics["A"].order and reg.data_version.counter == 1


def test_already_ordered_topics_and_no_body_change_nothing() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = BrokerHeartbeat(BrokerConfig(cluster="c", broker_name=NAME, broker_id=0,
                                      broker_addr="10.0.0.1:10911", name_servers=NS[:1]),
                         clock=clock, topics=[r.TopicConfig(topic_name="A", order=True)])
    (a,) = sends(hb.start())
    hb.on_register_reply(a.name_server, a.request_id, r.RegisterResult(accepted=True),
                         kv_table={"A": "x"})
    assert hb.data_version.counter == 0
    clock.set(10_000)
    (a,) = sends(hb.poll())
    hb.on_register_reply(a.name_server, a.request_id, r.RegisterResult(accepted=True))
    assert dict(hb.order_topic_config or {}) == {"A": "x"}  # no body: nothing applied


def test_permission_change_round_does_not_check_order_config() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = make(clock)
    Servers(clock).serve(hb, hb.start())
    a, _ = sends(hb.set_broker_permission(r.Perm.READ, now_ms=5))
    hb.on_register_reply(a.name_server, a.request_id, r.RegisterResult(accepted=True),
                         kv_table={"A": "x"})
    assert not hb.topics["A"].order  # registerBrokerAll(false, ...)


def test_a_bad_kv_table_is_refused_and_changes_nothing() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = make(clock)
    a, _ = sends(hb.start())
    with pytest.raises(r.InvalidRequest, match="kv_table"):
        hb.on_register_reply(a.name_server, a.request_id, r.RegisterResult(accepted=True),
                             kv_table={"A": 3})  # type: ignore[dict-item]
    assert hb.registering and hb.master_addr is None
    with pytest.raises(r.InvalidRequest, match="kv_table"):
        hb.on_register_reply(a.name_server, a.request_id, r.RegisterResult(accepted=True),
                             kv_table="A")  # type: ignore[arg-type]


# =========================================================================== invariant

_names = st.sampled_from(["T1", "T2", "T3", "T4", "T5"])
_changes = st.lists(st.tuples(_names, st.integers(1, 8), st.booleans()), min_size=1,
                    max_size=12)


@settings(max_examples=60, deadline=None)
@given(changes=_changes, single=st.booleans(), delete_by_omission=st.booleans())
def test_every_name_server_follows_the_brokers_table(
        changes: list[tuple[str, int, bool]], single: bool, delete_by_omission: bool) -> None:
    """After any sequence of topic updates, each name server's rows for the group equal the
    broker's table (queue counts and perm), in both modes, with or without deletion by
    omission."""
    clock = r.ManualClock(start_ms=0)
    servers = Servers(clock, delete_topic_with_broker_registration=delete_by_omission)
    hb = make(clock, topics=("Base1", "Base2"), enable_single_topic_register=single)
    servers.serve(hb, hb.start())
    for i, (name, queues, readonly) in enumerate(changes, start=1):
        perm = r.Perm.READ if readonly else r.Perm.READ | r.Perm.WRITE
        servers.serve(hb, hb.update_topics(
            [r.TopicConfig(topic_name=name, read_queue_nums=queues, write_queue_nums=queues,
                           perm=perm)], now_ms=i))
        assert not hb.registering
        for ns in NS:
            rows = servers.rows(ns)
            assert set(rows) == set(hb.topics)
            for t in hb.topics.values():
                assert (rows[t.topic_name].read_queue_nums, rows[t.topic_name].perm) == (
                    t.read_queue_nums, t.perm)
