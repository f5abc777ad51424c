"""The deadline index against a naive model: same expiries in the same order.

The index files each holder under a lower bound of its real deadline and settles lazily,
so the model is the plain rule: a key expires when ``last_update + timeout < now``.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from routing._deadlines import DeadlineIndex

TIMEOUTS = [1, 10, 50, 120, 200, 300]


class Holder:
    """A live entry as the index sees it."""

    __slots__ = ("entry", "last_update", "timeout")

    def __init__(self, last_update: int, timeout: int) -> None:
        self.entry: tuple[int, object] | None = None
        self.last_update = last_update
        self.timeout = timeout


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("enter"), st.integers(0, 6), st.sampled_from(TIMEOUTS)),
        st.tuples(st.just("refresh"), st.integers(0, 6), st.just(0)),
        st.tuples(st.just("leave"), st.integers(0, 6), st.just(0)),
        st.tuples(st.just("advance"), st.integers(0, 80), st.just(0)),
        st.tuples(st.just("due"), st.just(0), st.just(0)),
        st.tuples(st.just("scan"), st.just(0), st.just(0)),
    ),
    max_size=100,
)


class EagerIndex(DeadlineIndex[int]):
    """Rebuilds as soon as stale entries outnumber the current ones."""

    SLACK = 0


def run_against_naive(ops: list[tuple[str, int, int]], slack: int | None = None) -> None:
    holders: dict[int, Holder] = {}
    index: DeadlineIndex[int] = (DeadlineIndex if slack is None else EagerIndex)(holders.get)
    now = 0
    for op, key, timeout in ops:
        if op == "enter":  # a registration: a new holder replaces the old one (put_live)
            old = holders.get(key)
            holder = holders[key] = Holder(now, timeout)
            if old is not None:
                holder.entry = old.entry
                if old.timeout == timeout:
                    continue
            index.file(key, holder)
        elif op == "refresh":  # a keep-alive: the store alone
            if key in holders:
                holders[key].last_update = now
        elif op == "leave":
            if key in holders:
                index.forget(holders.pop(key))
        elif op == "advance":
            now += key
        elif op == "due":
            index.settle(now)
            really = any(h.last_update + h.timeout < now for h in holders.values())
            assert (index.lower_bound is not None and index.lower_bound < now) == really
        else:
            due = sorted((h.last_update + h.timeout, k) for k, h in holders.items()
                         if h.last_update + h.timeout < now)
            assert index.pop_expired(now) == [k for _, k in due]  # deadline, then key
            for _, k in due:
                assert holders.pop(k).entry is None
            assert index.lower_bound is None or index.lower_bound >= now
        assert index.problems() == []
        assert len(index) == len(holders)
        assert dict(index.items()) == {k: h.last_update + h.timeout for k, h in holders.items()}
        expected = min((h.last_update + h.timeout for h in holders.values()), default=None)
        assert index.earliest() == expected
        if expected is not None:
            assert index.lower_bound is not None and index.lower_bound <= expected


@given(OPS)
def test_matches_naive_full_scan(ops):
    run_against_naive(ops)


@given(OPS)
def test_matches_naive_when_stale_entries_are_dropped_often(ops):
    run_against_naive(ops, slack=0)


def test_a_refreshed_key_is_refiled_once_its_filed_deadline_passes():
    holders = {"a": Holder(0, 100), "b": Holder(0, 150)}
    index: DeadlineIndex[str] = DeadlineIndex(holders.get)
    for key, holder in holders.items():
        index.file(key, holder)
    holders["a"].last_update = 90  # keep-alives: the index is not told
    assert index.lower_bound == 100 and holders["a"].entry == (100, "a")
    assert index.pop_expired(101) == []  # a is re-filed at 190, nothing is due
    assert holders["a"].entry == (190, "a") and index.lower_bound == 150
    assert index.pop_expired(191) == ["b", "a"]  # by real deadline: 150, then 190
    assert len(index) == 0 and index.lower_bound is None
    assert index.problems() == []


def test_entries_of_holders_that_left_are_dropped_in_bulk():
    holders: dict[int, Holder] = {}
    index: DeadlineIndex[int] = DeadlineIndex(holders.get)
    for key in range(10):
        holders[key] = Holder(0, 1_000 + key)
        index.file(key, holders[key])
    for round_ in range(200):  # a broker that registers and leaves over and over
        holders[99] = Holder(round_, 5)
        index.file(99, holders[99])
        index.forget(holders.pop(99))
        assert len(index._heap) <= 2 * len(index) + 2 * DeadlineIndex.SLACK + 2
    assert len(index) == 10 and index.problems() == []
    assert index.pop_expired(1_005) == [0, 1, 2, 3, 4]


def test_a_shorter_timeout_files_the_holder_again():
    holders = {"a": Holder(0, 300)}
    index: DeadlineIndex[str] = DeadlineIndex(holders.get)
    index.file("a", holders["a"])
    old = holders["a"]
    holders["a"] = Holder(10, 20)  # re-registered with a shorter timeout
    holders["a"].entry = old.entry
    index.file("a", holders["a"])
    assert len(index) == 1 and len(index._heap) == 2 and index.problems() == []
    assert index.pop_expired(31) == ["a"]
    assert index.pop_expired(1_000) == []  # the stale entry at 300 expires nothing
    assert len(index._heap) == 0 and index.problems() == []


def test_problems_name_a_filed_deadline_after_the_real_one():
    holders = {"a": Holder(0, 100)}
    index: DeadlineIndex[str] = DeadlineIndex(holders.get)
    index.file("a", holders["a"])
    holders["a"].timeout = 50  # shortened without filing again: the index would be late
    assert any("after its real deadline" in p for p in index.problems())
