"""Routes (D4, D10), listings (D8), admin writes (D5, D11), versions and invariants."""

from __future__ import annotations

import pytest

import routing as r
from core_helpers import observable, reg, route_brokers, topics


@pytest.fixture
def clock() -> r.ManualClock:
    return r.ManualClock(start_ms=0)


@pytest.fixture
def mgr(clock: r.ManualClock) -> r.RouteInfoManager:
    return r.RouteInfoManager(clock=clock)


def test_route_lists_are_sorted_by_broker_name(mgr):
    for name in ("zeta", "alpha", "mid"):
        mgr.register(reg(name, 0, topic_names=("T1", "T2")))
    route = mgr.pickup_route("T1")
    assert [q.broker_name for q in route.queue_datas] == ["alpha", "mid", "zeta"]
    assert [b.broker_name for b in route.broker_datas] == ["alpha", "mid", "zeta"]


def test_route_is_a_shared_immutable_snapshot(mgr):
    mgr.register(reg("a", 0, "h:1"))
    first = mgr.pickup_route("T1")
    assert mgr.pickup_route("T1") is first
    version = mgr.route_version("T1")
    mgr.register(reg("a", 1, "h:2"))
    second = mgr.pickup_route("T1")
    assert second is not first and mgr.route_version("T1") > version
    assert dict(first.broker_datas[0].broker_addrs) == {0: "h:1"}  # old snapshot untouched


def test_route_version_unchanged_by_a_refresh_and_unique_across_topics(mgr):
    registration = reg("a", 0, "h:1")
    mgr.register(registration)
    v1, v2 = mgr.route_version("T1"), mgr.route_version("T2")
    assert v1 != v2 and min(v1, v2) > 0
    mgr.register(registration)
    assert (mgr.route_version("T1"), mgr.route_version("T2")) == (v1, v2)
    assert mgr.route_version("unknown") == 0


def test_route_version_goes_with_a_vanished_topic_and_comes_back_higher(mgr, clock):
    """A topic's version leaves with its last row (no per-topic residue under churn); a
    topic that comes back gets a version above every one handed out before."""
    mgr.register(reg("a", 0, "h:1"))
    before = max(mgr.route_version("T1"), mgr.route_version("T2"))
    assert mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)
    assert mgr.route_version("T1") == 0 and mgr.pickup_route("T1") is None
    assert "T1" not in mgr._state.topics  # white box: nothing kept for the topic
    mgr.register(reg("a", 0, "h:1"))
    assert mgr.route_version("T1") > before
    mgr.check_invariants()


def test_unknown_topic_has_no_route(mgr):
    assert mgr.pickup_route("nope") is None
    with pytest.raises(r.InvalidRequest, match="topic"):
        mgr.pickup_route(42)  # type: ignore[arg-type]
    with pytest.raises(r.InvalidRequest, match="topic"):
        mgr.pickup_route(["T1"])  # type: ignore[arg-type]


def test_readiness_gate_opens_at_exactly_start_plus_wait(clock):
    mgr = r.RouteInfoManager(clock=clock, config=r.RoutingConfig(wait_for_service_ms=45_000))
    mgr.register(reg("a", 0, "h:1"))
    clock.set(44_999)
    with pytest.raises(r.NotReady, match="not ready") as info:
        mgr.pickup_route("T1")
    assert info.value.ready_at_ms == 45_000
    assert mgr.stored_route("T1") is not None  # reporting tools can still read the tables
    clock.set(45_000)
    assert mgr.pickup_route("T1") is mgr.stored_route("T1") is not None


def test_wipe_and_add_write_perm_count_topics_and_keep_other_bits(mgr):
    mgr.register(reg("a", 0, "h:1", topics=topics("T1", "T2", perm=7)))  # R W X
    mgr.register(reg("b", 0, "h:2", topic_names=("T3", "T4")))
    assert mgr.wipe_write_perm("a") == 2
    assert mgr.wipe_write_perm("a") == 2  # counts topics touched, not changed (Java)
    assert mgr.pickup_route("T1").queue_datas[0].perm == r.Perm.READ | r.Perm.INHERIT
    assert mgr.pickup_route("T3").queue_datas[0].writable
    assert mgr.add_write_perm("a") == 2
    assert mgr.pickup_route("T1").queue_datas[0].perm == 7  # D5: Java would force 6
    assert mgr.wipe_write_perm("unknown") == 0
    mgr.check_invariants()


