"""The deadline index against a naive model: same expiries in the same order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from routing._deadlines import DeadlineIndex

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.integers(0, 6), st.sampled_from([10, 50, 120])),
        st.tuples(st.just("discard"), st.integers(0, 6), st.just(0)),
        st.tuples(st.just("advance"), st.integers(0, 80), st.just(0)),
        st.tuples(st.just("scan"), st.just(0), st.just(0)),
    ),
    max_size=60,
)


@given(OPS)
def test_matches_naive_full_scan(ops):
    index: DeadlineIndex[int] = DeadlineIndex()
    naive: dict[int, tuple[int, int]] = {}  # key -> (deadline, insertion order)
    now = order = 0
    for op, arg, timeout in ops:
        if op == "set":
            order += 1
            index.set(arg, timeout_ms=timeout, deadline_ms=now + timeout)
            naive[arg] = (now + timeout, order)
        elif op == "discard":
            index.discard(arg)
            naive.pop(arg, None)
        elif op == "advance":
            now += arg
        else:
            due = sorted((d, o, k) for k, (d, o) in naive.items() if d < now)
            got = index.pop_expired(now)
            assert sorted(got) == sorted(k for _, _, k in due)
            # earliest first across buckets
            deadlines = [naive[k][0] for k in got]
            assert deadlines == sorted(deadlines)
            for k in got:
                del naive[k]
        assert index.problems() == []
        assert len(index) == len(naive)
        expected = min((d for d, _ in naive.values()), default=None)
        assert index.earliest() == expected
        assert index.lower_bound is None or expected is None or index.lower_bound <= expected
