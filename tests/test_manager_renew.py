"""`RouteInfoManager.renew`: the steady re-registration in O(1) (issue 12's replay fast path).

Differential: on random operation sequences over a pool of registration objects (shared
tables, other flags, channels, timeouts, filter servers, slaves, partial tables), a `renew`
either changes nothing and returns None, or leaves the manager exactly as `register` of the
same object leaves an identical manager: every table, route, version and live-entry field,
the deadline index's order, and a `RouteChange` that only re-registers the broker.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from core_helpers import observable, reg, topics

_T1 = topics("T1", "T2")
_T2 = topics("T1", "T2", "T3")
_SINGLE = topics("T3")


def _pool() -> list[r.Registration]:
    """Per broker: two tables, then variants of the first that share its table object
    (`attrs.evolve`), each differing from it in one field."""
    out = []
    for name, bid, addr in (("a", 0, "h:1"), ("a", 1, "h:2"), ("a", 2, "h:3"), ("b", 0, "h:4"),
                            ("b", 1, "h:1")):
        base = reg(name, bid, addr, topics=_T1)
        out += [base, reg(name, bid, addr, topics=_T2)]
        out += [attrs.evolve(base, **{field: value}) for field, value in VARIANTS]
    out.append(reg("a", 0, "h:1", topics=_SINGLE))
    return out


VARIANTS: list[tuple[str, Any]] = [
    ("channel", "ch-1"), ("enable_acting_master", True), ("enable_acting_master", False),
    ("heartbeat_timeout_ms", 30_000), ("filter_servers", ("f:1",)), ("zone_name", "z"),
    ("partial", True), ("data_version", r.DataVersion(counter=2)),
    ("ha_server_addr", "h:9"),
]
POOL = _pool()

_step = st.one_of(
    st.tuples(st.just("register"), st.integers(0, len(POOL) - 1)),
    st.tuples(st.just("renew"), st.integers(-1, len(POOL) - 1)),  # -1: the last registered
    st.tuples(st.just("renew"), st.just(-1)),
    st.tuples(st.just("advance"), st.integers(0, 40_000)),
    st.tuples(st.just("scan")),
    st.tuples(st.just("unregister"), st.integers(0, len(POOL) - 1)),
    st.tuples(st.just("delete"), st.sampled_from(["T1", "T2", "T3"])),
    st.tuples(st.just("wipe"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("close"), st.just("ch-1")),
    st.tuples(st.just("heartbeat"), st.integers(0, len(POOL) - 1)),
)


def _inside(mgr: r.RouteInfoManager) -> dict[str, Any]:
    """`observable` plus the internal fields a later call reads."""
    st_ = mgr._state
    live = {k: (v.broker_name, v.broker_id, v.last_update, v.timeout, v.data_version,
                v.channel, v.ha_server_addr, v.generation,
                v.applied_names,
                v.applied_epoch, v.applied_deleted, v.entry)
            for k, v in st_.live.items()}
    groups = {n: (g.cluster, dict(g.addrs), g.enable_acting_master, g.zone_name, g.rows_epoch)
              for n, g in st_.groups.items()}
    return {"seen": observable(mgr), "live": live, "groups": groups,
            "clusters": {c: sorted(n) for c, n in st_.clusters.items()},
            "filters": dict(st_.filter_servers), "generation": mgr._generation}


def _apply(mgr: r.RouteInfoManager, clock: r.ManualClock, step: tuple[Any, ...]) -> None:
    kind = step[0]
    if kind == "register":
        mgr.register(POOL[step[1]])
    elif kind == "advance":
        clock.advance(step[1])
    elif kind == "scan":
        mgr.scan_expired()
    elif kind == "unregister":
        p = POOL[step[1]]
        mgr.unregister(cluster=p.cluster, broker_addr=p.broker_addr, broker_name=p.broker_name,
                       broker_id=p.broker_id)
    elif kind == "delete":
        mgr.delete_topic(step[1])
    elif kind == "wipe":
        mgr.wipe_write_perm(step[1])
    elif kind == "close":
        mgr.on_channel_closed(step[1])
    elif kind == "heartbeat":
        p = POOL[step[1]]
        mgr.heartbeat(cluster=p.cluster, broker_addr=p.broker_addr)


@settings(max_examples=300, deadline=None)
@given(st.lists(_step, max_size=30), st.booleans(), st.booleans())
def test_renew_is_register_or_nothing(steps, delete_by_omission, notify):
    config = r.RoutingConfig(delete_topic_with_broker_registration=delete_by_omission,
                             notify_min_broker_id_changed=notify)
    clock_a, clock_b = r.ManualClock(start_ms=1_000), r.ManualClock(start_ms=1_000)
    events: list[r.RouteChange] = []
    fast = r.RouteInfoManager(clock=clock_a, config=config)
    full = r.RouteInfoManager(clock=clock_b, config=config, listener=events.append)
    last = 0
    for step in steps:
        if step[0] != "renew":
            _apply(fast, clock_a, step)
            _apply(full, clock_b, step)
            last = step[1] if step[0] == "register" else last
            continue
        registration = POOL[last if step[1] < 0 else step[1]]
        before = _inside(fast)
        generation = fast.renew(registration)
        if generation is None:
            assert _inside(fast) == before  # nothing changed, not even liveness
            fast.register(registration)
            full.register(registration)
            continue
        events.clear()
        result = full.register(registration)
        assert result.accepted and result.generation == generation
        assert _inside(fast) == _inside(full)
        # what the replay skips: the event only re-registers the broker
        (event,) = events
        assert not event.changed_topics and not event.removed and not event.notifications
        assert [(e.broker_addr, e.first) for e in event.registered] == [
            (registration.broker_addr, False)]
        fast.check_invariants()
    assert _inside(fast) == _inside(full)


def test_renew_refreshes_a_steady_broker_and_refuses_the_rest():
    clock = r.ManualClock(start_ms=0)
    mgr = r.RouteInfoManager(clock=clock)
    master = reg("a", 0, "h:1", topics=_T1)
    assert mgr.renew(master) is None  # not registered yet: nothing happens
    assert mgr.live_brokers() == {}
    first = mgr.register(master).generation
    clock.advance(10_000)
    assert mgr.renew(master) == first + 1
    (info,) = mgr.live_brokers().values()
    assert info.last_update_timestamp == 10_000
    # another table, version, channel or flag is not steady: register decides
    for other in (reg("a", 0, "h:1", topics=_T2), reg("a", 0, "h:1", topics=_T1, channel="x"),
                  reg("a", 0, "h:1", topics=_T1, version=r.DataVersion(counter=5)),
                  reg("a", 0, "h:1", topics=_T1, enable_acting_master=True)):
        assert mgr.renew(other) is None
    mgr.delete_topic("T1")  # a missing row must come back through register
    assert mgr.renew(master) is None
    assert mgr.register(master).accepted and mgr.pickup_route("T1") is not None


def test_the_same_object_renews_again_only_while_its_group_is_unchanged():
    """`Live.steady`: a renewal by the object that renewed last skips the checks only
    while the group's epoch stands; any change to the group sends it through them."""
    clock = r.ManualClock(start_ms=0)
    mgr = r.RouteInfoManager(clock=clock)
    master = reg("a", 0, "h:1", topics=_T1, enable_acting_master=False)
    mgr.register(master)
    assert mgr.renew(master) is not None
    steady = mgr._state.live[("c1", "h:1")].steady
    assert steady is not None and steady[0]() is master
    assert mgr.renew(master) is not None  # the remembered path
    # a slave's registration sets the group's acting-master flag (the newest one wins):
    # the master's own flag no longer matches, so register must decide
    mgr.register(reg("a", 1, "h:2", topics=_T1, enable_acting_master=True))
    assert mgr.renew(master) is None
    assert mgr.register(master).accepted and mgr.renew(master) is not None
    # a member leaving changes the group too; the master is still steady, as register says
    assert mgr.unregister(cluster="c1", broker_addr="h:2", broker_name="a", broker_id=1)
    clock.advance(7)
    assert mgr.renew(master) is not None
    (info,) = mgr.live_brokers().values()
    assert info.last_update_timestamp == 7


