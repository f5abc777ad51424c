"""The benchmark baseline (a line-by-line port of Java's algorithm) agrees with `routing`.

A differential test: random sequences of registrations, unregistrations, heartbeats,
clock steps with expiry scans, write-perm changes and topic deletions are applied to both
`routing.RouteInfoManager` and `benchmarks.baseline_java_port.JavaRouteInfoManager`, and
after every step both must hold the same route contents — the same topics, the same broker
groups and addresses, the same queue rows per topic — and the same live brokers.

It stays inside the region where the library deliberately matches Java: masters only, one
fixed cluster and address per group, no first registration with exactly one topic (Java's
single-topic guard keeps partial state, D3), perms drawn from {READ, READ|WRITE} (Java's
add-write-perm forces 6, D5), state version 0 (no stale-epoch rejections).
A few direct tests pin Java quirks the port must keep, since it is the yardstick.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import routing as r

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the benchmarks package lives beside src/, not in it
    sys.path.insert(0, str(ROOT))

from benchmarks.baseline_java_port import (  # noqa: E402
    JavaRouteInfoManager,
    JDataVersion,
    JTopicConfig,
    JTopicConfigSerializeWrapper,
)
from benchmarks.bench_core import java_register  # noqa: E402

GROUPS = 4
TOPICS = [f"T{i}" for i in range(6)]
START = 1_000_000


def cluster_of(g: int) -> str:
    return f"c{g % 2}"


def addr_of(g: int) -> str:
    return f"10.0.0.{g + 1}:10911"


# --------------------------------------------------------------------------- operations


@dataclass(frozen=True)
class Register:
    group: int
    topics: tuple[tuple[str, int, int, int], ...]  # (name, read, write, perm)
    counter: int
    timeout_ms: int | None


@dataclass(frozen=True)
class Unregister:
    group: int


@dataclass(frozen=True)
class Heartbeat:
    group: int


@dataclass(frozen=True)
class Advance:
    ms: int


@dataclass(frozen=True)
class Wipe:
    group: int


@dataclass(frozen=True)
class AddPerm:
    group: int


@dataclass(frozen=True)
class DeleteTopic:
    topic: str


topic_rows = st.tuples(st.sampled_from(TOPICS), st.integers(0, 8), st.integers(0, 8),
                       st.sampled_from([4, 6]))
operations = st.one_of(
    st.builds(Register, st.integers(0, GROUPS - 1),
              st.lists(topic_rows, max_size=5, unique_by=lambda t: t[0]).map(tuple),
              st.integers(1, 3), st.sampled_from([None, 1_000, 30_000])),
    st.builds(Unregister, st.integers(0, GROUPS - 1)),
    st.builds(Heartbeat, st.integers(0, GROUPS - 1)),
    st.builds(Advance, st.sampled_from([0, 1, 500, 1_001, 29_000, 31_000, 121_000])),
    st.builds(Wipe, st.integers(0, GROUPS - 1)),
    st.builds(AddPerm, st.integers(0, GROUPS - 1)),
    st.builds(DeleteTopic, st.sampled_from(TOPICS)),
)


def registration(op: Register) -> r.Registration:
    g = op.group
    return r.Registration(
        cluster=cluster_of(g), broker_name=f"g{g}", broker_id=0, broker_addr=addr_of(g),
        heartbeat_timeout_ms=op.timeout_ms, enable_acting_master=False, channel=addr_of(g),
        data_version=r.DataVersion(state_version=0, timestamp=START, counter=op.counter),
        topics={name: r.TopicConfig(topic_name=name, read_queue_nums=rq, write_queue_nums=wq,
                                    perm=perm) for name, rq, wq, perm in op.topics})


class Pair:
    """Both managers on one manual clock, stepped together."""

    def __init__(self) -> None:
        self.clock = r.ManualClock(start_ms=START)
        self.mgr = r.RouteInfoManager(clock=self.clock)
        self.jm = JavaRouteInfoManager(now_ms=self.clock.now_ms)
        self.registered: set[int] = set()

    def apply(self, op: Any) -> None:
        mgr, jm = self.mgr, self.jm
        if isinstance(op, Register):
            if op.group not in self.registered and len(op.topics) == 1:
                return  # Java's single-topic guard keeps partial state (D3): out of scope
            reg = registration(op)
            res = mgr.register(reg)
            assert res.accepted, res.rejection
            assert java_register(jm, reg) is not None
            self.registered.add(op.group)
        elif isinstance(op, Unregister):
            g = op.group
            mgr.unregister(cluster=cluster_of(g), broker_addr=addr_of(g), broker_name=f"g{g}",
                           broker_id=0)
            jm.unregister_broker(cluster_of(g), addr_of(g), f"g{g}", 0)
            self.registered.discard(g)
        elif isinstance(op, Heartbeat):
            mgr.heartbeat(cluster=cluster_of(op.group), broker_addr=addr_of(op.group))
            jm.broker_heartbeat(cluster_of(op.group), addr_of(op.group))
        elif isinstance(op, Advance):
            self.clock.advance(op.ms)
            expired = sorted(e.broker_addr for e in mgr.scan_expired())
            closed = sorted(str(c) for c in jm.scan_not_active_broker())
            assert expired == closed
            for g in range(GROUPS):
                if addr_of(g) in expired:
                    self.registered.discard(g)
        elif isinstance(op, Wipe):
            assert mgr.wipe_write_perm(f"g{op.group}") == jm.wipe_write_perm_of_broker_by_lock(
                f"g{op.group}")
        elif isinstance(op, AddPerm):
            assert mgr.add_write_perm(f"g{op.group}") == jm.add_write_perm_of_broker_by_lock(
                f"g{op.group}")
        elif isinstance(op, DeleteTopic):
            mgr.delete_topic(op.topic)
            jm.delete_topic(op.topic)
        assert not jm.errors, jm.errors

    def assert_same(self) -> None:
        mgr, jm = self.mgr, self.jm
        topics = sorted(mgr.all_topics())
        assert topics == sorted(jm.get_all_topic_list())
        for topic in topics:
            ours, theirs = mgr.pickup_route(topic), jm.pickup_topic_route_data(topic)
            assert ours is not None, topic
            assert theirs is not None, topic
            assert {q.broker_name: (q.read_queue_nums, q.write_queue_nums, int(q.perm),
                                    int(q.topic_sys_flag)) for q in ours.queue_datas} == {
                q.broker_name: (q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
                for q in theirs.queue_datas}, topic
            assert {b.broker_name: (b.cluster, dict(b.broker_addrs)) for b in ours.broker_datas
                    } == {b.broker_name: (b.cluster, b.broker_addrs)
                          for b in theirs.broker_datas}, topic
        info = mgr.cluster_info()
        assert {n: dict(b.broker_addrs) for n, b in info.broker_addr_table.items()} == {
            n: b.broker_addrs for n, b in jm.broker_addr_table.items()}
        assert {c: set(ns) for c, ns in info.cluster_addr_table.items()} == (
            jm.cluster_addr_table)
        assert {(k.cluster, k.addr) for k in mgr.live_brokers()} == set(jm.broker_live_table)
        for cluster in ("c0", "c1", "nope"):
            ours_listed = mgr.topics_by_cluster(cluster)
            assert list(ours_listed) == sorted(set(ours_listed))  # sorted, no repeats
            assert set(ours_listed) == jm.get_topics_by_cluster(cluster)
        mgr.check_invariants()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operations, max_size=40))
def test_port_and_routing_agree(ops: list[Any]) -> None:
    pair = Pair()
    for op in ops:
        pair.apply(op)
        pair.assert_same()


# --------------------------------------------------------------------------- Java quirks


def _wrapper(counter: int, *names: str) -> JTopicConfigSerializeWrapper:
    return JTopicConfigSerializeWrapper(JDataVersion(0, START, counter),
                                        {n: JTopicConfig(n) for n in names})


def _register(jm: JavaRouteInfoManager, g: int, wrapper: JTopicConfigSerializeWrapper,
              broker_id: int = 0, timeout: int | None = None) -> Any:
    return jm.register_broker(cluster_of(g), addr_of(g) if broker_id == 0 else f"10.1.0.{g}:1",
                              f"g{g}", broker_id, None, None, timeout, False, wrapper, None,
                              f"ch{g}")


def test_single_topic_guard_keeps_partial_state() -> None:
    """Java §2.1 step 7: null result, but the cluster set and an empty group stay."""
    jm = JavaRouteInfoManager(now_ms=lambda: START)
    assert _register(jm, 0, _wrapper(1, "A")) is None
    assert jm.cluster_addr_table == {"c0": {"g0"}}
    assert jm.broker_addr_table["g0"].broker_addrs == {}
    assert jm.get_all_topic_list() == set()


def test_unchanged_version_keeps_rows_but_restores_missing_ones() -> None:
    """Java §2.2 fast path: existing rows stay as they are; a deleted row comes back."""
    jm = JavaRouteInfoManager(now_ms=lambda: START)
    _register(jm, 0, _wrapper(1, "A", "B"))
    jm.wipe_write_perm_of_broker_by_lock("g0")
    jm.delete_topic("B")
    _register(jm, 0, _wrapper(1, "A", "B"))
    assert jm.topic_queue_table["A"]["g0"].perm == 4  # kept wiped
    assert jm.topic_queue_table["B"]["g0"].perm == 6  # re-created
    _register(jm, 0, _wrapper(2, "A", "B"))
    assert jm.topic_queue_table["A"]["g0"].perm == 6  # new version rewrites


def test_add_write_perm_forces_six_and_counts_touched_topics() -> None:
    jm = JavaRouteInfoManager(now_ms=lambda: START)
    wrapper = _wrapper(1, "A", "B")
    wrapper.topic_config_table["A"].perm = 2 | 1
    _register(jm, 0, wrapper)
    assert jm.add_write_perm_of_broker_by_lock("g0") == 2
    assert jm.topic_queue_table["A"]["g0"].perm == 6
    assert jm.wipe_write_perm_of_broker_by_lock("nobody") == 0


def test_scan_applies_unregister_synchronously_and_is_strict() -> None:
    now = [START]
    jm = JavaRouteInfoManager(now_ms=lambda: now[0])
    _register(jm, 0, _wrapper(1, "A", "B"), timeout=1_000)
    _register(jm, 1, _wrapper(1, "B", "C"))
    now[0] += 1_000
    assert jm.scan_not_active_broker() == []  # last + timeout == now: not expired
    now[0] += 1
    assert jm.scan_not_active_broker() == ["ch0"]
    assert jm.get_all_topic_list() == {"B", "C"}
    assert "g0" not in jm.broker_addr_table
    assert jm.cluster_addr_table == {"c1": {"g1"}}


def test_unregister_removes_by_address_not_id() -> None:
    """5.x: every member with that address goes, whatever id the request names."""
    jm = JavaRouteInfoManager(now_ms=lambda: START)
    _register(jm, 0, _wrapper(1, "A", "B"))
    jm.unregister_broker("c0", addr_of(0), "g0", 7)
    assert jm.broker_addr_table == {}
    assert jm.get_all_topic_list() == set()


def test_pickup_returns_new_objects_every_call() -> None:
    jm = JavaRouteInfoManager(now_ms=lambda: START)
    _register(jm, 0, _wrapper(1, "A", "B"))
    first, second = jm.pickup_topic_route_data("A"), jm.pickup_topic_route_data("A")
    assert first is not None
    assert second is not None
    assert first is not second
    assert first.broker_datas[0] is not second.broker_datas[0]
    assert first.broker_datas[0].broker_addrs == {0: addr_of(0)}
    assert jm.pickup_topic_route_data("missing") is None


@pytest.mark.parametrize("cluster", ["c0", "unknown"])
def test_topics_by_cluster_unknown_cluster_is_empty(cluster: str) -> None:
    jm = JavaRouteInfoManager(now_ms=lambda: START)
    _register(jm, 0, _wrapper(1, "A", "B"))
    expected = {"A", "B"} if cluster == "c0" else set()
    assert jm.get_topics_by_cluster(cluster) == expected
    assert not jm.errors
