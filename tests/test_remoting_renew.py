"""REGISTER_BROKER's renewal path (`NameServerProcessor(renew_unchanged=True)`): the same
reply bytes and the same manager state as the full path, on fixed cases and on random
request sequences (hypothesis); and what the renewal does not tell a listener."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from routing.remoting import (
    NAMESPACE_ORDER_TOPIC_CONFIG,
    NameServerProcessor,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode,
)
from test_remoting_processor import A0, A1, B0, ManagerSpy, register, send, topics


def _pair(**config: Any) -> tuple[r.ManualClock, NameServerProcessor, NameServerProcessor,
                                  ManagerSpy]:
    clock = r.ManualClock(start_ms=1_000)
    cfg = r.RoutingConfig(**config)
    full = NameServerProcessor(r.RouteInfoManager(clock=clock, config=cfg))
    counting = ManagerSpy(r.RouteInfoManager(clock=clock, config=cfg))
    fast = NameServerProcessor(counting, renew_unchanged=True)  # type: ignore[arg-type]
    return clock, full, fast, counting


def _state(mgr: r.RouteInfoManager) -> tuple[Any, ...]:
    mgr.check_invariants()
    routes = {t: mgr.pickup_route(t) for t in mgr.all_topics()}
    lives = {k: (v, v.channel) for k, v in mgr.live_brokers().items()}
    groups = {name: mgr.broker_member_group(c, name)
              for c, names in mgr.cluster_info().cluster_addr_table.items() for name in names}
    return routes, lives, mgr.cluster_info(), groups


def _same(full: NameServerProcessor, fast: NameServerProcessor,
          **kwargs: Any) -> RemotingCommand:
    """Send one REGISTER_BROKER to both; assert equal replies and states; return the
    reply."""
    a, b = register(full, **kwargs), register(fast, **kwargs)
    assert a.response is not None and b.response is not None
    assert encode(a.response) == encode(b.response)
    assert a.notifications == b.notifications
    assert _state(full.manager) == _state(fast.manager)  # type: ignore[arg-type]
    return b.response


def test_an_unchanged_master_is_renewed_with_the_same_reply_and_state() -> None:
    clock, full, fast, counting = _pair()
    _same(full, fast)
    assert counting.calls == ["renew-miss", "register"]  # a first registration
    for _ in range(3):
        clock.advance(1_000)
        _same(full, fast)
    assert counting.calls[2:] == ["renew", "renew", "renew"]


def test_the_reply_carries_the_order_topic_table_on_the_renewal_path() -> None:
    clock, full, fast, counting = _pair()
    for proc in (full, fast):
        proc.kv.put(NAMESPACE_ORDER_TOPIC_CONFIG, "T1", "broker-a:4")
    _same(full, fast)
    clock.advance(10)
    _same(full, fast)
    assert counting.calls[-1] == "renew"
    assert b"broker-a:4" in _same(full, fast).body
    fast.return_order_topic_config_to_broker = full.return_order_topic_config_to_broker = False
    _same(full, fast)
    assert counting.calls[-1] == "renew"


def test_slaves_take_the_full_path_and_learn_their_master() -> None:
    clock, full, fast, counting = _pair()
    _same(full, fast)
    for _ in range(2):
        clock.advance(5)
        _same(full, fast, broker_id=1, addr=A1)
    assert "renew" not in counting.calls[2:]
    assert _same(full, fast, broker_id=1, addr=A1).ext_fields["masterAddr"] == A0


@pytest.mark.parametrize("change", [
    {"table": topics("T1", "T3")},                       # a topic changed
    {"version": r.DataVersion(timestamp=5, counter=2)},  # a new version
    {"channel": "another"},                              # a reconnect
    {"heartbeatTimeoutMillis": "5000"},                  # a new timeout
    {"enableActingMaster": "true"},                      # a group flag
    {"__ZONE_NAME": "z1"},
])
def test_any_change_takes_the_full_path(change: dict[str, Any]) -> None:
    clock, full, fast, counting = _pair()
    _same(full, fast)
    _same(full, fast)
    assert counting.calls[-1] == "renew"
    clock.advance(3)
    _same(full, fast, **change)
    assert counting.calls[-2:] == ["renew-miss", "register"]


@pytest.mark.parametrize("delete_by_omission", [False, True])
def test_a_smaller_table_renews_only_when_nothing_is_deleted(delete_by_omission: bool) -> None:
    clock, full, fast, counting = _pair(
        delete_topic_with_broker_registration=delete_by_omission)
    _same(full, fast)
    clock.advance(3)
    _same(full, fast, table=topics("T1"))  # same version: Java deletes T2 only by omission
    assert counting.calls[-1] == ("register" if delete_by_omission else "renew")
    assert (fast.manager.pickup_route("T2") is None) == delete_by_omission


def test_a_missing_row_is_re_added_by_the_full_path() -> None:
    _clock, full, fast, counting = _pair()
    _same(full, fast)
    for proc in (full, fast):
        assert proc.manager.delete_topic("T2")
    _same(full, fast)
    assert counting.calls[-2:] == ["renew-miss", "register"]
    assert fast.manager.pickup_route("T2") is not None


def test_a_journal_recorder_without_renew_keeps_the_full_path(tmp_path: Any) -> None:
    from routing.journal import JournalRecorder

    mgr = r.RouteInfoManager(clock=r.ManualClock(start_ms=0))
    with open(tmp_path / "j.jsonl", "w") as out:
        recorder = JournalRecorder(mgr, out, nameserver_id="ns")
        proc = NameServerProcessor(recorder, renew_unchanged=True)
        assert proc._renew is None
        register(proc)
        register(proc)


def test_the_renewal_tells_no_listener_which_is_why_it_is_opt_in() -> None:
    events: list[r.RouteChange] = []
    clock = r.ManualClock(start_ms=0)
    default = NameServerProcessor(r.RouteInfoManager(clock=clock, listener=events.append))
    register(default)
    register(default)
    assert [len(e.registered) for e in events] == [1, 1]  # every re-registration is told
    events.clear()
    opted = NameServerProcessor(r.RouteInfoManager(clock=clock, listener=events.append),
                                renew_unchanged=True)
    register(opted)
    register(opted)
    assert len(events) == 1  # the renewal: only liveness changed, and no event
    assert events[0].registered[0].first


def test_routing_serve_turns_the_renewal_on() -> None:
    import inspect

    from routing.remoting.nameserver import _serve

    assert "renew_unchanged=True" in inspect.getsource(_serve.serve)


# --------------------------------------------------------------------------- random sequences

_BROKERS = [("broker-a", 0, A0), ("broker-a", 1, A1), ("broker-b", 0, B0)]
_step = st.one_of(
    st.tuples(st.just("register"), st.sampled_from(range(len(_BROKERS))),
              st.sampled_from([("T1", "T2"), ("T1", "T3"), ("T2",), ("T1", "T2", "T4")]),
              st.integers(1, 3), st.sampled_from(["ch", "ch2"]),
              st.sampled_from([None, "5000"]), st.sampled_from([None, "true", "false"])),
    st.tuples(st.just("advance"), st.integers(0, 200_000)),
    st.tuples(st.just("scan")),
    st.tuples(st.just("delete"), st.sampled_from(["T1", "T2", "T3"])),
    st.tuples(st.just("unregister"), st.sampled_from(range(len(_BROKERS)))),
    st.tuples(st.just("close"), st.sampled_from(["ch", "ch2"])),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_step, max_size=25), st.booleans())
def test_random_sequences_answer_and_store_the_same(steps: Sequence[tuple[Any, ...]],
                                                    delete_by_omission: bool) -> None:
    clock, full, fast, counting = _pair(
        delete_topic_with_broker_registration=delete_by_omission)
    for step in steps:
        kind = step[0]
        if kind == "register":
            _, who, names, counter, channel, timeout, acting = step
            name, broker_id, addr = _BROKERS[who]
            extra = {} if timeout is None else {"heartbeatTimeoutMillis": timeout}
            if acting is not None:
                extra["enableActingMaster"] = acting
            _same(full, fast, name=name, broker_id=broker_id, addr=addr,
                  table=topics(*names), version=r.DataVersion(timestamp=5, counter=counter),
                  channel=channel, **extra)
            continue
        for proc in (full, fast):
            if kind == "advance":
                pass
            elif kind == "scan":
                proc.scan()
            elif kind == "delete":
                proc.manager.delete_topic(step[1])
            elif kind == "unregister":
                name, broker_id, addr = _BROKERS[step[1]]
                send(proc, RequestCode.UNREGISTER_BROKER, brokerName=name, brokerAddr=addr,
                     clusterName="c1", brokerId=str(broker_id))
            else:
                proc.channel_closed(step[1])
        if kind == "advance":
            clock.advance(step[1])
        assert _state(full.manager) == _state(fast.manager)  # type: ignore[arg-type]
    hits = counting.calls.count("renew")
    assert hits <= counting.calls.count("renew") + counting.calls.count("register")


def test_the_random_sequences_do_reach_the_renewal() -> None:
    clock, full, fast, counting = _pair()
    for _ in range(5):
        _same(full, fast)
        _same(full, fast, name="broker-b", addr=B0)
        clock.advance(1)
    assert counting.calls.count("renew") == 8
    assert _same(full, fast).code == ResponseCode.SUCCESS
