"""Issue 13's compact state: single rows inline, single memberships as strings, shared
rows and routes. Each representation must behave exactly as the plain one it replaces."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routing as r
from core_helpers import reg, topics
from routing._state import Group, State, TopicEntry, add_one, discard_one, members, no_master

ROW_A = r.QueueData(broker_name="a", read_queue_nums=1, write_queue_nums=1)
ROW_B = r.QueueData(broker_name="b", read_queue_nums=2, write_queue_nums=2)


def test_a_topic_entry_holds_one_row_inline_and_several_in_a_dict():
    entry = TopicEntry()
    assert len(entry) == 0 and list(entry) == [] and "a" not in entry
    with pytest.raises(KeyError):
        entry["a"]
    entry["a"] = ROW_A
    assert entry._many is None and dict(entry) == {"a": ROW_A} and entry.get("b") is None
    entry["b"] = ROW_B
    assert entry._many == {"a": ROW_A, "b": ROW_B} and len(entry) == 2
    assert dict(entry.items()) == {"a": ROW_A, "b": ROW_B}
    del entry["a"]
    assert entry._many is None and dict(entry) == {"b": ROW_B} and entry["b"] is ROW_B
    assert entry.pop("b") is ROW_B and len(entry) == 0 and not entry
    with pytest.raises(KeyError):
        del entry["b"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from("abcd"), st.integers(1, 3))))
def test_a_topic_entry_behaves_as_a_dict(steps):
    entry, model = TopicEntry(), {}
    for put, name, queues in steps:
        if put:
            row = r.QueueData(broker_name=name, read_queue_nums=queues, write_queue_nums=queues)
            entry[name] = model[name] = row
        else:
            assert entry.pop(name, None) == model.pop(name, None)
        assert dict(entry) == model and dict(entry.items()) == model and len(entry) == len(model)
        assert all((n in entry) == (n in model) and entry.get(n) == model.get(n) for n in "abcd")
        assert (entry._many is not None) == (len(model) > 1)


def test_a_single_membership_is_a_string_and_several_a_set():
    index: dict[str, str | set[str]] = {}
    add_one(index, "k", "x")
    assert index == {"k": "x"} and members(index["k"]) == ("x",)
    add_one(index, "k", "x")
    assert index == {"k": "x"}
    add_one(index, "k", "y")
    assert index == {"k": {"x", "y"}} and set(members(index["k"])) == {"x", "y"}
    discard_one(index, "k", "x")
    assert index == {"k": "y"}
    discard_one(index, "k", "z")
    assert index == {"k": "y"}
    discard_one(index, "k", "y")
    assert index == {} and members(index.get("k")) == ()


def test_an_address_in_two_groups_of_a_cluster_then_in_one(clock):
    mgr = r.RouteInfoManager(clock=clock)
    mgr.register(reg("a", 0, "h:1", topic_names=("T1", "T2")))
    mgr.register(reg("b", 0, "h:1", topic_names=("T3", "T4")))
    state: State = mgr._state
    assert state.groups_of_addr[("c1", "h:1")] == {"a", "b"}
    mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)
    mgr.check_invariants()
    mgr.register(reg("b", 0, "h:1", topic_names=("T3", "T4")))
    assert state.groups_of_addr[("c1", "h:1")] == "b"
    mgr.check_invariants()


def test_equal_rows_of_one_registration_are_one_object_and_share_their_route(clock):
    mgr = r.RouteInfoManager(clock=clock)
    table = {**topics("T1", "T2", queues=4), **topics("T3", queues=8)}
    mgr.register(reg("a", 0, "h:1", topics=table))
    t1, t2, t3 = (mgr.pickup_route(t) for t in ("T1", "T2", "T3"))
    assert t1 is t2 and t1 == t2 and t3 is not t1  # equal values, one snapshot
    assert t1.queue_datas[0] is t2.queue_datas[0]
    assert t3.queue_datas[0].write_queue_nums == 8
    assert t1.broker_datas is t3.broker_datas  # the group's own one-element tuple
    assert mgr.route_version("T1") != mgr.route_version("T2")  # versions stay per topic
    assert mgr.register(reg("b", 0, "h:2", topics=topics("T2", "T9", queues=4))).accepted
    t1_after, t2_after = mgr.pickup_route("T1"), mgr.pickup_route("T2")
    assert t1_after is t1 and len(t2_after.queue_datas) == 2
    mgr.check_invariants()


def test_a_group_holds_one_member_inline_and_several_in_a_dict():
    group = Group("c", "g")
    assert group.is_empty() and dict(group.addrs) == {} and group.member(0) is None
    assert no_master(group) and not group.has_addr("h:1")
    with pytest.raises(ValueError, match="empty"):
        group.min_id()
    with pytest.raises(KeyError):
        group.del_member(0)
    group.set_member(1, "h:1")
    assert group._many is None and dict(group.addrs) == {1: "h:1"} and group.min_id() == 1
    assert group.member(1) == "h:1" and group.member(0) is None and no_master(group)
    group.set_member(1, "h:9")  # the same id moves: still inline
    assert group._many is None and dict(group.addrs) == {1: "h:9"} and group.has_addr("h:9")
    group.set_member(0, "h:0")
    assert group._many == {1: "h:9", 0: "h:0"} and group.min_id() == 0 and not no_master(group)
    assert group.member(1) == "h:9" and group.member(2) is None and group.has_addr("h:0")
    group.del_member(1)
    assert group._many is None and dict(group.addrs) == {0: "h:0"} and not group.has_addr("h:9")
    group.del_member(0)
    assert group.is_empty() and group.member(0) is None and dict(group.addrs) == {}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3), st.sampled_from("wxyz"))))
def test_a_group_behaves_as_a_dict_of_members(steps):
    group, model = Group("c", "g"), {}
    for put, bid, addr in steps:
        if put:
            group.set_member(bid, addr)
            model[bid] = addr
        elif bid in model:
            group.del_member(bid)
            del model[bid]
        else:
            with pytest.raises(KeyError):
                group.del_member(bid)
        assert dict(group.addrs) == model and group.is_empty() == (not model)
        assert all(group.member(i) == model.get(i) for i in range(4))
        assert all(group.has_addr(a) == (a in model.values()) for a in "wxyz")
        assert (group._many is not None) == (len(model) > 1)
        if model:
            assert group.min_id() == min(model)


def test_a_group_listed_in_two_clusters_holds_both_then_one(clock):
    mgr = r.RouteInfoManager(clock=clock)
    assert mgr.register(reg("a", 0, "h:1")).accepted
    assert mgr.register(reg("a", 1, "h:2", cluster="c2")).accepted
    group = mgr._state.groups["a"]
    assert group.clusters == {"c1", "c2"} and set(mgr._state.clusters) == {"c1", "c2"}
    mgr.check_invariants()
    mgr.unregister(cluster="c1", broker_addr="h:1", broker_name="a", broker_id=0)
    mgr.unregister(cluster="c2", broker_addr="h:2", broker_name="a", broker_id=1)
    assert mgr._state.groups == {} and mgr._state.clusters == {} and group.clusters is None
    mgr.check_invariants()


def test_the_tables_keep_one_copy_of_each_name(clock):
    """A re-registration brings new, equal strings: the tables keep the ones they hold."""
    mgr = r.RouteInfoManager(clock=clock)
    first = reg("".join(["br", "oker"]), 0, "".join(["h:", "1"]), cluster="".join(["clu", "s"]))
    mgr.register(first)
    again = reg("".join(["br", "oker"]), 0, "".join(["h:", "1"]), cluster="".join(["clu", "s"]))
    assert again.cluster is not first.cluster and again.broker_name is not first.broker_name
    mgr.register(again)
    state = mgr._state
    ((key, live),) = state.live.items()
    group = state.groups["broker"]
    assert key[0] is group.cluster and key[1] is group.member(0)
    assert live.broker_name is group.broker_name
    assert key[0] is next(iter(state.clusters))  # one copy of the cluster name
    other = r.RouteInfoManager(clock=clock)  # a new key's cluster name is interned
    other.register(reg("b2", 0, "h:2", cluster="".join(["clu", "s"])))
    assert next(iter(other._state.live))[0] is key[0]
    mgr.check_invariants()


@pytest.fixture
def clock() -> r.ManualClock:
    return r.ManualClock(start_ms=1_000)
