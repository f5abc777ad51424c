"""Tests of `routing.heartbeat`: the broker side of registration (Java study §3, spec §4).

Everything runs on a `ManualClock`; no sleeps. The helpers answer the actions the way a host
would, so each test reads as a timeline.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from routing.heartbeat import (
    FIRST_REGISTER_DELAY_MS,
    UNREGISTER_TIMEOUT_MS,
    Action,
    BrokerConfig,
    BrokerHeartbeat,
    QueryOutcome,
    SendHeartbeat,
    SendMemberGroupQuery,
    SendRegistration,
    SendUnregister,
    SendVersionQuery,
    UpdateMasterAddress,
    need_register,
    next_tick_ms,
    register_period_ms,
    rewrite_permissions,
    split_topics,
)

NS = ("ns1:9876", "ns2:9876")
RW = r.Perm.READ | r.Perm.WRITE
OK = r.RegisterResult(accepted=True, master_addr="10.0.0.9:10911",
                      ha_server_addr="10.0.0.9:10912")
V1 = r.DataVersion(timestamp=1_000, counter=1)
V2 = r.DataVersion(timestamp=2_000, counter=2)


def config(**overrides: Any) -> BrokerConfig:
    fields: dict[str, Any] = {
        "cluster": "DefaultCluster", "broker_name": "broker-a", "broker_id": 0,
        "broker_addr": "10.0.0.1:10911", "ha_server_addr": "10.0.0.1:10912",
        "name_servers": NS,
    }
    fields.update(overrides)
    return BrokerConfig(**fields)


def topic(name: str, **kw: Any) -> r.TopicConfig:
    return r.TopicConfig(topic_name=name, **kw)


def make(clock: r.ManualClock | None = None, topics: Iterable[r.TopicConfig] = (),
         **overrides: Any) -> BrokerHeartbeat:
    return BrokerHeartbeat(config(**overrides), clock=clock or r.ManualClock(start_ms=0),
                           topics=topics)


def sends(actions: Iterable[Action]) -> list[SendRegistration]:
    return [a for a in actions if isinstance(a, SendRegistration)]


def queries(actions: Iterable[Action]) -> list[SendVersionQuery]:
    return [a for a in actions if isinstance(a, SendVersionQuery)]


def reply_all(hb: BrokerHeartbeat, actions: Sequence[Action],
              result: r.RegisterResult = OK) -> list[Action]:
    """Answer every registration that expects a reply, follow-ups included; return all."""
    seen = list(actions)
    todo = [a for a in sends(actions) if not a.oneway]
    while todo:
        a = todo.pop(0)
        new = hb.on_register_reply(a.name_server, a.request_id, result)
        seen += new
        todo += [n for n in sends(new) if not n.oneway]
    return seen


def started(clock: r.ManualClock | None = None, **overrides: Any) -> BrokerHeartbeat:
    """A started broker whose immediate registration has been answered."""
    hb = make(clock, **overrides)
    reply_all(hb, hb.start())
    assert not hb.registering
    return hb


# =========================================================================== pure rules


@pytest.mark.parametrize(("configured", "period"), [
    (1, 10_000), (5_000, 10_000), (9_999, 10_000), (10_000, 10_000), (10_001, 10_001),
    (30_000, 30_000), (59_999, 59_999), (60_000, 60_000), (60_001, 60_000), (90_000, 60_000),
])
def test_register_period_truth_table(configured: int, period: int) -> None:
    assert register_period_ms(configured) == period


def test_register_period_rejects_non_int() -> None:
    with pytest.raises(r.InvalidRequest, match="register_period_ms"):
        register_period_ms(True)


@pytest.mark.parametrize(("first", "period", "now", "expected"), [
    (10_000, 30_000, 0, 10_000), (10_000, 30_000, 9_999, 10_000),
    (10_000, 30_000, 10_000, 40_000), (10_000, 30_000, 39_999, 40_000),
    (10_000, 30_000, 40_000, 70_000), (10_000, 30_000, 75_000, 100_000),
])
def test_next_tick_stays_on_the_fixed_rate_grid(first: int, period: int, now: int,
                                                expected: int) -> None:
    assert next_tick_ms(first, period, now) == expected


def test_next_tick_rejects_a_non_positive_period() -> None:
    with pytest.raises(ValueError, match="period_ms"):
        next_tick_ms(0, 0, 0)


def ans(changed: bool, stored: r.DataVersion | None = None) -> r.VersionAnswer:
    return r.VersionAnswer(changed=changed, stored=stored)


@pytest.mark.parametrize(("answers", "expected"), [
    ([], False),                                            # no name server
    ([ans(True)], True),                                    # "changed"
    ([ans(True, V1)], True),                                # "changed" wins over equal version
    ([ans(False)], False),                                  # unchanged, no body
    ([ans(False, V1)], False),                              # unchanged, same version
    ([ans(False, V2)], True),                               # different stored version
    ([QueryOutcome.FAILED], True),                          # exception
    ([QueryOutcome.ERROR_RESPONSE], False),                 # non-SUCCESS: unchanged
    ([QueryOutcome.NO_ANSWER], False),                      # after the wait: unchanged
    ([ans(False, V1), QueryOutcome.FAILED], True),
    ([ans(False, V1), QueryOutcome.ERROR_RESPONSE], False),
    ([QueryOutcome.ERROR_RESPONSE, ans(True)], True),
    ([QueryOutcome.NO_ANSWER, QueryOutcome.ERROR_RESPONSE, ans(False, V1)], False),
    ([ans(False, V1), ans(False, V1), ans(False, V2)], True),
])
def test_need_register_truth_table(answers: list[Any], expected: bool) -> None:
    assert need_register(V1, answers) is expected
    assert need_register(V1, iter(answers)) is expected  # any iterable


def test_rewrite_keeps_topics_when_broker_is_read_write() -> None:
    t = topic("T", perm=r.Perm.READ | r.Perm.WRITE | r.Perm.INHERIT, order=True)
    assert rewrite_permissions([t], RW)[0] is t
    assert rewrite_permissions([t], RW | r.Perm.INHERIT)[0] is t


@pytest.mark.parametrize(("broker_perm", "topic_perm", "expected"), [
    (r.Perm.READ, RW, r.Perm.READ),
    (r.Perm.WRITE, RW, r.Perm.WRITE),
    (r.Perm(0), RW, r.Perm(0)),
    (r.Perm.READ, r.Perm.WRITE, r.Perm(0)),
    (r.Perm.READ | r.Perm.INHERIT, RW | r.Perm.INHERIT, r.Perm.READ | r.Perm.INHERIT),
    (r.Perm.WRITE | r.Perm.PRIORITY, RW | r.Perm.PRIORITY, r.Perm.WRITE | r.Perm.PRIORITY),
])
def test_rewrite_ands_perm_and_drops_extras(broker_perm: r.Perm, topic_perm: r.Perm,
                                            expected: r.Perm) -> None:
    t = topic("T", read_queue_nums=3, write_queue_nums=5, perm=topic_perm,
              topic_sys_flag=r.TopicSysFlag.UNIT, order=True, attributes={"+a": "b"},
              topic_filter_type="MULTI_TAG")
    (out,) = rewrite_permissions([t], broker_perm)
    assert out == r.TopicConfig(topic_name="T", read_queue_nums=3, write_queue_nums=5,
                                perm=expected)


@pytest.mark.parametrize(("count", "size", "lengths"), [
    (0, None, [0]), (5, None, [5]), (0, 800, [0]), (1, 800, [1]), (799, 800, [799]),
    (800, 800, [800, 0]), (801, 800, [800, 1]), (1_600, 800, [800, 800, 0]),
    (1_601, 800, [800, 800, 1]), (3, 1, [1, 1, 1, 0]),
])
def test_split_topics_chunk_lengths(count: int, size: int | None, lengths: list[int]) -> None:
    items = [topic(f"T{i}") for i in range(count)]
    assert [len(c) for c in split_topics(items, size)] == lengths


@settings(max_examples=60, deadline=None)
@given(count=st.integers(0, 60), size=st.integers(1, 25))
def test_split_topics_covers_every_topic_once_in_order(count: int, size: int) -> None:
    items = [topic(f"T{i}") for i in range(count)]
    chunks = split_topics(items, size)
    assert [t for c in chunks for t in c] == items
    assert len(chunks) == count // size + 1
    assert all(len(c) == size for c in chunks[:-1])
    assert len(chunks[-1]) < size


# =========================================================================== configuration


def test_config_defaults_follow_java_5x() -> None:
    cfg = BrokerConfig(cluster="c", broker_name="b", broker_id=0, broker_addr="h:1")
    assert (cfg.register_period_ms, cfg.force_register, cfg.register_timeout_ms) == (
        30_000, True, 24_000)
    assert cfg.broker_permission == RW
    assert (cfg.enable_slave_acting_master, cfg.broker_heartbeat_interval_ms,
            cfg.broker_not_active_timeout_ms, cfg.compatible_with_old_namesrv) == (
        False, 1_000, 10_000, True)
    assert (cfg.enable_split_registration, cfg.split_registration_size) == (False, 800)
    assert cfg.heartbeat_timeout_ms is None
    assert cfg.effective_register_period_ms == 30_000
    assert not cfg.starts_isolated


@pytest.mark.parametrize(("field", "value"), [
    ("cluster", ""), ("broker_name", "a b"), ("broker_id", -1), ("broker_addr", "nohost"),
    ("ha_server_addr", "h:0"), ("zone_name", " "), ("name_servers", "ns1:9876"),
    ("name_servers", ("ns1:9876", "ns1:9876")), ("register_period_ms", 0),
    ("register_timeout_ms", 0), ("broker_permission", 16), ("force_register", 1),
    ("split_registration_size", 0), ("broker_heartbeat_interval_ms", -5),
    ("total_replicas", 0), ("enable_split_registration", "yes"),
])
def test_config_validation_names_the_field(field: str, value: Any) -> None:
    with pytest.raises(r.InvalidRequest) as info:
        config(**{field: value})
    assert info.value.field is not None
    assert info.value.field.startswith(f"BrokerConfig.{field}")


def test_config_bad_name_server_is_named_by_index() -> None:
    with pytest.raises(r.InvalidRequest, match=r"name_servers\[1\]"):
        config(name_servers=("ns1:9876", "bad"))


def test_heartbeat_object_rejects_a_non_config() -> None:
    with pytest.raises(r.InvalidRequest, match="BrokerConfig"):
        BrokerHeartbeat(object(), clock=r.ManualClock())  # type: ignore[arg-type]


# =========================================================================== start and schedule


def test_start_registers_immediately_with_every_name_server() -> None:
    hb = make(topics=[topic("TopicTest")])
    actions = hb.start()
    assert [a.name_server for a in sends(actions)] == list(NS)
    assert len(actions) == len(NS)
    reg = sends(actions)[0].registration
    assert reg == sends(actions)[1].registration
    assert (reg.cluster, reg.broker_name, reg.broker_id, reg.broker_addr, reg.ha_server_addr) == (
        "DefaultCluster", "broker-a", 0, "10.0.0.1:10911", "10.0.0.1:10912")
    assert reg.enable_acting_master is False  # a 5.x broker always says, never None
    assert reg.heartbeat_timeout_ms is None
    assert reg.filter_servers == ()
    assert reg.partial is False
    assert set(reg.topics) == {"TopicTest"}
    assert reg.data_version == hb.data_version
    assert all(not a.oneway and a.timeout_ms == 24_000 for a in sends(actions))
    assert hb.registering


def test_start_is_forced_even_when_force_register_is_off() -> None:
    hb = make(force_register=False)
    actions = hb.start()
    assert len(sends(actions)) == 2
    assert queries(actions) == []


def test_first_periodic_registration_at_exactly_10_000() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = started(clock)
    assert hb.next_deadline_ms() == FIRST_REGISTER_DELAY_MS == 10_000
    clock.set(9_999)
    assert hb.poll() == ()
    clock.set(10_000)
    assert len(sends(hb.poll())) == 2
    assert hb.next_deadline_ms() == 10_000 + 24_000  # waiting for this round's replies


def test_schedule_is_relative_to_start() -> None:
    clock = r.ManualClock(start_ms=5_000)
    hb = started(clock)
    assert hb.next_deadline_ms() == 15_000
    assert hb.poll(14_999) == ()
    assert sends(hb.poll(15_000))


def periodic_times(period: int, until: int) -> list[int]:
    clock = r.ManualClock(start_ms=0)
    hb = started(clock, register_period_ms=period)
    times = []
    for now in range(0, until + 1, 1_000):
        clock.set(now)
        actions = hb.poll()
        if sends(actions):
            times.append(now)
            reply_all(hb, actions)
    return times


@pytest.mark.parametrize(("period", "expected"), [
    (5_000, [10_000, 20_000, 30_000, 40_000]),       # clamped up to 10 000
    (30_000, [10_000, 40_000]),                      # default
    (90_000, [10_000, 70_000]),                      # clamped down to 60 000
])
def test_period_clamping(period: int, expected: list[int]) -> None:
    assert periodic_times(period, 70_000 if period == 90_000 else 40_000) == expected


def test_period_clamping_boundaries_exactly() -> None:
    hb = started(register_period_ms=90_000)
    reply_all(hb, hb.poll(10_000))
    assert hb.next_deadline_ms() == 70_000
    assert hb.poll(69_999) == ()
    assert sends(hb.poll(70_000))


def test_late_poll_runs_once_and_stays_on_the_grid() -> None:
    hb = started()
    actions = hb.poll(75_000)  # 10 000, 40 000 and 70 000 all passed
    assert len(sends(actions)) == 2
    reply_all(hb, actions)
    assert hb.next_deadline_ms() == 100_000


def test_disappear_time_after_start_holds_back_the_periodic_run_only() -> None:
    hb = make(disappear_time_after_start_ms=25_000)
    reply_all(hb, hb.start())  # the immediate registration is not held back (Java)
    assert hb.poll(10_000) == ()
    assert hb.next_deadline_ms() == 40_000
    assert sends(hb.poll(40_000))


def test_state_errors() -> None:
    hb = make()
    assert hb.poll(0) == ()
    assert hb.next_deadline_ms() is None
    with pytest.raises(r.RoutingError, match="before start"):
        hb.register_now()
    with pytest.raises(r.RoutingError, match="before start"):
        hb.end_isolation()
    hb.start()
    with pytest.raises(r.RoutingError, match="twice"):
        hb.start()


def test_time_must_not_go_backwards() -> None:
    hb = started(r.ManualClock(start_ms=0))
    hb.poll(5_000)
    with pytest.raises(r.InvalidRequest, match="backwards") as info:
        hb.poll(4_999)
    assert info.value.field == "now_ms"


# =========================================================================== need_register flow


def unforced(clock: r.ManualClock | None = None, **overrides: Any) -> BrokerHeartbeat:
    return started(clock, force_register=False, **overrides)


def test_unforced_round_queries_every_name_server_first() -> None:
    hb = unforced()
    actions = hb.poll(10_000)
    assert sends(actions) == []
    qs = queries(actions)
    assert [q.name_server for q in qs] == list(NS)
    assert all(q.data_version == hb.data_version and not q.oneway and q.timeout_ms == 24_000
               for q in qs)
    assert (qs[0].cluster, qs[0].broker_addr, qs[0].broker_name, qs[0].broker_id) == (
        "DefaultCluster", "10.0.0.1:10911", "broker-a", 0)


def answer(hb: BrokerHeartbeat, qs: list[SendVersionQuery], *outcomes: Any) -> list[Action]:
    out: list[Action] = []
    for q, o in zip(qs, outcomes, strict=True):
        if isinstance(o, r.VersionAnswer):
            out += hb.on_version_reply(q.name_server, q.request_id, o)
        elif o is QueryOutcome.FAILED:
            out += hb.on_failure(q.name_server, q.request_id)
        elif o is QueryOutcome.ERROR_RESPONSE:
            out += hb.on_error_response(q.name_server, q.request_id)
        elif o == "timeout":
            out += hb.on_timeout(q.name_server, q.request_id)
    return out


@pytest.mark.parametrize(("outcomes", "registers"), [
    (("same", "same"), False),
    (("no-body", "same"), False),
    (("changed", "same"), True),
    (("same", "other-version"), True),
    (("same", "failed"), True),
    (("same", "timeout"), True),
    (("error", "same"), False),
    (("error", "error"), False),
])
def test_unforced_round_registers_only_when_needed(outcomes: tuple[str, str],
                                                   registers: bool) -> None:
    hb = unforced()
    qs = queries(hb.poll(10_000))
    codes = {"same": ans(False, hb.data_version), "no-body": ans(False),
             "changed": ans(True, hb.data_version), "other-version": ans(False, V2),
             "failed": QueryOutcome.FAILED, "error": QueryOutcome.ERROR_RESPONSE,
             "timeout": "timeout"}
    first = answer(hb, qs[:1], codes[outcomes[0]])
    assert sends(first) == []  # Java waits for every name server
    out = answer(hb, qs[1:], codes[outcomes[1]])
    regs = sends(out)
    assert bool(regs) is registers
    if registers:
        assert [s.name_server for s in regs] == list(NS)
        assert regs[0].registration.data_version == hb.data_version
        assert hb.registering
    else:
        assert not hb.registering


def test_unanswered_query_counts_as_unchanged_and_late_answers_are_ignored() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = unforced(clock)
    clock.set(10_000)
    qs = queries(hb.poll())
    answer(hb, qs[:1], ans(False, hb.data_version))
    assert hb.next_deadline_ms() == 34_000
    clock.set(33_999)
    assert hb.poll() == ()
    clock.set(34_000)  # the wait ends: ns2 never answered → unchanged → no registration
    assert hb.poll() == ()
    assert not hb.registering
    assert answer(hb, qs[1:], ans(True)) == []  # too late: ignored


def test_version_bump_makes_the_next_unforced_round_register_via_a_real_manager() -> None:
    clock = r.ManualClock(start_ms=0)
    mgr = r.RouteInfoManager(clock=clock)
    hb = BrokerHeartbeat(config(force_register=False, name_servers=("ns1:9876",)), clock=clock,
                         topics=[topic("TopicTest"), topic("TopicTwo")])  # not 1: D3's guard

    def serve(actions: Iterable[Action]) -> list[Action]:
        more: list[Action] = []
        for a in actions:
            if isinstance(a, SendRegistration):
                more += hb.on_register_reply(a.name_server, a.request_id,
                                             mgr.register(a.registration))
            elif isinstance(a, SendVersionQuery) and not a.oneway:
                got = mgr.query_data_version(cluster=a.cluster, broker_addr=a.broker_addr,
                                             data_version=a.data_version)
                more += hb.on_version_reply(a.name_server, a.request_id, got)
        return more + (serve(more) if more else [])

    serve(hb.start())
    route = mgr.pickup_route("TopicTest")
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == ["broker-a"]
    clock.set(10_000)
    assert sends(serve(hb.poll())) == []  # unchanged: the query round registers nothing
    clock.set(20_000)
    out = hb.update_topics([topic("Other")])
    (inc,) = sends(out)  # sent at once, the increment only
    assert set(inc.registration.topics) == {"Other"} and inc.registration.partial
    serve(out)
    assert mgr.pickup_route("Other") is not None
    clock.set(40_000)
    queried = hb.poll()
    assert sends(serve(queried)) == []  # the name server already holds the bumped version
    assert hb.delete_topics(["Other"]) == ()  # Java sends nothing for a deletion ...
    clock.set(70_000)
    assert len(sends(serve(hb.poll()))) == 1  # ... but the bump makes the next round register


# =========================================================================== first reply wins


def test_first_successful_reply_wins() -> None:
    hb = make()
    a, b = sends(hb.start())
    other = r.RegisterResult(accepted=True, master_addr="10.9.9.9:1", ha_server_addr="10.9.9.9:2")
    out = hb.on_register_reply(b.name_server, b.request_id, other)
    assert out == (UpdateMasterAddress(master_addr="10.9.9.9:1", ha_server_addr="10.9.9.9:2",
                                       name_server=b.name_server),)
    assert hb.on_register_reply(a.name_server, a.request_id, OK) == ()
    assert (hb.master_addr, hb.master_ha_server_addr) == ("10.9.9.9:1", "10.9.9.9:2")
    assert not hb.registering


def test_rejected_and_failed_replies_never_win() -> None:
    hb = make(name_servers=("ns1:9876", "ns2:9876", "ns3:9876"))
    a, b, c = sends(hb.start())
    assert hb.on_failure(a.name_server, a.request_id) == ()
    rejected = r.RegisterResult(accepted=False, rejection="single-topic guard")
    assert hb.on_register_reply(b.name_server, b.request_id, rejected) == ()
    assert hb.master_addr is None
    (update,) = hb.on_register_reply(c.name_server, c.request_id, OK)
    assert isinstance(update, UpdateMasterAddress)
    assert update.name_server == "ns3:9876"


def test_error_response_on_a_registration_gives_no_result() -> None:
    hb = make()
    a, b = sends(hb.start())
    assert hb.on_error_response(a.name_server, a.request_id) == ()
    assert hb.on_register_reply(b.name_server, b.request_id, OK)[0] == UpdateMasterAddress(
        master_addr=OK.master_addr, ha_server_addr=OK.ha_server_addr, name_server="ns2:9876")


def test_each_round_has_its_own_winner_and_a_null_ha_keeps_the_old_one() -> None:
    hb = started()  # master 10.0.0.9:10911 / HA 10.0.0.9:10912
    actions = hb.poll(10_000)
    a = sends(actions)[0]
    out = hb.on_register_reply(a.name_server, a.request_id,
                               r.RegisterResult(accepted=True, master_addr=None))
    assert out == (UpdateMasterAddress(master_addr=None, ha_server_addr=None,
                                       name_server="ns1:9876"),)
    assert hb.master_addr is None  # Java sets the master address even when null
    assert hb.master_ha_server_addr == "10.0.0.9:10912"


# =========================================================================== late replies


def test_reply_just_before_the_wait_ends_counts() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = make(clock)
    a, _b = sends(hb.start())
    clock.set(23_999)
    assert hb.on_register_reply(a.name_server, a.request_id, OK)
    assert hb.master_addr == OK.master_addr


def test_replies_after_the_register_timeout_are_ignored() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = make(clock, register_timeout_ms=5_000)
    a, b = sends(hb.start())
    assert hb.next_deadline_ms() == 5_000
    clock.set(5_000)  # start + register_timeout_ms: the caller stopped waiting
    assert hb.poll() == ()
    assert not hb.registering
    assert hb.on_register_reply(a.name_server, a.request_id, OK) == ()
    assert hb.on_register_reply(b.name_server, b.request_id, OK) == ()
    assert hb.master_addr is None
    assert hb.next_deadline_ms() == 10_000


def test_late_reply_without_a_poll_in_between_is_ignored_too() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = make(clock, register_timeout_ms=5_000)
    a, _b = sends(hb.start())
    clock.set(5_000)
    assert hb.on_register_reply(a.name_server, a.request_id, OK) == ()
    assert hb.master_addr is None
    assert not hb.registering


def test_periodic_run_due_during_a_round_waits_for_it() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = make(clock)
    a, b = sends(hb.start())
    clock.set(10_000)
    assert hb.poll() == ()  # the start round still waits: registerBrokerAll is synchronized
    clock.set(12_000)
    hb.on_register_reply(a.name_server, a.request_id, OK)
    out = hb.on_register_reply(b.name_server, b.request_id, OK)
    assert len(sends(out)) == 2  # the queued periodic run starts as the round ends
    assert hb.next_deadline_ms() == 12_000 + 24_000


def test_round_that_times_out_releases_the_queued_run() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = make(clock, register_timeout_ms=15_000)
    hb.start()
    clock.set(10_000)
    assert hb.poll() == ()
    clock.set(15_000)
    assert len(sends(hb.poll())) == 2


def test_missed_periodic_runs_collapse_into_one() -> None:
    hb = make(register_period_ms=10_000)
    a, b = sends(hb.start())
    for now in (10_000, 20_000):
        assert hb.poll(now) == ()  # both queued behind the start round
    hb.on_register_reply(a.name_server, a.request_id, OK, now_ms=21_000)
    out = hb.on_register_reply(b.name_server, b.request_id, OK, now_ms=21_000)
    assert len(sends(out)) == 2
    assert len(sends(reply_all(hb, out))) == 2  # exactly one more round, not two


def test_unknown_ids_and_wrong_name_servers_are_ignored() -> None:
    hb = make()
    a, _b = sends(hb.start())
    assert hb.on_register_reply("ns2:9876", a.request_id, OK) == ()
    assert hb.on_register_reply(a.name_server, 9_999, OK) == ()
    assert hb.on_version_reply(a.name_server, a.request_id, ans(True)) == ()
    assert hb.master_addr is None
    assert hb.registering


# =========================================================================== permission rewrite


def test_registration_rewrites_topics_when_broker_lacks_write() -> None:
    t = topic("T", perm=RW, topic_sys_flag=r.TopicSysFlag.UNIT, order=True)
    hb = make(topics=[t], broker_permission=r.Perm.READ)
    reg = sends(hb.start())[0].registration
    assert reg.topics["T"] == r.TopicConfig(topic_name="T", perm=r.Perm.READ)
    assert hb.topics["T"] is t  # the local table keeps the original


def test_set_broker_permission_bumps_the_version_and_forces_a_round() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = started(clock, force_register=False, topics=[topic("T")])
    before = hb.data_version
    clock.set(3_000)
    out = hb.set_broker_permission(r.Perm.WRITE)
    assert hb.data_version == before.next(3_000)
    (reg,) = {s.registration for s in sends(out)}
    assert queries(out) == []  # forced: registerBrokerAll(false, false, true)
    assert reg.topics["T"].perm == r.Perm.WRITE
    assert reg.data_version == hb.data_version
    assert hb.broker_permission == r.Perm.WRITE


def started_with(topics: Iterable[r.TopicConfig], **overrides: Any) -> BrokerHeartbeat:
    hb = BrokerHeartbeat(config(**overrides), clock=r.ManualClock(start_ms=0), topics=topics)
    reply_all(hb, hb.start())
    return hb


# =========================================================================== split registration


def test_split_registration_sends_chunks_one_after_the_other() -> None:
    topics = [topic(f"T{i:04d}") for i in range(1_601)]
    mapping = r.TopicQueueMappingInfo(topic="T0000", bname="broker-a")
    hb = make(topics=topics, enable_split_registration=True)
    hb.set_queue_mappings({"T0000": mapping})
    first = sends(hb.start())
    assert len(first) == 2  # chunk 1 to both name servers, nothing else yet
    assert len(first[0].registration.topics) == 800
    seen = reply_all(hb, first)
    regs = [s.registration for s in sends(seen)]
    chunks = [regs[i] for i in range(0, len(regs), 2)]
    assert [len(c.topics) for c in chunks] == [800, 800, 1]
    assert {c.data_version for c in chunks} == {hb.data_version}
    assert all(c.partial for c in chunks)  # D12, the final chunk too
    assert [dict(c.topic_queue_mappings) for c in chunks] == [{}, {}, {"T0000": mapping}]
    assert sorted(t for c in chunks for t in c.topics) == [t.topic_name for t in topics]
    assert len([a for a in seen if isinstance(a, UpdateMasterAddress)]) == 3  # one per send


def test_split_registration_sends_the_empty_final_chunk() -> None:
    hb = make(topics=[topic(f"T{i}") for i in range(4)], enable_split_registration=True,
              split_registration_size=2, name_servers=("ns1:9876",))
    regs = [s.registration for s in sends(reply_all(hb, hb.start()))]
    assert [len(x.topics) for x in regs] == [2, 2, 0]
    assert all(x.partial for x in regs)


def test_without_split_one_full_registration_is_not_partial() -> None:
    hb = make(topics=[topic(f"T{i}") for i in range(1_000)])
    regs = {s.registration for s in sends(hb.start())}
    (reg,) = regs
    assert len(reg.topics) == 1_000
    assert reg.partial is False


def test_split_registration_skips_the_query_round() -> None:
    hb = started(force_register=False, enable_split_registration=True)
    out = hb.poll(10_000)
    assert queries(out) == []
    assert len(sends(out)) == 2


def test_next_chunk_waits_for_the_silent_name_server() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = make(clock, topics=[topic(f"T{i}") for i in range(3)], enable_split_registration=True,
              split_registration_size=2)
    a, _b = sends(hb.start())
    assert sends(hb.on_register_reply(a.name_server, a.request_id, OK)) == []
    clock.set(9_000)
    assert hb.poll() == ()
    assert hb.next_deadline_ms() == 10_000
    out = hb.poll(24_000)  # the wait for chunk 1 ends; chunk 2 goes out
    assert [len(s.registration.topics) for s in sends(out)] == [1, 1]


def test_oneway_round_sends_every_chunk_at_once() -> None:
    hb = started(topics=[topic(f"T{i}") for i in range(5)], enable_split_registration=True,
                 split_registration_size=2)
    out = hb.register_now(oneway=True)
    assert [len(s.registration.topics) for s in sends(out)] == [2, 2, 2, 2, 1, 1]
    assert all(s.oneway for s in sends(out))
    assert not hb.registering


@settings(max_examples=40, deadline=None)
@given(count=st.integers(0, 40), size=st.integers(1, 12), servers=st.integers(1, 3))
def test_split_chunks_cover_every_topic_exactly_once(count: int, size: int,
                                                     servers: int) -> None:
    names = tuple(f"ns{i}:9876" for i in range(servers))
    topics = [topic(f"T{i}") for i in range(count)]
    hb = make(topics=topics, enable_split_registration=True, split_registration_size=size,
              name_servers=names)
    seen = sends(reply_all(hb, hb.start()))
    per_server = {ns: [s.registration for s in seen if s.name_server == ns] for ns in names}
    for regs in per_server.values():
        covered = [t for reg in regs for t in reg.topics]
        assert sorted(covered) == sorted(t.topic_name for t in topics)  # once each
        assert len(regs) == count // size + 1
        assert {reg.data_version for reg in regs} == {hb.data_version}
        assert all(reg.partial for reg in regs)
    assert not hb.registering


# =========================================================================== isolation


def test_isolated_broker_neither_registers_nor_heartbeats() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = make(clock, enable_slave_acting_master=True, total_replicas=2)
    assert hb.isolated
    assert hb.start() == ()
    for now in (1_000, 2_000, 10_000, 40_000):
        clock.set(now)
        # Java keeps syncing the member group while isolated; nothing else goes out
        assert all(isinstance(a, SendMemberGroupQuery) for a in hb.poll())
    clock.set(41_500)
    out = hb.end_isolation()
    assert not hb.isolated
    assert len(sends(out)) == 2
    reply_all(hb, out)
    clock.set(42_000)
    assert len(queries(hb.poll())) == 2  # heartbeats resume
    clock.set(70_000)
    assert len(sends(hb.poll())) == 2  # so does the periodic registration


def test_isolate_stops_periodic_runs_but_not_direct_callers() -> None:
    hb = started()
    hb.isolate()
    assert hb.poll(10_000) == ()
    assert len(sends(hb.register_now())) == 2  # Java's direct callers ignore isolation


def test_single_replica_acting_master_is_not_isolated() -> None:
    hb = make(enable_slave_acting_master=True, total_replicas=1)
    assert not hb.isolated
    assert sends(hb.start())


# =========================================================================== acting master


def test_acting_master_heartbeat_is_a_oneway_version_query() -> None:
    clock = r.ManualClock(start_ms=0)
    hb = started(clock, enable_slave_acting_master=True)
    assert hb.next_deadline_ms() == 1_000
    assert hb.poll(999) == ()
    clock.set(1_000)
    qs = queries(hb.poll())
    assert [q.name_server for q in qs] == list(NS)
    assert all(q.oneway and q.timeout_ms == 1_000 and q.data_version == hb.data_version
               for q in qs)
    assert hb.next_deadline_ms() == 2_000
    assert hb.on_version_reply(qs[0].name_server, qs[0].request_id, ans(True)) == ()
    clock.set(1_500)
    hb.update_topics([topic("New")])
    clock.set(2_000)
    assert {q.data_version for q in queries(hb.poll())} == {hb.data_version}  # current one


def test_acting_master_heartbeat_without_old_namesrv_compatibility() -> None:
    hb = started(enable_slave_acting_master=True, compatible_with_old_namesrv=False,
                 broker_heartbeat_interval_ms=2_500)
    out = [a for a in hb.poll(1_000) if not isinstance(a, SendMemberGroupQuery)]
    assert out == [
        SendHeartbeat(name_server=ns, cluster="DefaultCluster", broker_addr="10.0.0.1:10911",
                      broker_name="broker-a", broker_id=0, timeout_ms=1_000) for ns in NS]
    assert not any(isinstance(a, SendHeartbeat) for a in hb.poll(3_499))
    assert len([a for a in hb.poll(3_500) if isinstance(a, SendHeartbeat)]) == 2


def test_acting_master_registration_carries_the_short_timeout() -> None:
    hb = make(enable_slave_acting_master=True)
    reg = sends(hb.start())[0].registration
    assert reg.heartbeat_timeout_ms == 10_000
    assert reg.enable_acting_master is True


def test_no_heartbeat_in_default_mode() -> None:
    hb = started()
    assert hb.next_deadline_ms() == 10_000
    assert hb.poll(1_000) == ()


def test_heartbeats_keep_going_during_a_registration_round() -> None:
    hb = make(enable_slave_acting_master=True)
    hb.start()  # unanswered: the round waits
    assert len(queries(hb.poll(1_000))) == 2


# =========================================================================== shutdown


def test_shutdown_unregisters_from_every_name_server() -> None:
    names = ("ns1:9876", "ns2:9876", "ns3:9876")
    hb = make(name_servers=names)
    a, *_ = sends(hb.start())
    out = hb.shutdown()
    assert out == tuple(
        SendUnregister(name_server=ns, cluster="DefaultCluster", broker_addr="10.0.0.1:10911",
                       broker_name="broker-a", broker_id=0, timeout_ms=UNREGISTER_TIMEOUT_MS)
        for ns in names)
    assert hb.shut_down
    assert hb.shutdown() == ()
    assert hb.next_deadline_ms() is None
    assert hb.poll(50_000) == ()
    assert hb.on_register_reply(a.name_server, a.request_id, OK) == ()
    assert hb.register_now() == ()
    assert hb.update_topics([topic("Late")]) == ()  # the table still works, nothing is sent
    assert hb.data_version.counter == 1


def test_shutdown_before_start_still_unregisters() -> None:
    hb = make()
    assert len(hb.shutdown()) == 2
    with pytest.raises(r.RoutingError, match="after shutdown"):
        hb.start()


# =========================================================================== topic table


def test_topic_updates_bump_the_data_version() -> None:
    clock = r.ManualClock(start_ms=100)
    hb = make(clock)
    assert hb.data_version == r.DataVersion(timestamp=100, counter=0)
    clock.set(200)
    hb.update_topics([topic("A"), topic("B")])  # not started: nothing to send
    assert hb.data_version == r.DataVersion(timestamp=200, counter=1)
    hb.update_topics([topic("A")], now_ms=250)  # unchanged: no bump (Java's idempotent update)
    assert hb.data_version.counter == 1
    clock.set(300)
    assert hb.bump_data_version(state_version=7) == r.DataVersion(
        state_version=7, timestamp=300, counter=2)
    clock.set(400)
    assert hb.delete_topics(["A", "Missing"]) == ()
    assert hb.data_version.state_version == 7  # the epoch is kept
    assert hb.data_version.counter == 3
    hb.delete_topics(["Missing"])
    assert hb.data_version.counter == 3  # nothing removed, no bump
    assert hb.set_topics([topic("C")], now_ms=500) == r.DataVersion(
        state_version=7, timestamp=500, counter=4)
    assert set(hb.topics) == {"C"}


def test_topic_input_is_validated() -> None:
    hb = make()
    with pytest.raises(r.InvalidRequest, match="TopicConfig"):
        hb.update_topics(["A"])  # type: ignore[list-item]
    with pytest.raises(r.InvalidRequest, match="not a str"):
        hb.delete_topics("A")
    with pytest.raises(r.InvalidRequest, match="TopicQueueMappingInfo"):
        hb.set_queue_mappings({"A": "x"})  # type: ignore[dict-item]


def test_round_snapshots_the_table_at_its_start() -> None:
    hb = make(topics=[topic("A")], name_servers=("ns1:9876",))
    (a,) = sends(hb.start())
    hb.update_topics([topic("B")], now_ms=5)
    assert set(a.registration.topics) == {"A"}
    assert a.registration.data_version.counter == 0


def test_no_name_servers_means_nothing_to_send() -> None:
    hb = make(name_servers=(), force_register=False)
    assert hb.start() == ()
    assert not hb.registering
    assert hb.poll(10_000) == ()  # query round with no server: need_register([]) is False
    assert hb.shutdown() == ()
