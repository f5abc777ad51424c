"""Manager snapshots: `snapshot_manager` → JSON → `restore_manager` gives a manager that
answers every later call exactly as the original: results, events, routes, route versions,
final state. Hypothesis drives it with the shipped operation strategies and state machine."""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from routing.testing import FakeClock, RouteStateMachine, run_operations
from routing.testing import strategies as rst

START = st.sampled_from([0, 1_700_000_000_000])


def _round_trip(snapshot: r.ManagerSnapshot) -> r.ManagerSnapshot:
    """Through the JSON text, as the journal carries it."""
    return r.ManagerSnapshot.from_json(json.loads(json.dumps(snapshot.to_json())))


def _observable(manager: r.RouteInfoManager) -> dict[str, Any]:
    """Everything a caller can read, the routes' versions included."""
    topics = manager.all_topics()
    return {
        "routes": {t: manager.stored_route(t) for t in topics},
        "versions": {t: manager.route_version(t) for t in topics},
        "live": dict(manager.live_brokers()),
        "channels": {k: v.channel for k, v in manager.live_brokers().items()},
        "clusters": manager.cluster_info(),
        "system": manager.system_topics(),
        "units": (manager.unit_topics(), manager.has_unit_sub_topics(),
                  manager.has_unit_sub_non_unit_topics()),
    }


@given(ops=rst.operation_sequences(max_size=40), config=rst.routing_configs(), start=START,
       data=st.data())
@settings(max_examples=max(25, settings().max_examples))
def test_restored_manager_continues_as_the_original(ops, config, start, data):
    cut = data.draw(st.integers(0, len(ops)), label="cut")
    clock = FakeClock(start)
    events: list[r.RouteChange] = []
    whole = r.RouteInfoManager(clock=clock, config=config, listener=events.append)
    expected = run_operations(whole, ops, clock=clock)

    clock2 = FakeClock(start)
    events2: list[r.RouteChange] = []
    first = r.RouteInfoManager(clock=clock2, config=config, listener=events2.append)
    before = run_operations(first, ops[:cut], clock=clock2)
    snapshot = _round_trip(r.snapshot_manager(first))
    restored = r.restore_manager(snapshot, clock=clock2, listener=events2.append)
    after = run_operations(restored, ops[cut:], clock=clock2)

    assert before + after == expected
    assert events2 == events
    restored.check_invariants()
    assert r.snapshot_manager(restored) == r.snapshot_manager(whole)
    assert _observable(restored) == _observable(whole)


class RestoringSystem:
    """A manager that, after every write call, is replaced by its own restored snapshot
    (through JSON): the state machine then checks restored managers against the model."""

    def __init__(self, clock: FakeClock, config: r.RoutingConfig) -> None:
        self.clock = clock
        self.m = r.RouteInfoManager(clock=clock, config=config)
        self.restores = 0

    def _again(self, result: Any) -> Any:
        before = r.snapshot_manager(self.m)
        self.m = r.restore_manager(_round_trip(before), clock=self.clock)
        assert r.snapshot_manager(self.m) == before
        self.restores += 1
        return result

    def register(self, registration: r.Registration) -> r.RegisterResult:
        return self._again(self.m.register(registration))

    def heartbeat(self, *, cluster: str, broker_addr: str) -> bool:
        return self._again(self.m.heartbeat(cluster=cluster, broker_addr=broker_addr))

    def query_data_version(self, **kw: Any) -> r.VersionAnswer:
        return self._again(self.m.query_data_version(**kw))

    def scan_expired(self) -> tuple[r.ExpiredBroker, ...]:
        return self._again(self.m.scan_expired())

    def unregister(self, **kw: Any) -> bool:
        return self._again(self.m.unregister(**kw))

    def on_channel_closed(self, channel: Hashable | None) -> tuple[r.ExpiredBroker, ...]:
        return self._again(self.m.on_channel_closed(channel))

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        return self._again(self.m.delete_topic(topic, cluster))

    def wipe_write_perm(self, broker_name: str) -> int:
        return self._again(self.m.wipe_write_perm(broker_name))

    def add_write_perm(self, broker_name: str) -> int:
        return self._again(self.m.add_write_perm(broker_name))

    def register_topic(self, topic: str, queue_datas: Any) -> None:
        return self._again(self.m.register_topic(topic, queue_datas))

    def __getattr__(self, name: str) -> Any:  # reads: pickup_route, listings, invariants
        return getattr(self.m, name)


class RestoringMachine(RouteStateMachine):
    """Every rule of the shipped machine, on a manager restored after every call."""

    def make_system(self, *, clock, config):
        return RestoringSystem(clock, config)


