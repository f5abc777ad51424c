"""The sweep's answer read off a contribution's canonical JSON equals the one built from the
parsed route (`_topics._single_answer` against `Answer.of`)."""

from __future__ import annotations

from hypothesis import given

from routing._values import Perm, QueueData, TopicRouteData
from routing.pipeline._topics import Answer, _single_answer, _TextCache, canonical_json
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