def test_delete_topic_everywhere_or_per_cluster(mgr):
    mgr.register(reg("a", 0, "h:1", cluster="c1", topic_names=("T1", "T2")))
    mgr.register(reg("b", 0, "h:2", cluster="c2", topic_names=("T1", "T2")))
    assert not mgr.delete_topic("T1", cluster="unknown")
    assert mgr.delete_topic("T1", cluster="c1")
    assert route_brokers(mgr, "T1") == {"b": {0: "h:2"}}
    assert mgr.delete_topic("T2")
    assert mgr.all_topics() == ("T1",)
    assert not mgr.delete_topic("T2")
    mgr.check_invariants()


def test_register_topic_is_all_or_nothing(mgr):
    mgr.register(reg("a", 0, "h:1"))
    before = observable(mgr)
    with pytest.raises(r.InvalidRequest, match=r"queue_datas\[1\].broker_name") as info:
        mgr.register_topic("T1", [r.QueueData(broker_name="a", write_queue_nums=1),
                                  r.QueueData(broker_name="ghost")])
    assert info.value.value == "ghost"
    assert observable(mgr) == before
    mgr.register_topic("NEW", [])
    assert observable(mgr) == before
    mgr.register_topic("NEW", [r.QueueData(broker_name="a", write_queue_nums=2)])
    assert mgr.pickup_route("NEW").writable_queue_count == 2
    mgr.check_invariants()


def test_listings_are_sorted_and_unknown_cluster_is_empty(mgr):
    mgr.register(reg("b", 0, "h:2", cluster="c2", topic_names=("Z", "A")))
    mgr.register(reg("a", 0, "h:1", cluster="c1", topic_names=("M", "A")))
    assert mgr.all_topics() == ("A", "M", "Z")
    assert mgr.topics_by_cluster("c2") == ("A", "Z")
    assert mgr.topics_by_cluster("nope") == ()
    system = mgr.system_topics()
    assert system.topics == ("a", "b", "c1", "c2")
    assert system.broker_addr == "h:1"  # D8: lowest broker name's lowest id


def test_unit_listings_use_the_lowest_broker_name_row(mgr):
    mgr.register(reg("a", 0, "h:1", topics=topics("U", "S", sys_flag=1)))
    mgr.register(reg("b", 0, "h:2", topics=topics("U", "S", "N", sys_flag=2)))
    # U and S: representative row is broker "a" with the unit flag; N only has "b" (unit-sub)
    assert mgr.unit_topics() == ("S", "U")
    assert mgr.has_unit_sub_topics() == ("N",)
    assert mgr.has_unit_sub_non_unit_topics() == ("N",)
    mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)
    assert mgr.unit_topics() == ()
    assert mgr.has_unit_sub_topics() == ("N", "S", "U")
    mgr.check_invariants()


def test_broker_member_group_and_unknown_group(mgr):
    mgr.register(reg("a", 0, "h:1"))
    mgr.register(reg("a", 1, "h:2"))
    group = mgr.broker_member_group("c1", "a")
    assert dict(group.broker_addrs) == {0: "h:1", 1: "h:2"} and group.minimum_broker_id() == 0
    empty = mgr.broker_member_group("cx", "nope")
    assert (empty.cluster, empty.broker_name, dict(empty.broker_addrs)) == ("cx", "nope", {})
    assert empty.minimum_broker_id() == 0


def test_cluster_info_is_a_snapshot(mgr):
    mgr.register(reg("a", 0, "h:1"))
    info = mgr.cluster_info()
    mgr.register(reg("b", 0, "h:2"))
    assert set(info.broker_addr_table) == {"a"}