@pytest.mark.parametrize(("field", "value"), VARIANTS)
@pytest.mark.parametrize("bid", [0, 1])
def test_renew_with_one_field_changed_is_register_or_nothing(field, value, bid):
    """Each field `register` reads, changed alone (the table object stays the same)."""
    base = reg("a", bid, f"h:{bid + 1}", topics=_T1, enable_acting_master=False)
    variant = attrs.evolve(base, **{field: value})
    clocks = r.ManualClock(start_ms=0), r.ManualClock(start_ms=0)
    fast, full = (r.RouteInfoManager(clock=c) for c in clocks)
    for mgr, clock in zip((fast, full), clocks, strict=True):
        if bid:
            mgr.register(reg("a", 0, "h:9", topics=_T1))
        mgr.register(base)
        clock.advance(5)
    before = _inside(fast)
    generation = fast.renew(variant)
    result = full.register(variant)
    if generation is None:
        assert _inside(fast) == before
    else:
        assert generation == result.generation and _inside(fast) == _inside(full)
    # only what register would not change (or only on the live entry) is steady
    steady = field in ("ha_server_addr", "partial") or (field, value) == (
        "enable_acting_master", False)
    assert (generation is not None) == steady


@pytest.mark.parametrize("bad", [None, "registration", 3])
def test_renew_of_something_else_is_none(bad):
    mgr = r.RouteInfoManager(clock=r.ManualClock(start_ms=0))
    assert mgr.renew(bad) is None


def test_scan_due_says_whether_a_scan_could_remove_anything_and_changes_nothing():
    clock = r.ManualClock(start_ms=0)
    mgr = r.RouteInfoManager(clock=clock)
    assert not mgr.scan_due()  # no broker: nothing can expire
    mgr.register(reg("a", 0, "h:1", topics=_T1, heartbeat_timeout_ms=10_000))
    clock.advance(10_000)  # the deadline itself: not yet expired (last_update + timeout < now)
    before = _inside(mgr)
    assert not mgr.scan_due() and _inside(mgr) == before
    assert mgr.scan_expired() == ()
    clock.advance(1)
    assert mgr.scan_due() and _inside(mgr) == before
    (gone,) = mgr.scan_expired()
    assert gone.broker_addr == "h:1" and not mgr.scan_due()
