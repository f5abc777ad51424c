"""routing.testing.strategies: valid values, invalid values, fleets, operations, from_type."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import routing as r
from routing._validate import check_addr, check_name, check_topic
from routing.testing import (
    AdvanceOp,
    FakeClock,
    Fleet,
    Operation,
    RegisterOp,
    RouteModel,
    apply_operation,
    describe,
)
from routing.testing import strategies as rst


@given(name=rst.names(), topic=rst.topic_names(), addr=rst.addresses())
def test_names_topics_and_addresses_are_valid(name: str, topic: str, addr: str) -> None:
    assert check_name("n", name) == name
    assert check_topic("t", topic) == topic
    assert check_addr("a", addr) == addr


@given(value=rst.invalid_names())
def test_invalid_names_are_rejected(value: Any) -> None:
    with pytest.raises(r.InvalidRequest):
        r.BrokerAddr(cluster=value, addr="10.0.0.1:1")


@given(value=rst.invalid_topic_names())
def test_invalid_topic_names_are_rejected(value: Any) -> None:
    with pytest.raises(r.InvalidRequest):
        r.TopicConfig(topic_name=value)


@given(value=rst.invalid_addresses())
def test_invalid_addresses_are_rejected(value: Any) -> None:
    with pytest.raises(r.InvalidRequest):
        r.BrokerAddr(cluster="c", addr=value)


@given(table=rst.topic_tables(min_size=1))
def test_topic_tables_are_keyed_by_topic_name(table: dict[str, r.TopicConfig]) -> None:
    assert all(k == v.topic_name for k, v in table.items())
    r.Registration(cluster="c", broker_name="b", broker_id=0, broker_addr="1.2.3.4:5",
                   topics=table)


@given(fleet=rst.fleets())
def test_fleets_are_coherent(fleet: Fleet) -> None:
    names = [g.broker_name for g in fleet.groups]
    addrs = [b.broker_addr for b in fleet.brokers]
    assert len(set(names)) == len(names) and len(set(addrs)) == len(addrs)
    assert all(m.cluster == g.cluster and m.broker_name == g.broker_name
               for g in fleet.groups for m in g.members)
    assert all(len({m.home_id for m in g.members}) == len(g.members) for g in fleet.groups)
    assert len(fleet.topics) >= 2 and not set(fleet.strangers) & set(addrs)
    assert fleet.group(names[0]).broker_name == names[0]
    with pytest.raises(KeyError):
        fleet.group("no-such-group")


@given(group=rst.broker_groups(max_members=3))
def test_broker_groups_have_distinct_ids_and_addresses(group: Any) -> None:
    assert 1 <= len(group.members) <= 3
    assert len({m.broker_addr for m in group.members}) == len(group.members)


@given(route=rst.topic_route_datas())
def test_routes_are_coherent_and_sorted(route: r.TopicRouteData) -> None:
    names = [q.broker_name for q in route.queue_datas]
    assert names == sorted(names) == [b.broker_name for b in route.broker_datas]
    assert all(b.broker_addrs for b in route.broker_datas)


@given(data=st.data())
def test_registrations_for_a_fleet_come_from_its_brokers(data: st.DataObject) -> None:
    fleet = data.draw(rst.fleets())
    reg = data.draw(rst.registrations(fleet=fleet))
    spec = next(b for b in fleet.brokers if b.broker_addr == reg.broker_addr)
    assert (reg.cluster, reg.broker_name, reg.broker_id) == (
        spec.cluster, spec.broker_name, spec.home_id)
    assert set(reg.topics) <= set(fleet.topics)
    assert reg.enable_acting_master == fleet.group(spec.broker_name).enable_acting_master


@given(ops=rst.operation_sequences(max_size=40))
def test_operation_sequences_replay_identically_on_manager_and_model(
        ops: list[Operation]) -> None:
    clock = FakeClock(0)
    mgr = r.RouteInfoManager(clock=clock)
    model = RouteModel()
    for op in ops:
        assert apply_operation(mgr, op, clock=clock) == model.apply(op), describe(op)
    mgr.check_invariants()
    for topic in model.topics():
        assert mgr.pickup_route(topic) == model.route(topic)


@pytest.mark.parametrize("cls", [
    r.DataVersion, r.TopicConfig, r.QueueData, r.BrokerData, r.BrokerAddr, r.BrokerLiveInfo,
    r.TopicRouteData, r.Registration, r.UnregisterRequest, r.RoutingConfig, r.Perm,
    r.TopicSysFlag, Fleet, RegisterOp, AdvanceOp,
])
def test_from_type_is_registered_through_the_entry_point(cls: type) -> None:
    @given(value=st.from_type(cls))
    def check(value: Any) -> None:
        assert isinstance(value, cls)

    check()


@pytest.mark.parametrize("program", [
    # hypothesis first: its entry point imports routing.testing.strategies, which registers
    "from hypothesis import strategies as st\nimport routing as r\n"
    "assert isinstance(st.from_type(r.Registration).example(), r.Registration)",
    # the strategies first: hypothesis runs its entry points while they are half-imported
    # (this used to fail with an AttributeError)
    "import routing.testing.strategies as rst\nfrom hypothesis import strategies as st\n"
    "import routing as r\nassert isinstance(st.from_type(r.QueueData).example(), r.QueueData)",
])
def test_import_order_does_not_matter(program: str) -> None:
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("factory", "kwargs"), [
    (rst.topic_configs, {"queue_nums": 4}),
    (rst.data_versions, {"counters": 1}),
    (rst.addresses, {"hosts": "localhost"}),
    (rst.fleets, {"clusters": "c"}),
    (rst.topic_tables, {"configs": [r.TopicConfig(topic_name="T")]}),
])
def test_arguments_must_be_strategies(factory: Any, kwargs: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match=r"must be a hypothesis strategy.*st\.just"):
        factory(**kwargs)


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="min_size"):
        rst.names(min_size=0)
    with pytest.raises(ValueError, match="whitespace"):
        rst.names(alphabet="a b")
    with pytest.raises(ValueError, match="subset"):
        rst.topic_names(alphabet="a.b")
    with pytest.raises(ValueError, match="min_groups"):
        rst.fleets(min_groups=0)
    with pytest.raises(ValueError, match="min_members"):
        rst.broker_groups(min_members=0)