class RestoringActingMasterMachine(RestoringMachine):
    def fleet_strategy(self):
        return rst.fleets(acting=st.just(True))

    def config_strategy(self):
        return rst.routing_configs(support_acting_master=st.just(True))


TestRestoringMachine = RestoringMachine.TestCase
TestRestoringMachine.settings = settings(stateful_step_count=25)
TestRestoringActingMasterMachine = RestoringActingMasterMachine.TestCase
TestRestoringActingMasterMachine.settings = settings(
    max_examples=max(10, settings().max_examples // 4), stateful_step_count=25)


# --------------------------------------------------------------------------- details


def _registered(config: r.RoutingConfig | None = None, *, channel: Hashable | None = 7,
                start: int = 0) -> tuple[FakeClock, r.RouteInfoManager]:
    clock = FakeClock(start)
    mgr = r.RouteInfoManager(clock=clock, config=config)
    for bid, addr in ((0, "10.0.0.1:10911"), (1, "10.0.0.2:10911")):
        assert mgr.register(r.Registration(
            cluster="c", broker_name="b", broker_id=bid, broker_addr=addr, channel=channel,
            heartbeat_timeout_ms=10_000, filter_servers=("10.0.0.9:1",) if bid else None,
            topics={t: r.TopicConfig(topic_name=t) for t in ("T", "U")})).accepted
    return clock, mgr


def test_the_json_form_is_compact_and_ordered():
    _clock, mgr = _registered()
    doc = r.snapshot_manager(mgr).to_json()
    assert doc["format"] == r.SNAPSHOT_FORMAT == 1
    assert doc["rows"] == [["b", 16, 16, 6, 0]]  # one row object, shared by both topics
    assert [t[0] for t in doc["topics"]] == ["T", "U"]
    assert [t[2] for t in doc["topics"]] == [[0], [0]]
    assert doc["live"][1] == ["c", "10.0.0.2:10911", "b", 1, 0, 10_000, [0, 0, 0], 7, None,
                              2, ["10.0.0.9:1"]]
    assert doc["groups"] == [["b", "c", None, False, [[0, "10.0.0.1:10911"],
                                                      [1, "10.0.0.2:10911"]]]]


def test_restore_keeps_the_clock_clamp_and_the_readiness_window():
    config = r.RoutingConfig(wait_for_service_ms=50_000)
    clock, mgr = _registered(config, start=1_000)
    clock.advance(20_000)
    assert mgr.heartbeat(cluster="c", broker_addr="10.0.0.1:10911")
    snap = r.snapshot_manager(mgr)
    assert (snap.started_ms, snap.last_ms) == (1_000, 21_000)
    behind = FakeClock(5_000)  # a clock behind the snapshot reads as its last time
    restored = r.restore_manager(_round_trip(snap), clock=behind)
    assert restored.heartbeat(cluster="c", broker_addr="10.0.0.1:10911")
    assert restored.live_brokers()[r.BrokerAddr(cluster="c", addr="10.0.0.1:10911")
                                   ].last_update_timestamp == 21_000
    with pytest.raises(r.NotReady) as caught:
        restored.pickup_route("T")
    assert caught.value.ready_at_ms == 51_000


def test_an_opaque_channel_needs_a_codec():
    _clock, mgr = _registered(channel=object())
    snap = r.snapshot_manager(mgr)
    with pytest.raises(r.InvalidRequest, match="encode_channel"):
        snap.to_json()
    handles: dict[object, int] = {}
    doc = snap.to_json(lambda ch: {"ref": handles.setdefault(ch, len(handles) + 1)})
    assert [entry[7] for entry in doc["live"]] == [{"ref": 1}, {"ref": 1}]


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d.update(format=2), "snapshot.format"),
    (lambda d: d.update(extra=1), "snapshot"),
    (lambda d: d.pop("live"), "snapshot"),
    (lambda d: d["live"][0].__setitem__(1, "no-port"), "snapshot.live[0].broker_addr"),
    (lambda d: d["live"][0].__setitem__(4, -1), "snapshot.live[0].last_update_ms"),
    (lambda d: d["live"][0].pop(), "snapshot.live[0]"),
    (lambda d: d["rows"][0].__setitem__(1, "8"), "snapshot.rows[0][1]"),
    (lambda d: d["topics"][0][2].append(5), "snapshot.topics[0].rows[1]"),
    (lambda d: d["topics"][0][2].append(0), "snapshot.topics[0].rows"),
    (lambda d: d["topics"][0].__setitem__(0, "bad topic"), "snapshot.topics[0][0]"),
    (lambda d: d["topics"].append(list(d["topics"][0])), "snapshot"),
    (lambda d: d["groups"][0][4].append([0, "10.0.0.3:1"]), "snapshot.groups[0].members[2][0]"),
    (lambda d: d["config"].update(nope=1), "snapshot.config"),
    (lambda d: d["config"].update(default_heartbeat_timeout_ms=0), "snapshot.config"),
])
def test_a_malformed_snapshot_is_refused_naming_the_field(edit, field):
    _clock, mgr = _registered()
    doc = json.loads(json.dumps(r.snapshot_manager(mgr).to_json()))
    edit(doc)
    with pytest.raises(r.InvalidRequest) as caught:
        r.ManagerSnapshot.from_json(doc)
    assert caught.value.field == field
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["rows"][0].__setitem__(0, "ghost"), "snapshot.topics['T'].rows"),
    (lambda d: d["clusters"].update(c=["b", "ghost"]), "snapshot.clusters['c']"),
    (lambda d: d["clusters"].update(c=[], d=["b"]), "snapshot.clusters['c']"),
    (lambda d: d.update(route_version=1), "snapshot.topics['T'].version"),
    (lambda d: d.update(generation=1), "snapshot.live['c', '10.0.0.2:10911'].generation"),
    (lambda d: d.update(last_ms=0, started_ms=5), "snapshot.last_ms"),
    (lambda d: d["topics"][0].__setitem__(1, d["topics"][1][1]), "snapshot"),  # shared
])
def test_disagreeing_tables_are_refused_by_restore(edit, field):
    _clock, mgr = _registered()
    doc = json.loads(json.dumps(r.snapshot_manager(mgr).to_json()))
    edit(doc)
    snap = r.ManagerSnapshot.from_json(doc)
    with pytest.raises(r.InvalidRequest) as caught:
        r.restore_manager(snap, clock=FakeClock(0))
    assert caught.value.field == field


