"""Issue 13: the periodic re-registration with an unchanged DataVersion (Java §2.1–2.2).

The fast paths (the same table object; an equal copy checked against the group's row
index) must answer exactly as the row-by-row path does: every test here also runs with the
fast check switched off (`slow`) and compares. Plus the two behaviours a mutation check
found unpinned: `DataVersion` ordering and the generation fence of `unregister`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from core_helpers import observable, reg, topics
from routing import _registration
from routing.remoting import RegisterBrokerBody

V1 = r.DataVersion(timestamp=100, counter=1)
V2 = r.DataVersion(timestamp=200, counter=2)


@pytest.fixture
def clock() -> r.ManualClock:
    return r.ManualClock(start_ms=1_000)


@pytest.fixture(params=["fast", "slow"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``slow`` switches the unchanged-table check off: every registration goes row by row."""
    if request.param == "slow":
        monkeypatch.setattr(_registration, "unchanged_table", lambda *a, **k: False)
    return str(request.param)


def manager(clock: r.ManualClock, **config: Any) -> r.RouteInfoManager:
    return r.RouteInfoManager(clock=clock, config=r.RoutingConfig(**config))


def copy_of(registration: r.Registration) -> r.Registration:
    """An equal registration whose table is freshly decoded from the wire: a new table
    object with new name strings (as a host that decodes every request hands over)."""
    data = RegisterBrokerBody(data_version=registration.data_version,
                              topics=registration.topics).encode()
    body = RegisterBrokerBody.decode(bytes(bytearray(data)))
    fresh = attrs.evolve(registration, topics=body.topics)
    assert fresh == registration and fresh.topics is not registration.topics
    return fresh


def rows(mgr: r.RouteInfoManager) -> dict[str, dict[str, tuple[int, int, int]]]:
    out = {}
    for topic in mgr.all_topics():
        route = mgr.pickup_route(topic)
        assert route is not None
        out[topic] = {q.broker_name: (q.read_queue_nums, q.write_queue_nums, int(q.perm))
                      for q in route.queue_datas}
    return out


def test_an_equal_copy_changes_nothing_and_keeps_every_snapshot(clock, mode):
    events: list[r.RouteChange] = []
    mgr = r.RouteInfoManager(clock=clock, listener=events.append)
    first = reg("a", 0, "h:1", version=V1, topic_names=tuple(f"T{i}" for i in range(50)))
    mgr.register(first)
    before = observable(mgr)
    routes = dict(before["routes"])
    events.clear()
    result = mgr.register(copy_of(first))
    assert result.accepted and not result.notifications
    after = observable(mgr)
    assert after["routes"] == routes and after["versions"] == before["versions"]
    assert all(after["routes"][t] is routes[t] for t in routes)  # no route rebuilt
    assert [e.changed_topics for e in events] == [frozenset()]
    mgr.check_invariants()


def test_an_equal_copy_with_one_topic_changed_leaves_the_row_alone(clock, mode):
    """Same version, one topic's queues differ: Java leaves existing rows alone (§2.2)."""
    mgr = manager(clock)
    table = topics("T1", "T2", "T3", queues=4)
    mgr.register(reg("a", 0, "h:1", version=V1, topics=table))
    changed = {**table, "T2": r.TopicConfig(topic_name="T2", read_queue_nums=8,
                                            write_queue_nums=8)}
    mgr.register(copy_of(reg("a", 0, "h:1", version=V1, topics=changed)))
    assert rows(mgr)["T2"] == {"a": (4, 4, 6)}
    mgr.register(copy_of(reg("a", 0, "h:1", version=V2, topics=changed)))  # a new version
    assert rows(mgr)["T2"] == {"a": (8, 8, 6)}
    mgr.check_invariants()


