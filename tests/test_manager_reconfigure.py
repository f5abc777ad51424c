"""`RouteInfoManager.reconfigure`: settings replaced at once, readiness anchored at start,
acting-master rewrite rebuilt, bad input refused with state unchanged."""

from __future__ import annotations

import pytest

import routing as r
from core_helpers import observable, reg


def test_reconfigure_refuses_a_non_config_and_changes_nothing():
    mgr = r.RouteInfoManager(clock=r.ManualClock(start_ms=0))
    mgr.register(reg("a", 0, "h:1"))
    before, config = observable(mgr), mgr.config
    with pytest.raises(r.InvalidRequest, match="config"):
        mgr.reconfigure({"support_acting_master": True})  # type: ignore[arg-type]
    assert observable(mgr) == before and mgr.config is config


def test_readiness_window_is_anchored_at_construction():
    clock = r.ManualClock(start_ms=1_000)
    mgr = r.RouteInfoManager(clock=clock)
    mgr.register(reg("a", 0, "h:1"))
    clock.advance(4_000)
    mgr.reconfigure(r.RoutingConfig(wait_for_service_ms=5_000))
    with pytest.raises(r.NotReady) as err:
        mgr.pickup_route("T1")
    assert err.value.ready_at_ms == 6_000
    clock.advance(1_000)
    assert mgr.pickup_route("T1") is not None
    mgr.reconfigure(r.RoutingConfig(wait_for_service_ms=9_000))  # closes it again
    with pytest.raises(r.NotReady):
        mgr.pickup_route("T1")
    mgr.reconfigure(r.RoutingConfig())
    assert mgr.pickup_route("T1") is not None


def test_switching_acting_master_support_rebuilds_routes_and_emits_one_event():
    events: list[r.RouteChange] = []
    mgr = r.RouteInfoManager(clock=r.ManualClock(start_ms=0), listener=events.append)
    for i in range(2):
        mgr.register(reg("a", i, f"h:{i + 1}", enable_acting_master=True))
    mgr.register(reg("b", 0, "h:9", topic_names=("T3", "T4")))
    mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)
    version = mgr.route_version("T1")
    assert dict(mgr.pickup_route("T1").broker_datas[0].broker_addrs) == {1: "h:2"}
    mgr.reconfigure(r.RoutingConfig(support_acting_master=True))
    assert dict(mgr.pickup_route("T1").broker_datas[0].broker_addrs) == {0: "h:2"}
    assert mgr.route_version("T1") != version
    assert events[-1].operation == "reconfigure"
    assert events[-1].changed_topics == frozenset({"T1", "T2"})  # b's routes did not change
    mgr.check_invariants()
    count = len(events)
    mgr.reconfigure(r.RoutingConfig(support_acting_master=True, order_message_enable=True))
    assert len(events) == count  # nothing a route shows changed
