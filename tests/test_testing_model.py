"""routing.testing operations, apply_operation and RouteModel on hand-written scenarios.

Each scenario states the expected routes explicitly, then checks that the model and a real
`RouteInfoManager` agree operation by operation, so the model is pinned independently.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import routing as r
from routing.testing import (
    AddWritePermOp,
    AdvanceOp,
    CloseChannelOp,
    DeleteTopicOp,
    FakeClock,
    HeartbeatOp,
    Operation,
    QueryDataVersionOp,
    RegisterOp,
    RegisterTopicOp,
    RouteModel,
    RoutingSystem,
    ScanOp,
    UnregisterOp,
    WipeWritePermOp,
    apply_operation,
    describe,
    run_operations,
)


def reg(name: str = "b", bid: int = 0, addr: str = "10.0.0.1:1", *, topics: Sequence[str] =
        ("A", "B"), counter: int = 1, state_version: int = 0, acting: bool | None = None,
        timeout: int | None = None, channel: str | None = None, perm: int = 6,
        queues: int = 4, partial: bool = False) -> RegisterOp:
    return RegisterOp(registration=r.Registration(
        cluster="c", broker_name=name, broker_id=bid, broker_addr=addr,
        enable_acting_master=acting, heartbeat_timeout_ms=timeout, channel=channel,
        partial=partial,
        data_version=r.DataVersion(counter=counter, state_version=state_version),
        topics={t: r.TopicConfig(topic_name=t, read_queue_nums=queues,
                                 write_queue_nums=queues, perm=perm) for t in topics}))


def both(ops: Sequence[Operation], config: r.RoutingConfig | None = None
         ) -> tuple[RouteModel, r.RouteInfoManager, list[object]]:
    """Run ``ops`` on a model and a manager; assert equal outcomes and state."""
    clock = FakeClock(0)
    mgr = r.RouteInfoManager(clock=clock, config=config)
    model = RouteModel(config=config)
    outcomes = []
    for op in ops:
        want = model.apply(op)
        have = apply_operation(mgr, op, clock=clock)
        assert want == have, describe(op)
        outcomes.append(have)
    for topic in set(model.topics()) | set(mgr.all_topics()):
        assert model.route(topic) == mgr.pickup_route(topic), topic
    assert dict(model.live_brokers()) == dict(mgr.live_brokers())
    assert model.cluster_info() == mgr.cluster_info()
    mgr.check_invariants()
    return model, mgr, outcomes


def rows(model: RouteModel, topic: str) -> dict[str, tuple[int, int]]:
    route = model.route(topic)
    return {} if route is None else {q.broker_name: (q.write_queue_nums, int(q.perm))
                                     for q in route.queue_datas}


def test_manager_satisfies_the_system_protocol() -> None:
    assert isinstance(r.RouteInfoManager(), RoutingSystem)


def test_register_outcomes_and_master_address_for_slaves() -> None:
    _, _, out = both([reg(), reg(bid=1, addr="10.0.0.2:1"),
                      reg(name="x", topics=["A"]), reg(bid=0, addr="10.0.0.3:1",
                                                       state_version=0)])
    assert out[0] == ("accepted", None, None, 1)
    assert out[1] == ("accepted", "10.0.0.1:1", None, 2)
    assert out[2] == ("rejected", "single_topic")
    assert out[3][0] == "accepted"  # same state_version: a new master address takes id 0


def test_stale_state_version_is_rejected() -> None:
    _, _, out = both([reg(state_version=2), reg(addr="10.0.0.3:1", state_version=1)])
    assert out[1] == ("rejected", "stale_state_version")


def test_only_master_or_prime_slave_write_rows() -> None:
    model, _, _ = both([
        reg(topics=["A", "B"], queues=4),
        reg(bid=1, addr="10.0.0.2:1", topics=["A", "C"], queues=8),  # non-prime slave
    ])
    assert rows(model, "A") == {"b": (4, 6)} and model.route("C") is None
    # A pre-5.0 slave never writes, even alone; a 5.x prime slave does.
    model, _, _ = both([reg(bid=1, addr="10.0.0.2:1", topics=["A", "C"])])
    assert model.topics() == ()
    model, _, _ = both([reg(bid=1, addr="10.0.0.2:1", topics=["A", "C"], acting=False)])
    assert model.topics() == ("A", "C")
    # An acting-master prime slave writes its rows read-only.
    model, _, _ = both([reg(bid=1, addr="10.0.0.2:1", topics=["A", "C"], acting=True)])
    assert rows(model, "A") == {"b": (4, 4)}


def test_unchanged_version_only_fills_missing_rows() -> None:
    model, _, _ = both([
        reg(topics=["A", "B"], queues=4, counter=1),
        DeleteTopicOp(topic="A"),
        reg(topics=["A", "B"], queues=8, counter=1),  # same version: A missing, B kept
    ])
    assert rows(model, "A") == {"b": (8, 6)} and rows(model, "B") == {"b": (4, 6)}
    model, _, _ = both([reg(queues=4, counter=1), reg(queues=8, counter=2)])
    assert rows(model, "B") == {"b": (8, 6)}  # a changed version rewrites every row


def test_group_rows_go_with_its_last_member_and_stay_with_survivors() -> None:
    model, _, out = both([
        reg(topics=["A", "B"], timeout=1_000, channel="m"),
        reg(bid=1, addr="10.0.0.2:1", topics=["A", "B"], timeout=5_000, channel="s"),
        AdvanceOp(ms=1_000), ScanOp(),  # 0 + 1 000 == now: alive
        AdvanceOp(ms=1), ScanOp(),  # master expires; the slave keeps the rows alive
    ])
    assert out[3] == () and out[5] == (("c", "10.0.0.1:1", "b", 0, 1),)
    assert rows(model, "A") == {"b": (4, 6)}
    model, _, out = both([*[reg(topics=["A", "B"], channel="m"),
                            reg(bid=1, addr="10.0.0.2:1", channel="s")],
                          CloseChannelOp(channel="m"), CloseChannelOp(channel="s")])
    assert model.topics() == () and model.cluster_info().broker_addr_table == {}


def test_heartbeat_query_and_unregister_generations() -> None:
    _, _, out = both([
        reg(timeout=1_000), AdvanceOp(ms=900),
        HeartbeatOp(cluster="c", broker_addr="10.0.0.1:1"),
        HeartbeatOp(cluster="c", broker_addr="10.0.0.9:1"),
        QueryDataVersionOp(cluster="c", broker_addr="10.0.0.1:1",
                           data_version=r.DataVersion(counter=1)),
        AdvanceOp(ms=1_000), ScanOp(),  # refreshed at 900: alive at 1 900
        reg(timeout=1_000),  # generation 2
        UnregisterOp(request=r.UnregisterRequest(cluster="c", broker_addr="10.0.0.1:1",
                                                 broker_name="b", broker_id=0, generation=1)),
        UnregisterOp(request=r.UnregisterRequest(cluster="c", broker_addr="10.0.0.1:1",
                                                 broker_name="b", broker_id=0, generation=2)),
    ])
    assert out[2:5] == [True, False, (False, r.DataVersion(counter=1))]
    assert out[6] == () and out[8:] == [False, True]


def test_admin_writes() -> None:
    model, _, out = both([
        reg(topics=["A", "B"], perm=7), reg(name="d", addr="10.0.0.5:1"),
        WipeWritePermOp(broker_name="b"), WipeWritePermOp(broker_name="nope"),
        AddWritePermOp(broker_name="b"),
        RegisterTopicOp(topic="N", queue_datas=(r.QueueData(broker_name="d"),)),
        RegisterTopicOp(topic="N", queue_datas=(r.QueueData(broker_name="zz"),)),
        DeleteTopicOp(topic="A", cluster="other"), DeleteTopicOp(topic="A", cluster="c"),
    ])
    assert out[2:5] == [2, 0, 2]
    assert rows(model, "B") == {"b": (4, 7), "d": (4, 6)}  # D5: other bits kept
    assert out[5] is None and out[6] == ("invalid", "queue_datas[0].broker_name")
    assert out[7:] == [False, True] and model.route("A") is None


def test_acting_master_rewrite_in_routes() -> None:
    config = r.RoutingConfig(support_acting_master=True)
    model, _, _ = both([
        reg(acting=True, channel="m"), reg(bid=1, addr="10.0.0.2:1", acting=True),
        CloseChannelOp(channel="m"),
    ], config)
    route = model.route("A")
    assert route is not None and dict(route.broker_datas[0].broker_addrs) == {0: "10.0.0.2:1"}
    assert not route.queue_datas[0].writable


def test_delete_by_omission_when_configured() -> None:
    config = r.RoutingConfig(delete_topic_with_broker_registration=True)
    model, _, _ = both([reg(topics=["A", "B"]), reg(topics=["A", "C"], counter=1,
                                                    partial=True)], config)
    assert model.topics() == ("A", "B", "C")  # partial (D12): nothing deleted
    model, _, _ = both([reg(topics=["A", "B"]), reg(topics=["A", "C"], counter=1)], config)
    assert model.topics() == ("A", "C")


def test_run_operations_and_descriptions() -> None:
    clock = FakeClock(0)
    mgr = r.RouteInfoManager(clock=clock)
    ops: list[Operation] = [reg(channel="x"), AdvanceOp(ms=5), CloseChannelOp(channel=None),
                            CloseChannelOp(channel="x")]
    assert run_operations(mgr, ops, clock=clock) == [
        ("accepted", None, None, 1), 5, (), (("c", "10.0.0.1:1", "b", 0, 1),)]
    assert describe(ops[0]).startswith("register c/b id=0 10.0.0.1:1 v0.1.0 topics={A:4/4/RW-")
    assert describe(ops[1]) == "advance 5 ms"
    assert "generation=3" in UnregisterOp(request=r.UnregisterRequest(
        cluster="c", broker_addr="1.1.1.1:1", broker_name="b", broker_id=0,
        generation=3)).describe()
    with pytest.raises(TypeError):
        apply_operation(mgr, "scan", clock=clock)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RouteModel().apply("scan")  # type: ignore[arg-type]