def test_check_invariants_reports_every_corruption(mgr):
    mgr.register(reg("a", 0, "h:1"))
    mgr.check_invariants()
    state = mgr._state  # white box: corrupt two indexes on purpose
    from routing._state import TopicEntry
    state.topics_of_group["a"]["GHOST"] = TopicEntry()
    state.groups_of_addr.clear()
    with pytest.raises(r.InvariantViolation) as info:
        mgr.check_invariants()
    assert len(info.value.problems) >= 2
    assert any("group->topics" in p for p in info.value.problems)
    assert any("address->groups" in p for p in info.value.problems)


def test_listener_exceptions_propagate_after_the_write_committed(clock):
    def boom(event: r.RouteChange) -> None:
        raise RuntimeError("listener failed")

    mgr = r.RouteInfoManager(clock=clock, listener=boom)
    with pytest.raises(RuntimeError, match="listener failed"):
        mgr.register(reg("a", 0, "h:1"))
    assert mgr.pickup_route("T1") is not None


def test_clock_stepping_back_is_treated_as_standing_still():
    class Jumpy:
        def __init__(self) -> None:
            self.values = [100, 100, 50, 200]

        def now_ms(self) -> int:
            return self.values.pop(0) if len(self.values) > 1 else self.values[0]

    mgr = r.RouteInfoManager(clock=Jumpy())
    mgr.register(reg("a", 0, "h:1"))  # at 100
    mgr.register(reg("a", 0, "h:1"))  # clock says 50: kept at 100
    live = mgr.live_brokers()[r.BrokerAddr(cluster="c1", addr="h:1")]
    assert live.last_update_timestamp == 100
    mgr.check_invariants()


def test_keep_alives_and_the_scan_treat_a_clock_stepping_back_as_standing_still():
    """heartbeat, query_data_version and scan_expired read the clock on their own paths
    (not through the writes' shared read); a reading below the last one counts as the last."""

    class Scripted:
        def __init__(self) -> None:
            self.now = 1_000

        def now_ms(self) -> int:
            return self.now

    clock = Scripted()
    mgr = r.RouteInfoManager(clock=clock)
    mgr.register(reg("a", 0, "h:1"))
    mgr.register(reg("b", 0, "h:2"))
    clock.now = 5_000
    assert mgr.heartbeat(cluster="c1", broker_addr="h:1")
    clock.now = 2_000  # steps back: every path below acts at 5 000
    assert mgr.heartbeat(cluster="c1", broker_addr="h:2")
    answer = mgr.query_data_version(cluster="c1", broker_addr="h:2",
                                    data_version=r.DataVersion(counter=1))
    assert not answer.changed and answer.stored == r.DataVersion(counter=1)
    assert mgr.scan_expired() == ()
    lives = mgr.live_brokers()
    assert [lives[r.BrokerAddr(cluster="c1", addr=a)].last_update_timestamp
            for a in ("h:1", "h:2")] == [5_000, 5_000]
    clock.now = 125_000  # 5 000 + the 120 000 ms timeout: alive at exactly the deadline
    assert mgr.scan_expired() == ()
    clock.now = 3_000  # back again: the scan still counts 125 000
    assert mgr.scan_expired() == ()
    clock.now = 125_001
    assert sorted(e.broker_addr for e in mgr.scan_expired()) == ["h:1", "h:2"]
    mgr.check_invariants()


def test_query_data_version_compares_every_field_and_the_class():
    """The field-by-field comparison of the keep-alive path answers as ``==`` does."""

    class Derived(r.DataVersion):
        pass

    mgr = r.RouteInfoManager(clock=r.ManualClock(start_ms=0))
    stored = r.DataVersion(state_version=1, timestamp=10, counter=2)
    mgr.register(reg("a", 0, "h:1", version=stored))

    def changed(version: r.DataVersion) -> bool:
        return mgr.query_data_version(cluster="c1", broker_addr="h:1",
                                      data_version=version).changed

    assert not changed(stored)
    assert not changed(r.DataVersion(state_version=1, timestamp=10, counter=2))
    assert changed(r.DataVersion(state_version=0, timestamp=10, counter=2))
    assert changed(r.DataVersion(state_version=1, timestamp=11, counter=2))
    assert changed(r.DataVersion(state_version=1, timestamp=10, counter=3))
    derived = Derived(state_version=1, timestamp=10, counter=2)
    assert changed(derived) is (derived != stored)
