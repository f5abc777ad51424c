"""`RouteInfoManager.register`: every step of Java §2.1 plus decisions D3 and D12."""

from __future__ import annotations

import gc
import weakref

import pytest

import routing as r
from core_helpers import observable, reg, route_brokers, topics


@pytest.fixture
def clock() -> r.ManualClock:
    return r.ManualClock(start_ms=1_000)


@pytest.fixture
def mgr(clock: r.ManualClock) -> r.RouteInfoManager:
    return r.RouteInfoManager(clock=clock)


def test_first_registration_creates_cluster_group_rows_and_live_entry(mgr):
    res = mgr.register(reg("a", 0, "h:1", topic_names=("T1", "T2")))
    assert res.accepted and res.rejection is None and res.generation == 1
    info = mgr.cluster_info()
    assert dict(info.cluster_addr_table) == {"c1": frozenset({"a"})}
    assert dict(info.broker_addr_table["a"].broker_addrs) == {0: "h:1"}
    assert mgr.all_topics() == ("T1", "T2")
    live = mgr.live_brokers()[r.BrokerAddr(cluster="c1", addr="h:1")]
    assert (live.last_update_timestamp, live.heartbeat_timeout_ms) == (1_000, 120_000)
    mgr.check_invariants()


def test_group_rejoining_under_new_cluster_appears_in_both_and_keeps_its_cluster(mgr):
    mgr.register(reg("a", 0, "h:1", cluster="c1"))
    mgr.register(reg("a", 0, "h:1", cluster="c2"))
    info = mgr.cluster_info()
    assert dict(info.cluster_addr_table) == {"c1": frozenset({"a"}), "c2": frozenset({"a"})}
    assert info.broker_addr_table["a"].cluster == "c1"  # frozen at creation, as Java
    mgr.check_invariants()


def test_zone_and_acting_master_flags_are_last_writer_wins(mgr):
    mgr.register(reg("a", 0, "h:1", zone_name="z1", enable_acting_master=True))
    mgr.register(reg("a", 1, "h:2", zone_name=None, enable_acting_master=False))
    group = mgr.cluster_info().broker_addr_table["a"]
    assert (group.zone_name, group.enable_acting_master) == (None, False)
    # an old (pre-5.0) broker: enable_acting_master None means False on the group
    mgr.register(reg("a", 0, "h:1", zone_name="z2", enable_acting_master=None))
    group = mgr.cluster_info().broker_addr_table["a"]
    assert (group.zone_name, group.enable_acting_master) == ("z2", False)
    assert mgr.pickup_route("T1").broker_datas[0].zone_name == "z2"


def test_slave_to_master_switch_removes_the_old_id_of_that_address(mgr):
    mgr.register(reg("a", 0, "h:1"))
    mgr.register(reg("a", 1, "h:2"))
    # master dies; the slave at h:2 comes back as id 0
    mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)
    res = mgr.register(reg("a", 0, "h:2"))
    assert res.accepted
    assert route_brokers(mgr, "T1") == {"a": {0: "h:2"}}
    mgr.check_invariants()


def test_stale_state_version_is_rejected_and_changes_nothing(mgr, clock):
    mgr.register(reg("a", 0, "h:1", version=r.DataVersion(state_version=5, counter=1)))
    clock.advance(10)
    before = observable(mgr)
    res = mgr.register(reg("a", 0, "h:9", topic_names=("T1", "T9"),
                           version=r.DataVersion(state_version=4, counter=9)))
    assert not res.accepted
    assert "stale state_version 4" in res.rejection and "h:1" in res.rejection
    assert res.generation is None
    assert observable(mgr) == before  # D3: no table, no liveness refresh, no new live entry
    mgr.check_invariants()


def test_equal_or_newer_state_version_takes_the_id_over(mgr):
    mgr.register(reg("a", 0, "h:1", version=r.DataVersion(state_version=5, counter=1)))
    res = mgr.register(reg("a", 0, "h:9", version=r.DataVersion(state_version=5, counter=2)))
    assert res.accepted
    assert route_brokers(mgr, "T1") == {"a": {0: "h:9"}}


def test_single_topic_guard_rejects_unknown_id_and_changes_nothing(mgr):
    mgr.register(reg("a", 0, "h:1"))
    before = observable(mgr)
    res = mgr.register(reg("a", 1, "h:2", topic_names=("ONLY",)))
    assert not res.accepted and "single-topic" in res.rejection
    assert observable(mgr) == before
    # a brand-new group too (Java leaves an empty BrokerData behind; we leave nothing)
    res = mgr.register(reg("b", 0, "h:3", topic_names=("ONLY",)))
    assert not res.accepted
    assert observable(mgr) == before
    mgr.check_invariants()


