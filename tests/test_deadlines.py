"""The deadline index against a naive model: same expiries in the same order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from routing._deadlines import DeadlineIndex

TIMEOUTS = [1, 10, 50, 120, 200, 300]

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.integers(0, 6), st.sampled_from(TIMEOUTS)),
        st.tuples(st.just("discard"), st.integers(0, 6), st.just(0)),
        st.tuples(st.just("advance"), st.integers(0, 80), st.just(0)),
        st.tuples(st.just("scan"), st.just(0), st.just(0)),
    ),
    max_size=80,
)


def run_against_naive(ops: list[tuple[str, int, int]]) -> None:
    index: DeadlineIndex[int] = DeadlineIndex()
    naive: dict[int, tuple[int, int, int]] = {}  # key -> (deadline, timeout, refresh order)
    now = order = 0
    for op, arg, timeout in ops:
        if op == "set":
            order += 1
            previous = naive[arg][1] if arg in naive else None
            index.set(arg, timeout_ms=timeout, deadline_ms=now + timeout,
                      previous_timeout_ms=previous)
            naive[arg] = (now + timeout, timeout, order)
        elif op == "discard":
            if arg in naive:
                index.discard(arg, timeout_ms=naive.pop(arg)[1])
        elif op == "advance":
            now += arg
        else:
            due = sorted((d, k) for k, (d, _, _) in naive.items() if d < now)
            got = index.pop_expired(now)
            assert sorted(got) == sorted(k for _, k in due)
            deadlines = [naive[k][0] for k in got]
            assert deadlines == sorted(deadlines), "expired keys come in deadline order"
            for k in got:
                del naive[k]
            if index.lower_bound is not None:
                assert index.lower_bound >= now or not naive, "a scan leaves a current bound"
        assert index.problems() == []
        assert len(index) == len(naive)
        assert all((k in index) for k in naive)
        expected = min((d for d, _, _ in naive.values()), default=None)
        assert index.earliest() == expected
        if expected is not None:
            assert index.lower_bound is not None and index.lower_bound <= expected


@given(OPS)
def test_matches_naive_full_scan(ops):
    run_against_naive(ops)


@given(OPS)
def test_matches_naive_when_empty_buckets_are_unseated_often(ops):
    """With room for one empty bucket, every second emptied bucket unseats them all."""
    original = DeadlineIndex.MAX_EMPTY_BUCKETS
    DeadlineIndex.MAX_EMPTY_BUCKETS = 1
    try:
        run_against_naive(ops)
    finally:
        DeadlineIndex.MAX_EMPTY_BUCKETS = original


def test_a_lone_timeout_that_expires_over_and_over_stays_seated():
    """The benchmark's victim: no sorted-list operation per register/expire cycle."""
    index: DeadlineIndex[str] = DeadlineIndex()
    index.set("filler", timeout_ms=10**9, deadline_ms=10**9)
    now = 0
    index.set("victim", timeout_ms=1, deadline_ms=now + 1)
    heads_before = list(index._heads)
    for _ in range(50):
        now += 2
        assert index.pop_expired(now) == ["victim"]
        assert index.lower_bound == 10**9  # idle scans return at once again
        assert index.pop_expired(now) == []
        index.set("victim", timeout_ms=1, deadline_ms=now + 1)
        assert index.lower_bound == now + 1
    assert list(index._heads) == heads_before  # the stale record stays a lower bound
    assert index.problems() == []


def test_keys_from_several_buckets_merge_into_deadline_order():
    index: DeadlineIndex[str] = DeadlineIndex()
    index.set("a", timeout_ms=30, deadline_ms=30)
    index.set("b", timeout_ms=10, deadline_ms=15)
    index.set("c", timeout_ms=30, deadline_ms=35)
    index.set("d", timeout_ms=10, deadline_ms=31)
    assert index.pop_expired(40) == ["b", "a", "d", "c"]
    assert len(index) == 0 and index.lower_bound is None


def test_moving_a_key_to_another_timeout_needs_the_previous_one():
    index: DeadlineIndex[str] = DeadlineIndex()
    index.set("k", timeout_ms=10, deadline_ms=10)
    index.set("k", timeout_ms=50, deadline_ms=55, previous_timeout_ms=10)
    assert len(index) == 1 and index.earliest() == 55
    assert index.pop_expired(20) == []
    assert index.pop_expired(56) == ["k"]
    index.set("k", timeout_ms=10, deadline_ms=70)
    index.set("k", timeout_ms=50, deadline_ms=80)  # previous timeout not given: a bug
    assert any("is in buckets" in p for p in index.problems())


@pytest.mark.parametrize("timeouts", [[5], [5, 7], list(range(1, 40))])
def test_many_distinct_timeouts_unseat_empty_buckets_in_bulk(timeouts):
    index: DeadlineIndex[int] = DeadlineIndex()
    for t in timeouts:
        index.set(t, timeout_ms=t, deadline_ms=t)
    assert index.pop_expired(100) == sorted(timeouts)
    assert len(index._empty) <= DeadlineIndex.MAX_EMPTY_BUCKETS
    assert index.problems() == []
    index.set(1, timeout_ms=1000, deadline_ms=1100)
    assert index.lower_bound is not None and index.lower_bound <= 1100
    assert index.pop_expired(1101) == [1]


@given(OPS)
def test_refresh_times_kept_by_the_caller_give_the_same_answers(ops):
    """``refresh_of``: the buckets hold None and the index reads the caller's refresh times
    (as the manager's live entries keep them); every answer equals the index that holds
    them itself."""
    held: DeadlineIndex[int] = DeadlineIndex()
    refresh: dict[int, int] = {}
    read: DeadlineIndex[int] = DeadlineIndex(refresh.__getitem__)
    timeouts: dict[int, int] = {}
    now = 0
    for op, arg, timeout in ops:
        if op == "set":
            previous = timeouts.get(arg)
            held.set(arg, timeout_ms=timeout, deadline_ms=now + timeout,
                     previous_timeout_ms=previous)
            refresh[arg] = now  # raised first, then filed (the manager's order)
            if previous == timeout:
                read.touch(arg, timeout, now)
            else:
                read.set(arg, timeout_ms=timeout, deadline_ms=now + timeout,
                         previous_timeout_ms=previous)
            timeouts[arg] = timeout
        elif op == "discard":
            if arg in timeouts:
                held.discard(arg, timeout_ms=timeouts[arg])
                read.discard(arg, timeout_ms=timeouts.pop(arg))
                del refresh[arg]
        elif op == "advance":
            now += arg
        else:
            got = read.pop_expired(now)
            assert got == held.pop_expired(now)
            for k in got:
                del refresh[k], timeouts[k]
        assert read.problems() == [] and held.problems() == []
        assert sorted(read.items()) == sorted(held.items())
        assert read.earliest() == held.earliest() and len(read) == len(held)
        assert all(v is None for t in timeouts.values() for v in read.bucket_of(t).values())


def test_a_key_whose_value_is_none_is_still_discarded():
    refresh = {"k": 5}
    index: DeadlineIndex[str] = DeadlineIndex(refresh.__getitem__)
    index.set("k", timeout_ms=10, deadline_ms=15)
    index.discard("k", timeout_ms=10)
    assert len(index) == 0 and "k" not in index and index.problems() == []