@pytest.mark.parametrize("same_object", [True, False])
def test_a_missing_row_comes_back_with_an_unchanged_version(clock, mode, same_object):
    mgr = manager(clock)
    first = reg("a", 0, "h:1", version=V1, topic_names=("T1", "T2", "T3"))
    mgr.register(first)
    assert mgr.delete_topic("T2")
    mgr.register(first if same_object else copy_of(first))
    assert rows(mgr)["T2"] == {"a": (4, 4, 6)}
    mgr.check_invariants()


def test_a_topic_added_under_the_same_version_gets_its_row(clock, mode):
    mgr = manager(clock)
    mgr.register(reg("a", 0, "h:1", version=V1, topic_names=("T1", "T2")))
    mgr.register(copy_of(reg("a", 0, "h:1", version=V1, topic_names=("T1", "T2", "T3"))))
    assert set(rows(mgr)) == {"T1", "T2", "T3"}


def test_the_row_of_another_group_does_not_count(clock, mode):
    """Group b holds T2, group a lost its own T2 row: a's re-registration must add it."""
    mgr = manager(clock)
    first = reg("a", 0, "h:1", version=V1, topic_names=("T1", "T2"))
    mgr.register(first)
    mgr.register(reg("b", 0, "h:2", version=V1, topic_names=("T2", "T9")))
    mgr.delete_topic("T2", cluster="c1")  # both groups are in c1: T2 goes
    mgr.register(reg("b", 0, "h:2", version=V2, topic_names=("T2", "T9")))
    mgr.register(copy_of(first))
    assert set(rows(mgr)["T2"]) == {"a", "b"}
    mgr.check_invariants()


@pytest.mark.parametrize("same_object", [True, False])
def test_a_full_registration_after_a_partial_one_deletes_by_omission(clock, mode,
                                                                    same_object):
    mgr = manager(clock, delete_topic_with_broker_registration=True)
    mgr.register(reg("a", 0, "h:1", version=V1, topic_names=("T1", "T2", "T3")))
    partial = reg("a", 0, "h:1", version=V1, topic_names=("T1", "T2"), partial=True)
    mgr.register(partial)
    assert set(rows(mgr)) == {"T1", "T2", "T3"}  # a partial one deletes nothing
    full = attrs.evolve(partial, partial=False)
    mgr.register(full if same_object else copy_of(full))
    assert set(rows(mgr)) == {"T1", "T2"}
    mgr.register(full)  # and again: nothing left to delete
    assert set(rows(mgr)) == {"T1", "T2"}
    mgr.check_invariants()


def test_a_partial_registration_after_a_full_one_deletes_nothing(clock, mode):
    mgr = manager(clock, delete_topic_with_broker_registration=True)
    full = reg("a", 0, "h:1", version=V1, topic_names=("T1", "T2", "T3"))
    mgr.register(full)
    mgr.register(copy_of(reg("a", 0, "h:1", version=V1, topic_names=("T1",), partial=True)))
    assert set(rows(mgr)) == {"T1", "T2", "T3"}
    mgr.register(copy_of(full))
    assert set(rows(mgr)) == {"T1", "T2", "T3"}


def test_static_mappings_then_the_same_table_without_them_deletes_by_omission(clock, mode):
    """A registration carrying static mappings deletes nothing; the next one without them
    does, even when it passes the very same table object."""
    mgr = manager(clock, delete_topic_with_broker_registration=True)
    mgr.register(reg("a", 0, "h:1", version=V1, topic_names=("T1", "T2")))
    mapping = r.TopicQueueMappingInfo(topic="T1", bname="a", total_queues=4)
    with_maps = reg("a", 0, "h:1", version=V2, topic_names=("T1",),
                    topic_queue_mappings={"T1": mapping})
    mgr.register(with_maps)
    assert set(rows(mgr)) == {"T1", "T2"}
    mgr.register(attrs.evolve(with_maps, topic_queue_mappings={}))  # same table, same version
    assert set(rows(mgr)) == {"T1"}
    mgr.check_invariants()


