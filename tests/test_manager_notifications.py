"""Min-broker-id notifications per removal batch (Java ``unRegisterBroker(Set)``, §2.4, §2.13).

One scan, one channel close or one `unregister_many` is one batch: a group whose smallest id
went gets at most one notice, built after the batch from the group as it stands then; a
group gone by the end gets none.
"""

from __future__ import annotations

import pytest

import routing as r
from core_helpers import reg

CFG = r.RoutingConfig(notify_min_broker_id_changed=True)


def addr(name: str, broker_id: int) -> str:
    return f"{name}{broker_id}.h:10911"


@pytest.fixture
def clock() -> r.ManualClock:
    return r.ManualClock(start_ms=0)


def fleet(clock: r.ManualClock, groups: dict[str, dict[int, str]],
          *, acting: bool = True) -> tuple[r.RouteInfoManager, list[r.RouteChange]]:
    """Register each group's members in ascending id order (no registration notices),
    each on the channel given."""
    events: list[r.RouteChange] = []
    mgr = r.RouteInfoManager(clock=clock, config=CFG, listener=events.append)
    for name, members in groups.items():
        for broker_id, channel in sorted(members.items()):
            res = mgr.register(reg(name, broker_id, addr(name, broker_id), channel=channel,
                                   enable_acting_master=acting))
            assert res.accepted and res.notifications == ()
    return mgr, events


def expire(mgr: r.RouteInfoManager, clock: r.ManualClock, name: str,
           survivors: tuple[int, ...]) -> None:
    """Keep ``survivors`` alive, let every other member of ``name`` expire in one scan."""
    clock.set(100_000)
    for broker_id in survivors:
        assert mgr.heartbeat(cluster="c1", broker_addr=addr(name, broker_id))
    clock.set(120_001)
    gone = mgr.scan_expired()
    assert {g.broker_id for g in gone} == {0, 1, 2, 3} - set(survivors)
    mgr.check_invariants()


def test_scan_losing_the_master_notifies_the_rest_once(clock):
    mgr, events = fleet(clock, {"a": {0: None, 1: None, 2: None, 3: None}})
    expire(mgr, clock, "a", survivors=(1, 2, 3))
    (notice,) = events[-1].notifications
    assert (notice.broker_name, notice.min_broker_id, notice.min_broker_addr) == \
        ("a", 1, addr("a", 1))
    assert notice.offline_broker_addr == addr("a", 0)
    assert notice.recipients == (addr("a", 1), addr("a", 2), addr("a", 3))


def test_scan_losing_two_lowest_members_sends_one_notice_for_the_group_as_it_ends(clock):
    mgr, events = fleet(clock, {"a": {0: None, 1: None, 2: None, 3: None}})
    expire(mgr, clock, "a", survivors=(2, 3))
    # per expiry this was two notices (min 1 to {1,2,3}, then min 2); Java sends one
    (notice,) = events[-1].notifications
    assert (notice.min_broker_id, notice.min_broker_addr) == (2, addr("a", 2))
    assert notice.recipients == (addr("a", 2), addr("a", 3))
    assert notice.offline_broker_addr == addr("a", 1)  # the last min-id address of the batch


def test_scan_losing_two_members_that_are_not_the_lowest_sends_nothing(clock):
    mgr, events = fleet(clock, {"a": {0: None, 1: None, 2: None, 3: None}})
    expire(mgr, clock, "a", survivors=(0, 3))
    assert events[-1].operation == "scan_expired" and events[-1].notifications == ()


def test_scan_losing_every_member_sends_nothing(clock):
    mgr, events = fleet(clock, {"a": {0: None, 1: None, 2: None, 3: None}})
    expire(mgr, clock, "a", survivors=())
    assert events[-1].operation == "scan_expired" and events[-1].notifications == ()
    assert mgr.broker_member_group("c1", "a").broker_addrs == {}


def test_scan_without_acting_master_or_with_notifications_off_sends_nothing(clock):
    mgr, events = fleet(clock, {"a": {0: None, 1: None, 2: None, 3: None}}, acting=False)
    expire(mgr, clock, "a", survivors=(2, 3))
    assert events[-1].notifications == ()
    quiet: list[r.RouteChange] = []
    mgr = r.RouteInfoManager(clock=r.ManualClock(start_ms=0), listener=quiet.append)
    for i in range(3):
        mgr.register(reg("a", i, addr("a", i), enable_acting_master=True))
    mgr.unregister(cluster="c1", broker_addr=addr("a", 0), broker_name="a", broker_id=0)
    assert quiet[-1].notifications == ()


def test_channel_close_dropping_brokers_of_two_groups_notifies_each_group_once(clock):
    # a broker container: one connection carries a0, b0 and b1
    mgr, events = fleet(clock, {"a": {0: "box", 1: "a1"},
                                "b": {0: "box", 1: "box", 2: "b2"}})
    gone = mgr.on_channel_closed("box")
    assert sorted(g.broker_addr for g in gone) == [addr("a", 0), addr("b", 0), addr("b", 1)]
    notices = {n.broker_name: n for n in events[-1].notifications}
    assert len(events[-1].notifications) == 2
    a, b = notices["a"], notices["b"]
    assert (a.min_broker_id, a.recipients, a.offline_broker_addr) == \
        (1, (addr("a", 1),), addr("a", 0))
    assert (b.min_broker_id, b.recipients, b.offline_broker_addr) == \
        (2, (addr("b", 2),), addr("b", 1))
    mgr.check_invariants()


def test_unregister_many_is_one_batch(clock):
    mgr, events = fleet(clock, {"a": {0: None, 1: None, 2: None}})
    done = mgr.unregister_many([
        r.UnregisterRequest(cluster="c1", broker_addr=addr("a", 0), broker_name="a",
                            broker_id=0),
        r.UnregisterRequest(cluster="c1", broker_addr=addr("a", 1), broker_name="a",
                            broker_id=1)])
    assert done == (True, True)
    (notice,) = events[-1].notifications
    assert (notice.min_broker_id, notice.recipients, notice.offline_broker_addr) == \
        (2, (addr("a", 2),), addr("a", 1))
    # the other order: removing id 1 first does not change the minimum, id 0 then does
    mgr, events = fleet(r.ManualClock(start_ms=0), {"a": {0: None, 1: None, 2: None}})
    mgr.unregister_many([
        r.UnregisterRequest(cluster="c1", broker_addr=addr("a", 1), broker_name="a",
                            broker_id=1),
        r.UnregisterRequest(cluster="c1", broker_addr=addr("a", 0), broker_name="a",
                            broker_id=0)])
    (notice,) = events[-1].notifications
    assert (notice.min_broker_id, notice.offline_broker_addr) == (2, addr("a", 0))
