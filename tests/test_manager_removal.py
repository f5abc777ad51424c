"""Unregister (D2, D11), expiry (D1), channel close (D6), acting master (Java §2.4–2.7)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import routing as r
from core_helpers import observable, reg, route_brokers


@pytest.fixture
def clock() -> r.ManualClock:
    return r.ManualClock(start_ms=0)


@pytest.fixture
def mgr(clock: r.ManualClock) -> r.RouteInfoManager:
    return r.RouteInfoManager(clock=clock)


# ------------------------------------------------------------------------- expiry boundary


def test_alive_at_exactly_last_plus_timeout_expired_one_ms_later(mgr, clock):
    mgr.register(reg("a", 0, "h:1", channel="ch"))
    clock.set(120_000)
    assert mgr.scan_expired() == ()
    assert route_brokers(mgr, "T1") == {"a": {0: "h:1"}}
    clock.set(120_001)
    (gone,) = mgr.scan_expired()
    assert gone == r.ExpiredBroker(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0,
                                   channel="ch", last_update_ms=0, timeout_ms=120_000,
                                   generation=1)
    assert gone.channel == "ch"
    assert mgr.pickup_route("T1") is None and mgr.all_topics() == ()
    assert mgr.cluster_info().cluster_addr_table == {}
    assert mgr.scan_expired() == ()
    mgr.check_invariants()


def test_expired_broker_values_are_whole_frozen_values(mgr, clock):
    """The manager builds them without the keyword call (`_messages.expired_broker`); they
    must be indistinguishable from the public constructor's."""
    mgr.register(reg("a", 3, "h:1", channel="ch"))
    clock.set(120_001)
    (gone,) = mgr.scan_expired()
    made = r.ExpiredBroker(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=3,
                           channel="ch", last_update_ms=0, timeout_ms=120_000, generation=1)
    assert gone == made and hash(gone) == hash(made) and repr(gone) == repr(made)
    assert attrs.asdict(gone) == attrs.asdict(made)
    assert attrs.evolve(gone, broker_id=4) == attrs.evolve(made, broker_id=4)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        gone.broker_id = 5  # type: ignore[misc]


def test_expiry_removes_an_address_from_every_group_of_its_cluster(mgr, clock):
    """One address, member of two groups of one cluster (Java removes it from the first
    it finds only): the scan takes it out of both; a broker of another cluster at the same
    address is not touched."""
    mgr.register(reg("a", 0, "h:1", heartbeat_timeout_ms=10_000, topic_names=("T1", "U1")))
    mgr.register(reg("b", 1, "h:1", heartbeat_timeout_ms=10_000, topic_names=("T2", "U2")))
    mgr.register(reg("z", 0, "h:1", cluster="c2", topic_names=("T3", "U3")))
    clock.set(10_001)
    (gone,) = mgr.scan_expired()
    assert (gone.cluster, gone.broker_addr, gone.broker_name) == ("c1", "h:1", "b")
    assert mgr.pickup_route("T1") is None and mgr.pickup_route("T2") is None
    assert route_brokers(mgr, "T3") == {"z": {0: "h:1"}}
    mgr.check_invariants()


def test_per_broker_timeouts_and_refresh(mgr, clock):
    mgr.register(reg("a", 0, "h:1", heartbeat_timeout_ms=10_000))
    mgr.register(reg("b", 0, "h:2"))
    clock.set(9_000)
    assert mgr.heartbeat(cluster="c1", broker_addr="h:1")
    clock.set(19_000)
    assert mgr.scan_expired() == ()
    clock.set(19_001)
    assert [e.broker_addr for e in mgr.scan_expired()] == ["h:1"]
    clock.set(120_001)
    assert [e.broker_addr for e in mgr.scan_expired()] == ["h:2"]
    mgr.check_invariants()


def test_query_data_version_refreshes_liveness_always(mgr, clock):
    v1 = r.DataVersion(counter=1)
    mgr.register(reg("a", 0, "h:1", version=v1))
    clock.set(100_000)
    answer = mgr.query_data_version(cluster="c1", broker_addr="h:1", data_version=v1.next(1))
    assert answer == r.VersionAnswer(changed=True, stored=v1)  # changed, still refreshed (5.x)
    clock.set(220_000)
    assert mgr.scan_expired() == ()
    assert mgr.query_data_version(cluster="c1", broker_addr="h:1", data_version=v1).changed is False
    unknown = mgr.query_data_version(cluster="c1", broker_addr="h:9", data_version=v1)
    assert unknown == r.VersionAnswer(changed=True, stored=None)
    assert mgr.live_brokers().get(r.BrokerAddr(cluster="c1", addr="h:9")) is None