def test_a_version_that_goes_backwards_counts_as_changed(clock, mode):
    """Java compares versions for equality, not order: an older version rewrites rows."""
    mgr = manager(clock)
    mgr.register(reg("a", 0, "h:1", version=V2, topics=topics("T1", "T2", queues=4)))
    assert V1 < V2
    mgr.register(copy_of(reg("a", 0, "h:1", version=V1, topics=topics("T1", "T2", queues=8))))
    assert rows(mgr)["T1"] == {"a": (8, 8, 6)}
    assert mgr.live_brokers()[r.BrokerAddr(cluster="c1", addr="h:1")].data_version == V1


def test_a_table_applied_to_another_group_is_not_mistaken_for_this_groups(clock, mode):
    """One address, master of two groups of one cluster, one table object and version: the
    table applied to group b says nothing about group a's rows (a lacks T2)."""
    mgr = manager(clock)
    mgr.register(reg("a", 0, "h:1", version=V1, topic_names=("T1", "T3")))
    table = reg("b", 0, "h:1", version=V1, topic_names=("T1", "T2"))
    mgr.register(table)
    assert rows(mgr)["T2"] == {"b": (4, 4, 6)}
    mgr.register(attrs.evolve(table, broker_name="a"))  # same table object, into group a
    assert rows(mgr)["T2"] == {"a": (4, 4, 6), "b": (4, 4, 6)}
    mgr.check_invariants()


def test_a_slave_re_registering_writes_no_rows(clock, mode):
    mgr = manager(clock)
    mgr.register(reg("a", 0, "h:1", version=V1, topic_names=("T1",) * 1 + ("T2",)))
    slave = reg("a", 1, "h:2", version=V1, topic_names=("T1", "T2", "T5"),
                enable_acting_master=False)
    mgr.register(slave)
    mgr.register(copy_of(slave))
    assert "T5" not in rows(mgr)


class _CountingRows(dict):  # type: ignore[type-arg]
    """The group row index, counting the lookups of the name-by-name check."""

    lookups = 0

    def get(self, *args: Any) -> Any:
        type(self).lookups += 1
        return super().get(*args)


def _count_row_checks(mgr: r.RouteInfoManager, monkeypatch: pytest.MonkeyPatch) -> type:
    monkeypatch.setattr(_CountingRows, "lookups", 0)
    mgr._state.topics_of_group = _CountingRows(mgr._state.topics_of_group)
    return _CountingRows


def test_an_equal_copy_is_recognised_by_its_names_key_alone(clock, monkeypatch):
    """A decoded equal copy compares one string (`TopicTable.names_key`), not a row per
    topic; a copy naming the same topics in another order takes the name-by-name check,
    and both change nothing."""
    mgr = manager(clock)
    # decoded from the wire itself, as a host's first registration is (the body lists the
    # topics in its own order, and each decode of it in that order)
    first = copy_of(reg("a", 0, "h:1", version=V1, topic_names=tuple(f"T{i}" for i in range(30))))
    mgr.register(first)
    before = observable(mgr)
    counter = _count_row_checks(mgr, monkeypatch)
    copy = copy_of(first)
    assert copy.topics.names_key() == first.topics.names_key()
    assert copy.topics.names_key() is not first.topics.names_key()
    assert mgr.register(copy).accepted
    assert counter.lookups == 0
    reordered = attrs.evolve(first, topics=dict(reversed(list(first.topics.items()))))
    assert reordered.topics == first.topics
    assert reordered.topics.names_key() != first.topics.names_key()
    assert mgr.register(reordered).accepted
    assert counter.lookups == 1
    assert observable(mgr)["routes"] == before["routes"]
    # the reordered table is now the one applied: an equal table in its order is
    # recognised by the key again
    assert mgr.register(attrs.evolve(reordered, topics=dict(reordered.topics))).accepted
    assert counter.lookups == 1
    mgr.check_invariants()