def test_single_topic_registration_of_a_known_id_is_accepted(mgr):
    mgr.register(reg("a", 0, "h:1", topic_names=("T1", "T2")))
    res = mgr.register(reg("a", 0, "h:1", topic_names=("T3",),
                           version=r.DataVersion(counter=2), partial=True))
    assert res.accepted
    assert mgr.all_topics() == ("T1", "T2", "T3")


def test_only_master_writes_topics_when_a_master_exists(mgr):
    mgr.register(reg("a", 0, "h:1", topic_names=("T1", "T2")))
    mgr.register(reg("a", 1, "h:2", topic_names=("S1", "S2"), enable_acting_master=False))
    assert mgr.all_topics() == ("T1", "T2")


def test_prime_slave_writes_topics_when_no_master_exists(mgr):
    # new-version slave with the smallest id and no id 0: a "prime slave"
    res = mgr.register(reg("a", 1, "h:2", topic_names=("S1", "S2"), enable_acting_master=False))
    assert res.accepted
    assert mgr.all_topics() == ("S1", "S2")
    assert mgr.pickup_route("S1").queue_datas[0].perm == r.Perm.READ | r.Perm.WRITE


def test_old_version_slave_never_writes_topics(mgr):
    mgr.register(reg("a", 1, "h:2", topic_names=("S1", "S2"), enable_acting_master=None))
    assert mgr.all_topics() == ()
    assert mgr.cluster_info().broker_addr_table["a"].broker_addrs == {1: "h:2"}


def test_prime_slave_in_acting_master_mode_loses_the_write_bit(mgr):
    topic_table = topics("S1", "S2")
    registration = reg("a", 1, "h:2", topics=topic_table, enable_acting_master=True)
    mgr.register(registration)
    assert {q.perm for q in mgr.pickup_route("S1").queue_datas} == {r.Perm.READ}
    # Java mutates the caller's TopicConfig; we do not
    assert registration.topics["S1"].perm == r.Perm.READ | r.Perm.WRITE


def test_unchanged_version_leaves_existing_rows_alone(mgr):
    v = r.DataVersion(counter=1)
    mgr.register(reg("a", 0, "h:1", version=v, topics=topics("T1", "T2", queues=4)))
    mgr.register(reg("a", 0, "h:1", version=v, topics=topics("T1", "T2", queues=8)))
    assert mgr.pickup_route("T1").queue_datas[0].write_queue_nums == 4
    mgr.register(reg("a", 0, "h:1", version=v.next(5), topics=topics("T1", "T2", queues=8)))
    assert mgr.pickup_route("T1").queue_datas[0].write_queue_nums == 8


def test_the_manager_does_not_keep_a_registrations_topic_table_alive(mgr):
    """The unchanged-table fast path holds the last table weakly (the port keeps none)."""
    registration = reg("a", 0, "h:1", topic_names=("T1", "T2", "T3"))
    table = weakref.ref(registration.topics)
    assert mgr.register(registration).accepted
    del registration
    gc.collect()
    assert table() is None


@pytest.mark.parametrize("delete_by_omission", [False, True])
def test_an_equal_table_after_the_last_one_died_changes_nothing(clock, delete_by_omission):
    """Without the last table to compare with, an unchanged re-registration checks row by
    row and still changes nothing: same snapshots, same versions, no event."""
    events: list[r.RouteChange] = []
    mgr = r.RouteInfoManager(clock=clock, listener=events.append, config=r.RoutingConfig(
        delete_topic_with_broker_registration=delete_by_omission))
    v = r.DataVersion(counter=1)
    mgr.register(reg("a", 0, "h:1", version=v, topics=topics("T1", "T2", queues=4)))
    gc.collect()
    before = {t: (mgr.pickup_route(t), mgr.route_version(t)) for t in ("T1", "T2")}
    events.clear()
    assert mgr.register(reg("a", 0, "h:1", version=v, topics=topics("T1", "T2", queues=4))).accepted
    assert {t: (mgr.pickup_route(t), mgr.route_version(t)) for t in ("T1", "T2")} == before
    assert all(mgr.pickup_route(t) is before[t][0] for t in before)
    assert [e.changed_topics for e in events] == [frozenset()]  # the refresh, no route change
    mgr.check_invariants()