def test_heartbeat_never_creates_an_entry_nor_changes_timeout(mgr, clock):
    assert mgr.heartbeat(cluster="c1", broker_addr="h:1") is False
    assert mgr.live_brokers() == {}
    mgr.register(reg("a", 0, "h:1", heartbeat_timeout_ms=10_000))
    clock.set(5_000)
    assert mgr.heartbeat(cluster="c1", broker_addr="h:1")
    live = mgr.live_brokers()[r.BrokerAddr(cluster="c1", addr="h:1")]
    assert (live.last_update_timestamp, live.heartbeat_timeout_ms) == (5_000, 10_000)


STEPS = st.lists(
    st.tuples(st.sampled_from(["register", "heartbeat", "advance", "scan"]),
              st.integers(0, 5), st.sampled_from([1_000, 3_000, 10_000, 120_000]),
              st.integers(0, 4_000)),
    max_size=40)


@given(STEPS)
def test_scan_expired_removes_exactly_the_due_brokers_in_deadline_order(steps):
    """Brokers with timeouts of their own, refreshed and moved between timeouts at random:
    each scan returns exactly those with last_update + timeout < now, earliest first."""
    clock = r.ManualClock(start_ms=0)
    mgr = r.RouteInfoManager(clock=clock)
    live: dict[str, tuple[int, int]] = {}  # address -> (last update, timeout)
    for op, n, timeout, dt in steps:
        addr = f"h:{n + 1}"
        if op == "register":
            mgr.register(reg(f"g{n}", 0, addr, heartbeat_timeout_ms=timeout))
            live[addr] = (clock.now_ms(), timeout)
        elif op == "heartbeat":
            assert mgr.heartbeat(cluster="c1", broker_addr=addr) == (addr in live)
            if addr in live:
                live[addr] = (clock.now_ms(), live[addr][1])
        elif op == "advance":
            clock.advance(dt)
        else:
            now = clock.now_ms()
            gone = mgr.scan_expired()
            due = {a for a, (last, t) in live.items() if last + t < now}
            assert {g.broker_addr for g in gone} == due
            assert [(g.last_update_ms, g.timeout_ms) for g in gone] == [
                live[g.broker_addr] for g in gone]
            order = [g.last_update_ms + g.timeout_ms for g in gone]
            assert order == sorted(order)
            for a in due:
                del live[a]
        mgr.check_invariants()


def test_expiry_of_a_replaced_address_leaves_no_zombie(mgr, clock):
    """Java: h:1 loses id 0 to h:9 and its live entry then lingers forever (§2.6)."""
    mgr.register(reg("a", 0, "h:1"))
    clock.set(60_000)
    mgr.register(reg("a", 0, "h:9"))
    clock.set(120_001)
    assert [e.broker_addr for e in mgr.scan_expired()] == ["h:1"]
    assert r.BrokerAddr(cluster="c1", addr="h:1") not in mgr.live_brokers()
    assert route_brokers(mgr, "T1") == {"a": {0: "h:9"}}  # the new holder is untouched
    mgr.check_invariants()


def test_expiry_after_cluster_rename_removes_membership(mgr, clock):
    """Java zombie: the group was created under c1, the broker now registers as c2."""
    mgr.register(reg("a", 0, "h:1", cluster="c1"))
    mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="nobody", broker_id=0)
    mgr.register(reg("a", 0, "h:1", cluster="c2"))
    clock.set(200_000)
    assert len(mgr.scan_expired()) == 1
    assert mgr.pickup_route("T1") is None
    assert mgr.cluster_info().broker_addr_table == {}
    mgr.check_invariants()


# ------------------------------------------------------------------------- unregister


def test_unregister_removes_by_address_and_drops_empty_group_and_topics(mgr):
    mgr.register(reg("a", 0, "h:1", topic_names=("T1", "SHARED")))
    mgr.register(reg("b", 0, "h:2", topic_names=("T2", "SHARED")))
    assert mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)
    assert mgr.all_topics() == ("SHARED", "T2")
    assert route_brokers(mgr, "SHARED") == {"b": {0: "h:2"}}
    assert "a" not in mgr.cluster_info().broker_addr_table
    assert mgr.cluster_info().cluster_addr_table == {"c1": frozenset({"b"})}
    mgr.check_invariants()


