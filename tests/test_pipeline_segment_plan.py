"""How the Spark replay groups a name server's segments into tasks when the cores are few
(``_segment_files.plan_runs``, ``FileSegments.grouped``): every segment in exactly one run
of neighbouring segments, runs of about equal lines, one run per segment when there are
tasks enough. The tables of grouped runs are checked against the reference in
``test_split_replay.py`` (in one process) and ``spark/test_pipeline_split.py``."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from routing._errors import InvariantViolation
from routing.pipeline._segment_files import FileSegments, plan_runs


def _journal(counts: list[int]) -> FileSegments:
    positions = [0, *itertools.accumulate(counts)][:-1]
    return FileSegments(files=(("x.jsonl", "/x.jsonl"),),
                        starts=tuple((0, 100 * p, p + 1) for p in positions),
                        positions=tuple(positions), total=sum(counts))


_COUNTS = st.lists(st.integers(1, 500), min_size=1, max_size=60)


@given(fleet=st.lists(_COUNTS, min_size=1, max_size=4), tasks=st.integers(1, 300))
def test_runs_cover_every_segment_once_in_order_and_are_about_equal(fleet, tasks):
    journals = {f"ns-{i}": _journal(counts) for i, counts in enumerate(fleet)}
    plan = plan_runs(journals, tasks)
    assert plan.keys() == journals.keys()
    segments = sum(len(c) for c in fleet)
    if tasks >= segments:
        assert all(plan[ns] == list(range(j.count)) for ns, j in journals.items())
        return
    for (ns, journal), counts in zip(journals.items(), fleet, strict=True):
        firsts = plan[ns]
        assert firsts[0] == 0 and firsts == sorted(set(firsts)) and firsts[-1] < len(counts)
        share = max(1, round(tasks * journal.total / sum(map(sum, fleet))))
        assert len(firsts) <= min(share, len(counts))
        for a, b in itertools.pairwise([*firsts, len(counts)]):
            assert sum(counts[a:b]) <= journal.total / min(share, len(counts)) + max(counts)
        grouped = journal.grouped(firsts)
        assert grouped.count == len(firsts)
        assert grouped.counts() == [sum(counts[a:b]) for a, b in
                                    itertools.pairwise([*firsts, len(counts)])]
        assert grouped.starts == tuple(journal.starts[k] for k in firsts)


def test_the_fleet_shape_on_two_cores_runs_sixty_tasks():
    journals = {f"ns-{i}": _journal([70_000] * 40) for i in range(3)}
    plan = plan_runs(journals, 60)
    assert [len(f) for f in plan.values()] == [20, 20, 20]
    assert plan["ns-0"][:3] == [0, 2, 4]
    assert [len(f) for f in plan_runs(journals, 40).values()] == [13, 13, 13]
    assert sum(len(f) for f in plan_runs(journals, 160).values()) == 120  # 40 cores


@pytest.mark.parametrize("firsts", [[], [1, 2], [0, 2, 2], [0, 3, 1]])
def test_grouping_needs_rising_firsts_from_zero(firsts):
    with pytest.raises(InvariantViolation, match="firsts"):
        _journal([5, 5, 5, 5]).grouped(firsts)