def test_unchanged_version_repairs_missing_rows(mgr):
    v = r.DataVersion(counter=1)
    registration = reg("a", 0, "h:1", version=v)
    mgr.register(registration)
    mgr.delete_topic("T1")
    assert mgr.pickup_route("T1") is None
    mgr.register(registration)  # same object, same version: the fast path must not skip this
    assert route_brokers(mgr, "T1") == {"a": {0: "h:1"}}
    mgr.check_invariants()


def test_unchanged_version_keeps_a_wiped_write_bit(mgr):
    registration = reg("a", 0, "h:1")
    mgr.register(registration)
    assert mgr.wipe_write_perm("a") == 2
    mgr.register(registration)
    assert not mgr.pickup_route("T1").queue_datas[0].writable
    mgr.register(reg("a", 0, "h:1", version=r.DataVersion(counter=2)))
    assert mgr.pickup_route("T1").queue_datas[0].writable


def test_delete_by_omission_is_off_by_default(mgr):
    mgr.register(reg("a", 0, "h:1", topic_names=("T1", "T2")))
    mgr.register(reg("a", 0, "h:1", topic_names=("T1", "T3"), version=r.DataVersion(counter=2)))
    assert mgr.all_topics() == ("T1", "T2", "T3")


def test_delete_by_omission_removes_missing_topics_but_not_for_partial(clock):
    mgr = r.RouteInfoManager(clock=clock, config=r.RoutingConfig(
        delete_topic_with_broker_registration=True))
    mgr.register(reg("a", 0, "h:1", topic_names=("T1", "T2", "T3")))
    mgr.register(reg("a", 0, "h:1", topic_names=("T1", "T4"), partial=True))
    assert mgr.all_topics() == ("T1", "T2", "T3", "T4")  # D12: a chunk deletes nothing
    mgr.register(reg("a", 0, "h:1", topic_names=("T1", "T2")))  # unchanged version: still runs
    assert mgr.all_topics() == ("T1", "T2")
    mgr.check_invariants()


def test_delete_by_omission_is_skipped_when_static_mappings_are_sent(clock):
    mgr = r.RouteInfoManager(clock=clock, config=r.RoutingConfig(
        delete_topic_with_broker_registration=True))
    mgr.register(reg("a", 0, "h:1", topic_names=("T1", "T2")))
    info = r.TopicQueueMappingInfo(topic="T1", bname="a", total_queues=4)
    mgr.register(reg("a", 0, "h:1", topic_names=("T1", "X"), version=r.DataVersion(counter=2),
                     topic_queue_mappings={"T1": info}))
    assert mgr.all_topics() == ("T1", "T2", "X")
    assert dict(mgr.pickup_route("T1").topic_queue_mapping_by_broker) == {"a": info}


def test_static_mappings_are_stored_by_bname_and_survive_topic_deletion(mgr):
    info = r.TopicQueueMappingInfo(topic="T1", bname="other", total_queues=4)
    mgr.register(reg("a", 0, "h:1", topic_queue_mappings={"T1": info}))
    assert dict(mgr.pickup_route("T1").topic_queue_mapping_by_broker) == {"other": info}
    mgr.delete_topic("T1")
    mgr.register(reg("a", 0, "h:1", version=r.DataVersion(counter=2)))
    assert dict(mgr.pickup_route("T1").topic_queue_mapping_by_broker) == {"other": info}


def test_filter_servers_none_keeps_empty_removes_list_stores(mgr):
    mgr.register(reg("a", 0, "h:1", filter_servers=["f:1", "f:2"]))
    assert dict(mgr.pickup_route("T1").filter_server_table) == {"h:1": ("f:1", "f:2")}
    mgr.register(reg("a", 0, "h:1", filter_servers=None))
    assert dict(mgr.pickup_route("T1").filter_server_table) == {"h:1": ("f:1", "f:2")}
    mgr.register(reg("a", 0, "h:1", filter_servers=[]))
    assert dict(mgr.pickup_route("T1").filter_server_table) == {}
    mgr.check_invariants()