def test_a_copy_after_a_row_changed_checks_the_rows_again(clock, monkeypatch):
    """The names key vouches only while the group's rows are the ones it was recorded
    with (the epoch stamp): after a deletion the copy is checked row by row and the
    row comes back."""
    mgr = manager(clock)
    first = reg("a", 0, "h:1", version=V1, topic_names=("T1", "T2", "T3"))
    mgr.register(first)
    counter = _count_row_checks(mgr, monkeypatch)
    assert mgr.delete_topic("T2")
    mgr.register(copy_of(first))
    assert counter.lookups == 1 and rows(mgr)["T2"] == {"a": (4, 4, 6)}


_TOPIC = st.from_regex(r"[%|a-zA-Z0-9_-]{1,6}", fullmatch=True)


@given(st.lists(_TOPIC, unique=True, max_size=8), st.lists(_TOPIC, unique=True, max_size=8))
def test_names_keys_are_equal_exactly_for_the_same_names_in_the_same_order(a, b):
    from routing._messages import TopicTable

    def table(names: list[str]) -> TopicTable:
        return TopicTable({n: r.TopicConfig(topic_name=n) for n in names})

    assert (table(a).names_key() == table(b).names_key()) == (a == b)
    assert TopicTable.of_configs([r.TopicConfig(topic_name=n) for n in a]).names_key() \
        == table(a).names_key()


# --------------------------------------------------------------------------- differential

_NAMES = [f"T{i}" for i in range(6)]
_steps = st.lists(st.one_of(
    st.tuples(st.just("register"), st.sampled_from(["same", "copy", "reversed", "new"]),
              st.sets(st.sampled_from(_NAMES), min_size=2, max_size=6),
              st.integers(1, 3), st.booleans(), st.sampled_from(["a", "b"])),
    st.tuples(st.just("delete"), st.sampled_from(_NAMES), st.booleans()),
    st.tuples(st.just("wipe"), st.sampled_from(["a", "b"])),
), max_size=25)


def _replay(steps: list[tuple[Any, ...]], clock: r.ManualClock,
            delete_by_omission: bool) -> Iterator[dict[str, Any]]:
    mgr = manager(clock, delete_topic_with_broker_registration=delete_by_omission)
    last: dict[str, r.Registration] = {}
    for step in steps:
        clock.advance(1)
        if step[0] == "register":
            _, how, names, counter, partial, group = step
            registration = reg(group, 0, f"h:{ord(group)}", version=r.DataVersion(counter=counter),
                               topic_names=tuple(sorted(names)), partial=partial)
            if how == "same" and group in last:
                registration = last[group]
            elif how == "copy" and group in last:
                registration = copy_of(last[group])
            elif how == "reversed" and group in last:  # the same names, another order
                registration = attrs.evolve(last[group], topics=dict(
                    reversed(list(last[group].topics.items()))))
            last[group] = registration
            assert mgr.register(registration).accepted
        elif step[0] == "delete":
            mgr.delete_topic(step[1], cluster="c1" if step[2] else None)
        else:
            mgr.wipe_write_perm(step[1])
        mgr.check_invariants()
        yield observable(mgr)


@settings(max_examples=150, deadline=None)
@given(_steps, st.booleans())
def test_the_fast_paths_answer_as_the_row_by_row_path(steps, delete_by_omission):
    fast = list(_replay(steps, r.ManualClock(start_ms=0), delete_by_omission))
    real = _registration.unchanged_table
    _registration.unchanged_table = lambda *a, **k: False  # type: ignore[assignment]
    try:
        slow = list(_replay(steps, r.ManualClock(start_ms=0), delete_by_omission))
    finally:
        _registration.unchanged_table = real
    assert fast == slow


# --------------------------------------------------------------------------- pinned


@pytest.mark.parametrize(("low", "high"), [
    (r.DataVersion(timestamp=5, counter=1), r.DataVersion(timestamp=0, counter=2)),
    (r.DataVersion(state_version=0, timestamp=9, counter=9),
     r.DataVersion(state_version=1, timestamp=0, counter=0)),
    (r.DataVersion(timestamp=1, counter=3), r.DataVersion(timestamp=2, counter=3)),
])
def test_data_version_orders_as_java_compare(low, high):
    """Java ``compare``: stateVersion, then counter, then timestamp (where counter and
    timestamp disagree, the counter decides)."""
    assert low < high and low <= high and high > low and high >= low
    assert not (high < low) and not (low > high)
    assert low.compare(high) == -1 and high.compare(low) == 1 and low.compare(low) == 0
    assert sorted([high, low]) == [low, high]


