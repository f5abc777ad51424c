"""The sweep's answer read off a contribution's canonical JSON equals the one built from the
parsed route (`_topics._single_answer` against `Answer.of`), and sweeping route changes
equals sweeping the contributions behind them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from routing._values import Perm, QueueData, TopicRouteData
from routing.pipeline._answers import (
    Answer,
    Contribution,
    _single_answer,
    _TextCache,
    answer_of_change,
    canonical_json,
)
from routing.pipeline._sweep import sweep_changes, sweep_topic
from routing.testing.strategies import topic_route_datas


@given(topic_route_datas())
def test_single_answer_equals_the_answer_of_the_parsed_route(route: TopicRouteData) -> None:
    text = canonical_json(route)
    assert _single_answer(text) == Answer.of(TopicRouteData.from_json(text), None)
    assert _single_answer(text) == Answer.of(route, None)


def test_write_bit_and_read_queues_count_as_in_the_route() -> None:
    route = TopicRouteData(queue_datas=[
        QueueData(broker_name="b", read_queue_nums=3, write_queue_nums=5, perm=Perm.READ),
        QueueData(broker_name="a", read_queue_nums=2, write_queue_nums=7,
                  perm=Perm.READ | Perm.WRITE)], broker_datas=[])
    answer = _single_answer(canonical_json(route))
    assert (answer.read_queue_count, answer.writable_queue_count) == (5, 7)
    assert answer.writable and answer.present and answer.groups == ()


def test_text_cache_forgets_everything_past_its_budget_in_characters() -> None:
    made: list[str] = []

    def make(text: str) -> int:
        made.append(text)
        return len(made)

    cache = _TextCache(make, 10)
    assert (cache("abcd"), cache("abcd"), cache("efgh")) == (1, 1, 2)  # 8 characters held
    assert cache("ijk") == 3  # 11 > 10: the others are forgotten, "ijk" is kept
    assert cache("ijk") == 3 and cache("abcd") == 4 and made == ["abcd", "efgh", "ijk", "abcd"]


@given(st.lists(st.tuples(st.sampled_from(["ns-a", "ns-b"]), st.integers(0, 3),
                          st.one_of(st.none(), topic_route_datas())), max_size=25),
       st.lists(st.integers(0, 60), max_size=3))
def test_sweeping_route_changes_equals_sweeping_their_contributions(
        steps: list[tuple[str, int, TopicRouteData | None]], at: list[int]) -> None:
    """What a whole name server's replay hands the sweep (its ``route_changes`` rows'
    answers, `TopicSweep.feed_changes`) gives every other row the sweep makes from the
    contributions themselves."""
    contributions, t = [], 0
    for seq, (ns, step, route) in enumerate(steps, start=1):
        t += step  # several contributions may share an instant
        contributions.append(Contribution(ns=ns, topic="T", at_ms=t, seq=seq, part=0,
                                          route_json=None if route is None
                                          else canonical_json(route)))
    spans = {"ns-a": (0, t + 10), "ns-b": (5, t + 20)}
    removals: frozenset[tuple[str, str, int]] = frozenset()
    rows = list(sweep_topic("T", contributions, spans, at, removals=removals))
    changes = [(r["at_ms"], r["ns"], r["seq"], answer_of_change(r))
               for table, r in rows if table == "route_changes"]
    assert list(sweep_changes("T", changes, spans, at, removals=removals)) == [
        (table, r) for table, r in rows if table != "route_changes"]