def test_slave_gets_master_and_ha_address_only_when_master_is_live(mgr):
    mgr.register(reg("a", 0, "h:1", ha_server_addr="h:11"))
    res = mgr.register(reg("a", 1, "h:2"))
    assert (res.master_addr, res.ha_server_addr) == ("h:1", "h:11")
    master = mgr.register(reg("a", 0, "h:1", ha_server_addr="h:11"))
    assert (master.master_addr, master.ha_server_addr) == (None, None)
    # master id present but its live entry gone (its unregister hit another group name)
    mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="zzz", broker_id=0)
    res = mgr.register(reg("a", 1, "h:2"))
    assert (res.master_addr, res.ha_server_addr) == (None, None)


def test_timeout_comes_from_each_registration(mgr):
    mgr.register(reg("a", 0, "h:1", heartbeat_timeout_ms=10_000))
    key = r.BrokerAddr(cluster="c1", addr="h:1")
    assert mgr.live_brokers()[key].heartbeat_timeout_ms == 10_000
    mgr.register(reg("a", 0, "h:1"))  # omitted: back to the default, as Java
    assert mgr.live_brokers()[key].heartbeat_timeout_ms == 120_000


def test_min_broker_id_change_notifies_when_enabled(clock):
    mgr = r.RouteInfoManager(clock=clock, config=r.RoutingConfig(
        notify_min_broker_id_changed=True))
    mgr.register(reg("a", 2, "h:3", enable_acting_master=False))
    mgr.register(reg("a", 3, "h:4", enable_acting_master=False))
    res = mgr.register(reg("a", 1, "h:2", enable_acting_master=False, ha_server_addr="h:22"))
    (notice,) = res.notifications
    assert (notice.min_broker_id, notice.min_broker_addr) == (1, "h:2")
    assert notice.offline_broker_addr is None and notice.ha_broker_addr == "h:22"
    assert notice.recipients == ("h:3", "h:4")  # everyone but the new smallest id
    assert mgr.register(reg("a", 4, "h:5", enable_acting_master=False)).notifications == ()


def test_min_broker_id_change_is_silent_by_default(mgr):
    mgr.register(reg("a", 2, "h:3"))
    assert mgr.register(reg("a", 1, "h:2")).notifications == ()


def test_generation_grows_with_every_accepted_registration(mgr):
    gens = [mgr.register(reg("a", 0, "h:1")).generation for _ in range(3)]
    assert gens == sorted(gens) and len(set(gens)) == 3


def test_invalid_input_raises_and_changes_nothing(mgr):
    mgr.register(reg("a", 0, "h:1"))
    before = observable(mgr)
    with pytest.raises(r.InvalidRequest, match="registration"):
        mgr.register("not a registration")  # type: ignore[arg-type]
    with pytest.raises(r.InvalidRequest, match="hashable"):
        mgr.register(reg("a", 1, "h:2", channel=[1, 2]))
    assert observable(mgr) == before


def test_queue_cap_from_config(clock):
    mgr = r.RouteInfoManager(clock=clock, config=r.RoutingConfig(max_queue_nums=8))
    with pytest.raises(r.InvalidRequest, match="max_queue_nums=8") as info:
        mgr.register(reg("a", 0, "h:1", topics=topics("T1", "T2", queues=9)))
    assert info.value.value == 9
    assert mgr.all_topics() == ()


def test_listener_sees_registration_and_changed_topics(clock):
    events: list[r.RouteChange] = []
    mgr = r.RouteInfoManager(clock=clock, listener=events.append)
    registration = reg("a", 0, "h:1")
    mgr.register(registration)
    mgr.register(registration)
    first, second = events
    assert first.changed_topics == {"T1", "T2"} and first.registered[0].first
    assert second.changed_topics == frozenset() and not second.registered[0].first
    assert first.at_ms == 1_000 and first.operation == "register"


def test_full_registration_after_partial_one_deletes_by_omission(clock):
    """Found by RouteStateMachine: the O(1) unchanged-table path must not skip the omission
    step after a partial application of the same table and version."""
    mgr = r.RouteInfoManager(clock=clock, config=r.RoutingConfig(
        delete_topic_with_broker_registration=True))
    assert mgr.register(reg("b", 0, "h:1", topic_names=("A", "B"))).accepted
    v2 = r.DataVersion(counter=2)
    assert mgr.register(reg("b", 0, "h:1", topic_names=("A", "C"), version=v2,
                            partial=True)).accepted
    assert mgr.all_topics() == ("A", "B", "C")  # D12: a partial registration deletes nothing
    assert mgr.register(reg("b", 0, "h:1", topic_names=("A", "C"), version=v2)).accepted
    assert mgr.all_topics() == ("A", "C")
    mgr.check_invariants()