def test_equal_states_give_equal_snapshots_whatever_the_insertion_order():
    clock = FakeClock(0)
    a, b = r.RouteInfoManager(clock=clock), r.RouteInfoManager(clock=clock)
    regs = [r.Registration(cluster="c", broker_name=f"g{i}", broker_id=0,
                           broker_addr=f"10.0.0.{i}:10911", channel=i,
                           topics={t: r.TopicConfig(topic_name=t) for t in (f"g{i}", "X")})
            for i in (1, 2)]
    for reg in regs:
        a.register(reg)
    for reg in reversed(regs):
        b.register(reg)
    sa, sb = r.snapshot_manager(a).to_json(), r.snapshot_manager(b).to_json()
    for doc in (sa, sb):  # the generations and versions differ by order: not the tables
        doc["generation"] = 0
        doc["route_version"] = 0
        for t in doc["topics"]:
            t[1] = 0
        for entry in doc["live"]:
            entry[9] = 0
    assert json.dumps(sa) == json.dumps(sb)


def test_filter_servers_mappings_and_zones_survive_a_restore():
    clock = FakeClock(0)
    mgr = r.RouteInfoManager(clock=clock, config=r.RoutingConfig(support_acting_master=True))
    info = r.TopicQueueMappingInfo(topic="S", bname="b", total_queues=2, epoch=3,
                                   curr_id_map={0: 1})
    assert mgr.register(r.Registration(
        cluster="c", broker_name="b", broker_id=0, broker_addr="10.0.0.1:10911",
        zone_name="z1", enable_acting_master=True, filter_servers=("10.0.0.9:1",),
        topic_queue_mappings={"S": info}, ha_server_addr="10.0.0.1:10912",
        topics={t: r.TopicConfig(topic_name=t, topic_sys_flag=1) for t in ("S", "T")})).accepted
    restored = r.restore_manager(_round_trip(r.snapshot_manager(mgr)), clock=clock)
    assert _observable(restored) == _observable(mgr)
    route = restored.pickup_route("S")
    assert dict(route.filter_server_table) == {"10.0.0.1:10911": ("10.0.0.9:1",)}
    assert dict(route.topic_queue_mapping_by_broker) == {"b": info}
    assert route.broker_datas[0].zone_name == "z1"
    assert restored.unit_topics() == ("S", "T")
    assert mgr.delete_topic("S") and restored.delete_topic("S")
    assert r.snapshot_manager(restored) == r.snapshot_manager(mgr)  # the mapping stays
    assert [m.topic for m in r.snapshot_manager(restored).mappings] == ["S"]