def test_unregister_is_idempotent_and_reports_whether_it_removed(mgr):
    mgr.register(reg("a", 0, "h:1"))
    assert mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)
    assert not mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)


def test_unregister_of_old_master_id_cannot_remove_the_new_master(mgr):
    """Upstream #5374: 4.x removed by id. Removal is by address."""
    mgr.register(reg("a", 0, "h:1"))
    mgr.register(reg("a", 0, "h:2"))  # h:2 took id 0 (same state_version)
    mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)
    assert route_brokers(mgr, "T1") == {"a": {0: "h:2"}}


def test_stale_generation_unregister_spares_a_re_registered_broker(mgr, clock):
    """D2, upstream #11043: channel close queued, broker re-registers, stale unregister lands."""
    first = mgr.register(reg("a", 0, "h:1", channel="old"))
    mgr.register(reg("a", 0, "h:1", channel="new"))
    before = observable(mgr)
    assert not mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0,
                              generation=first.generation)
    assert observable(mgr) == before
    current = mgr.live_brokers()[r.BrokerAddr(cluster="c1", addr="h:1")].generation
    assert mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0,
                          generation=current)
    assert mgr.pickup_route("T1") is None


def test_unregister_many_applies_in_order_under_one_lock(mgr):
    mgr.register(reg("a", 0, "h:1"))
    mgr.register(reg("a", 1, "h:2"))
    req = r.UnregisterRequest(cluster="c1", broker_addr="h:2", broker_name="a", broker_id=1)
    out = mgr.unregister_many([req, req, r.UnregisterRequest(
        cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)])
    assert out == (True, False, True)
    assert mgr.all_topics() == ()
    with pytest.raises(r.InvalidRequest, match=r"requests\[0\]"):
        mgr.unregister_many(["nope"])  # type: ignore[list-item]


def test_master_loss_keeps_rows_and_shows_only_slaves(mgr):
    mgr.register(reg("a", 0, "h:1"))
    mgr.register(reg("a", 1, "h:2"))
    mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)
    route = mgr.pickup_route("T1")
    assert route_brokers(mgr, "T1") == {"a": {1: "h:2"}}
    assert route.queue_datas[0].writable  # no acting master: perms unchanged
    # ... but a producer skips a group without a master: nothing to write to
    assert (route.writable_queue_count, route.producer_writable_queue_count) == (4, 0)


def test_acting_master_group_loses_write_bit_when_master_goes(clock):
    mgr = r.RouteInfoManager(clock=clock, config=r.RoutingConfig(support_acting_master=True))
    mgr.register(reg("a", 0, "h:1", enable_acting_master=True))
    mgr.register(reg("a", 1, "h:2", enable_acting_master=True))
    mgr.register(reg("a", 2, "h:3", enable_acting_master=True))
    mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)
    route = mgr.pickup_route("T1")
    assert not route.queue_datas[0].writable
    # the smallest-id slave is presented as id 0, in the answer only
    assert dict(route.broker_datas[0].broker_addrs) == {0: "h:2", 2: "h:3"}
    # an id 0 again, on a row without the write bit: still nothing a producer can write
    assert (route.writable_queue_count, route.producer_writable_queue_count) == (0, 0)
    assert dict(mgr.cluster_info().broker_addr_table["a"].broker_addrs) == {1: "h:2", 2: "h:3"}
    # the member-group sync topic is exempt from the rewrite
    mgr.register_topic("rmq_sys_SYNC_BROKER_MEMBER_a", [r.QueueData(broker_name="a", perm=4)])
    sync = mgr.pickup_route("rmq_sys_SYNC_BROKER_MEMBER_a")
    assert dict(sync.broker_datas[0].broker_addrs) == {1: "h:2", 2: "h:3"}
    # only the master re-registering restores the bit
    mgr.register(reg("a", 0, "h:1", enable_acting_master=True, version=r.DataVersion(counter=2)))
    assert mgr.pickup_route("T1").queue_datas[0].writable
    assert mgr.pickup_route("T1").producer_writable_queue_count == 4
    mgr.check_invariants()