def test_fenced_unregister_of_a_member_without_a_live_entry_in_that_cluster(clock):
    """h:9 joined group a (created under c1) while registering under c2: it is a member of
    a, but has no live entry under c1. A call fenced by generation must change nothing."""
    mgr = manager(clock)
    mgr.register(reg("a", 0, "h:1", cluster="c1"))
    generation = mgr.register(reg("a", 1, "h:9", cluster="c2")).generation
    assert mgr.broker_member_group("c1", "a").broker_addrs == {0: "h:1", 1: "h:9"}
    before = observable(mgr)
    assert mgr.unregister(cluster="c1", broker_addr="h:9", broker_name="a", broker_id=1,
                          generation=generation) is False
    assert observable(mgr) == before
    assert mgr.unregister(cluster="c2", broker_addr="h:9", broker_name="a", broker_id=1,
                          generation=generation) is True
    assert mgr.broker_member_group("c1", "a").broker_addrs == {0: "h:1"}
    mgr.check_invariants()


# --------------------------------------------------------------------------- tables and liveness


def test_registration_checks_a_topic_table_once():
    table = r.Registration(cluster="c", broker_name="b", broker_id=0, broker_addr="h:1",
                           topics=topics("T1")).topics
    from routing._messages import TopicTable

    assert type(table) is TopicTable
    again = r.Registration(cluster="c", broker_name="b", broker_id=1, broker_addr="h:2",
                           topics=table)
    assert again.topics is table
    with pytest.raises(r.InvalidRequest, match="differs from its topic_name"):
        TopicTable({"X": r.TopicConfig(topic_name="T1")})
    with pytest.raises(r.InvalidRequest, match="must be a TopicConfig"):
        TopicTable({"X": "not a config"})  # type: ignore[dict-item]
    with pytest.raises(r.InvalidRequest, match="expected a TopicConfig"):
        TopicTable.of_configs(["not a config"])  # type: ignore[list-item]
    import pickle

    assert type(pickle.loads(pickle.dumps(table))) is TopicTable


def test_query_data_version_shares_its_unchanged_answer_until_the_next_registration(clock):
    mgr = manager(clock)
    mgr.register(reg("a", 0, "h:1", version=V1))
    def ask(v: r.DataVersion) -> r.VersionAnswer:
        return mgr.query_data_version(
            cluster="c1", broker_addr="h:1", data_version=v)
    first = ask(r.DataVersion(timestamp=100, counter=1))
    assert first == r.VersionAnswer(changed=False, stored=V1)
    assert ask(r.DataVersion(timestamp=100, counter=1)) is first
    assert ask(V2) == r.VersionAnswer(changed=True, stored=V1)
    clock.advance(10)
    mgr.register(reg("a", 0, "h:1", version=V2))
    assert ask(V2) == r.VersionAnswer(changed=False, stored=V2)
    live = mgr.live_brokers()[r.BrokerAddr(cluster="c1", addr="h:1")]
    assert live.last_update_timestamp == clock.now_ms()


def test_heartbeat_of_a_non_string_key_is_validated():
    mgr = r.RouteInfoManager(clock=r.ManualClock(start_ms=0))
    with pytest.raises(r.InvalidRequest):
        mgr.heartbeat(cluster=["c1"], broker_addr="h:1")  # type: ignore[arg-type]
    with pytest.raises(r.InvalidRequest):
        mgr.query_data_version(cluster="c1", broker_addr={"h": 1},  # type: ignore[arg-type]
                               data_version=V1)
    assert mgr.heartbeat(cluster="c1", broker_addr="h:1") is False
