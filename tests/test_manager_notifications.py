"""Min-broker-id notifications per removal batch (Java ``unRegisterBroker(Set)``, §2.4, §2.13).

One scan, one channel close or one `unregister_many` is one batch: a group whose smallest id
went gets at most one notice, built after the batch from the group as it stands then; a
group gone by the end gets none.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# ------------------------------------------------------------------ against Java's algorithm


def java_batch_notices(groups: dict[str, dict[int, str]], acting: dict[str, bool],
                       batch: list[tuple[str, str, int]]) -> dict[str, tuple[int, str, str,
                                                                             tuple[str, ...]]]:
    """``RouteInfoManager.unRegisterBroker(Set)`` as written in Java, on copies: for each
    request in order, min changed if its id is the smallest before removal; remove by
    address; an emptied group goes; else a min change records (group map, offline addr).
    After the loop, notify each recorded group that still exists with acting master."""
    table = {name: dict(members) for name, members in groups.items()}
    pending: dict[str, str] = {}
    for name, addr, broker_id in batch:
        members = table.get(name)
        if members is None:
            continue
        changed = bool(members) and broker_id == min(members)
        for i in [i for i, a in members.items() if a == addr]:
            del members[i]
        if not members:
            del table[name]
        elif changed:
            pending[name] = addr
    out = {}
    for name, offline in pending.items():
        members = table.get(name)
        if members and acting[name]:
            low = min(members)
            out[name] = (low, members[low], offline, tuple(members[i] for i in sorted(members)))
    return out


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_scan_notices_match_javas_batch_algorithm(data):
    clock = r.ManualClock(start_ms=0)
    events: list[r.RouteChange] = []
    mgr = r.RouteInfoManager(clock=clock, config=CFG, listener=events.append)
    names = data.draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=3, unique=True))
    groups: dict[str, dict[int, str]] = {}
    acting: dict[str, bool] = {}
    for name in names:
        ids = data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True))
        acting[name] = data.draw(st.booleans())
        groups[name] = {}
        for broker_id in ids:  # any order: registrations may notify, scans are what we test
            mgr.register(reg(name, broker_id, addr(name, broker_id),
                             enable_acting_master=acting[name]))
            groups[name][broker_id] = addr(name, broker_id)
    every = [(n, i) for n in groups for i in groups[n]]
    survivors = data.draw(st.sets(st.sampled_from(every)))
    clock.set(100_000)
    for name, broker_id in survivors:
        mgr.heartbeat(cluster="c1", broker_addr=addr(name, broker_id))
    clock.set(120_001)
    count = len(events)
    gone = mgr.scan_expired()
    mgr.check_invariants()
    expected = java_batch_notices(groups, acting, [(g.broker_name, g.broker_addr, g.broker_id)
                                                   for g in gone])
    got = {n.broker_name: (n.min_broker_id, n.min_broker_addr, n.offline_broker_addr,
                           n.recipients)
           for e in events[count:] for n in e.notifications}
    assert got == expected
    assert sum(len(e.notifications) for e in events[count:]) == len(expected)