def test_unregister_min_id_notification_needs_acting_master(clock):
    cfg = r.RoutingConfig(notify_min_broker_id_changed=True)
    events: list[r.RouteChange] = []
    mgr = r.RouteInfoManager(clock=clock, config=cfg, listener=events.append)
    for i in range(3):
        mgr.register(reg("a", i, f"h:{i + 1}", enable_acting_master=True))
    mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)
    (notice,) = events[-1].notifications
    assert (notice.min_broker_id, notice.offline_broker_addr) == (1, "h:1")
    assert notice.recipients == ("h:2", "h:3")  # an offline address: everyone is told


# ------------------------------------------------------------------------- channel close


def test_channel_close_removes_every_broker_on_the_channel(mgr):
    """D6: a broker container shares one connection; Java removes only the first."""
    mgr.register(reg("a", 0, "h:1", channel="shared"))
    mgr.register(reg("b", 0, "h:2", channel="shared", topic_names=("T3", "T4")))
    mgr.register(reg("c", 0, "h:3", channel="own", topic_names=("T5", "T6")))
    gone = mgr.on_channel_closed("shared")
    assert sorted(e.broker_addr for e in gone) == ["h:1", "h:2"]
    assert mgr.all_topics() == ("T5", "T6")
    assert mgr.on_channel_closed("shared") == ()
    assert mgr.on_channel_closed(None) == ()
    mgr.check_invariants()


def test_channel_close_of_a_superseded_channel_removes_nothing(mgr):
    mgr.register(reg("a", 0, "h:1", channel="old"))
    mgr.register(reg("a", 0, "h:1", channel="new"))
    assert mgr.on_channel_closed("old") == ()
    assert route_brokers(mgr, "T1") == {"a": {0: "h:1"}}
    mgr.check_invariants()


def test_removal_events_carry_reasons(clock):
    events: list[r.RouteChange] = []
    mgr = r.RouteInfoManager(clock=clock, listener=events.append)
    mgr.register(reg("a", 0, "h:1", channel="x"))
    mgr.register(reg("b", 0, "h:2", topic_names=("T3", "T4")))
    mgr.register(reg("c", 0, "h:3", topic_names=("T5", "T6")))
    mgr.on_channel_closed("x")
    mgr.unregister(cluster="c1", broker_addr="h:2", broker_name="b", broker_id=0)
    clock.set(500_000)
    mgr.scan_expired()
    reasons = [(e.operation, [x.reason for x in e.removed]) for e in events[3:]]
    assert reasons == [("channel_closed", ["channel_closed"]), ("unregister", ["unregistered"]),
                       ("scan_expired", ["expired"])]


def test_unregister_of_an_address_no_longer_in_its_group_changes_nothing(clock):
    """Java counts the group as reduced anyway and, in an acting-master group with no
    master, clears the write bit of its topics again (undoing an add-write-perm). routing
    changes nothing: a stray unregister is not evidence about the group (docs/java-parity.md)."""
    mgr = r.RouteInfoManager(clock=clock, config=r.RoutingConfig(support_acting_master=True))
    for i in range(3):
        mgr.register(reg("a", i, f"h:{i + 1}", enable_acting_master=True))
    mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)
    assert not mgr.pickup_route("T1").queue_datas[0].writable  # master gone: bit cleared
    assert mgr.add_write_perm("a") == 2  # the operator restores writes
    assert mgr.pickup_route("T1").queue_datas[0].writable
    # the write bit is back, so no acting master is presented: a producer still finds no
    # id 0 and writes nothing
    restored = mgr.pickup_route("T1")
    assert dict(restored.broker_datas[0].broker_addrs) == {1: "h:2", 2: "h:3"}
    assert (restored.writable_queue_count, restored.producer_writable_queue_count) == (4, 0)
    before = observable(mgr)
    # h:1 again (already gone), and an address that was never a member
    assert not mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)
    assert not mgr.unregister(cluster="c1", broker_addr="h:9", broker_name="a", broker_id=7)
    assert mgr.unregister_many([r.UnregisterRequest(cluster="c1", broker_addr="h:9",
                                                    broker_name="a", broker_id=0)]) == (False,)
    assert observable(mgr) == before
    assert mgr.pickup_route("T1").queue_datas[0].writable  # Java would clear it again
    mgr.check_invariants()
