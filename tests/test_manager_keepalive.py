"""The keep-alive paths (`heartbeat`, `query_data_version`) and the deadline index: the
live entry keeps the refresh time and the index reads it there when the broker's filed
deadline comes due, so a refresh is one field store. Expiry stays exact to the millisecond
and in deadline order."""

from __future__ import annotations

import pytest

import routing as r
from core_helpers import reg


class SteppingClock:
    """A clock that reads the given instants in turn (it may step back)."""

    def __init__(self, *instants: int) -> None:
        self.instants = list(instants)

    def now_ms(self) -> int:
        return self.instants.pop(0) if len(self.instants) > 1 else self.instants[0]


def _addrs(expired: tuple[r.ExpiredBroker, ...]) -> list[str]:
    return [e.broker_addr for e in expired]


def test_a_heartbeat_at_the_last_alive_ms_moves_the_deadline_exactly():
    clock = r.ManualClock(start_ms=0)
    mgr = r.RouteInfoManager(clock=clock)
    mgr.register(reg("a", 0, "h:1"))
    clock.set(10)
    mgr.register(reg("b", 0, "h:2"))
    clock.set(120_000)  # a's deadline: last_update + timeout == now is still alive (D1)
    assert mgr.scan_expired() == ()
    assert mgr.heartbeat(cluster="c1", broker_addr="h:1")
    clock.set(120_011)
    assert _addrs(mgr.scan_expired()) == ["h:2"]  # b: 10 + 120 000 < 120 011
    clock.set(240_000)
    assert mgr.scan_expired() == ()  # a: 120 000 + 120 000 == now, alive
    mgr.check_invariants()
    clock.set(240_001)
    (gone,) = mgr.scan_expired()
    assert gone.broker_addr == "h:1" and gone.last_update_ms == 120_000
    mgr.check_invariants()


def test_keep_alives_reorder_expiry_and_events_follow_deadlines():
    clock = r.ManualClock(start_ms=0)
    events: list[r.RouteChange] = []
    mgr = r.RouteInfoManager(clock=clock, listener=events.append)
    for i in range(5):
        clock.set(i)
        mgr.register(reg(f"g{i}", 0, f"h:{i + 1}"))
    clock.set(100)
    mgr.heartbeat(cluster="c1", broker_addr="h:1")
    clock.set(101)
    version = r.DataVersion(counter=1)
    assert not mgr.query_data_version(cluster="c1", broker_addr="h:3",
                                      data_version=version).changed
    clock.set(102)
    mgr.heartbeat(cluster="c1", broker_addr="h:2")
    mgr.check_invariants()
    events.clear()
    clock.set(120_200)
    expired = mgr.scan_expired()
    assert _addrs(expired) == ["h:4", "h:5", "h:1", "h:3", "h:2"]  # by deadline
    assert [e.last_update_ms for e in expired] == [3, 4, 100, 101, 102]
    (event,) = events
    assert [x.broker_addr for x in event.removed] == _addrs(expired)
    mgr.check_invariants()


def test_keep_alives_read_a_clock_that_steps_back_as_standing_still():
    clock = SteppingClock(1_000, 5_000, 4_000, 4_500, 6_000)
    mgr = r.RouteInfoManager(clock=clock)  # reads 1 000
    mgr.register(reg("a", 0, "h:1"))  # 5 000
    assert mgr.heartbeat(cluster="c1", broker_addr="h:1")  # 4 000: stays 5 000
    (info,) = mgr.live_brokers().values()
    assert info.last_update_timestamp == 5_000
    answer = mgr.query_data_version(cluster="c1", broker_addr="h:1",
                                    data_version=r.DataVersion(counter=1))  # 4 500
    (info,) = mgr.live_brokers().values()
    assert not answer.changed and info.last_update_timestamp == 5_000
    assert mgr.heartbeat(cluster="c1", broker_addr="h:1")  # 6 000
    (info,) = mgr.live_brokers().values()
    assert info.last_update_timestamp == 6_000
    mgr.check_invariants()


def test_keep_alives_leave_the_index_alone_and_a_due_scan_refiles_them():
    clock = r.ManualClock(start_ms=0)
    mgr = r.RouteInfoManager(clock=clock)
    mgr.register(reg("a", 0, "h:1"))
    mgr.register(reg("b", 0, "h:2", heartbeat_timeout_ms=10_000))
    state = mgr._state
    filed = {key: live.entry for key, live in state.live.items()}
    assert filed == {("c1", "h:1"): (120_000, ("c1", "h:1")),
                     ("c1", "h:2"): (10_000, ("c1", "h:2"))}
    clock.advance(5)
    heap = list(state.deadlines._heap)
    assert mgr.heartbeat(cluster="c1", broker_addr="h:2")
    assert not mgr.query_data_version(cluster="c1", broker_addr="h:1",
                                      data_version=r.DataVersion(counter=1)).changed
    assert state.deadlines._heap == heap  # nothing filed anew
    assert {k: v.entry for k, v in state.live.items()} == filed
    assert sorted(state.deadlines.items()) == [(("c1", "h:1"), 120_005),
                                               (("c1", "h:2"), 10_005)]
    mgr.check_invariants()
    clock.set(10_001)  # b's filed deadline has passed, its real one has not
    assert not mgr.scan_due()
    assert state.live[("c1", "h:2")].entry == (10_005, ("c1", "h:2"))  # re-filed
    assert state.deadlines.lower_bound == 10_005
    assert mgr.scan_expired() == ()
    clock.set(10_006)
    assert mgr.scan_due()
    assert _addrs(mgr.scan_expired()) == ["h:2"]
    assert not mgr.scan_due()
    mgr.check_invariants()


def test_query_data_version_checks_the_version_before_changing_anything():
    clock = r.ManualClock(start_ms=0)
    mgr = r.RouteInfoManager(clock=clock)
    registration = reg("a", 0, "h:1")
    mgr.register(registration)
    clock.set(50)
    before = dict(mgr.live_brokers())
    for bad in ("v1", None, {"counter": 1}):
        for addr in ("h:1", "h:9"):  # known and unknown brokers: the same error
            with pytest.raises(r.InvalidRequest, match="data_version"):
                mgr.query_data_version(cluster="c1", broker_addr=addr, data_version=bad)
    assert dict(mgr.live_brokers()) == before  # not refreshed
    same = mgr.query_data_version(cluster="c1", broker_addr="h:1",
                                  data_version=registration.data_version)
    equal = mgr.query_data_version(cluster="c1", broker_addr="h:1",
                                   data_version=r.DataVersion(counter=1))
    assert same is equal and not same.changed  # the shared "unchanged" answer
    assert mgr.query_data_version(cluster="c1", broker_addr="h:1",
                                  data_version=r.DataVersion(counter=2)).changed
    (info,) = mgr.live_brokers().values()
    assert info.last_update_timestamp == 50
    mgr.check_invariants()
