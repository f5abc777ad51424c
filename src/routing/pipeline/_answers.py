"""A name server's answer for a topic: what the replay emits and the per-topic sweep compares.

An `Answer` is what `pickup_route` answers from an instant on: present or not, the route's
digest (16 hex digits of SHA-256 over its `canonical_json`: equal routes, equal digests),
its groups and queue counts, and its text. The replay (``_deriver.py``) emits a
``route_changes`` row for it (`change_row`) or, when a name server is replayed in several
broker-group partitions, one `Contribution` per partition, whose union is the answer
(`merge_routes`); the sweep (``_sweep.py``) reads answers back from either
(`answer_of_change`, `answer_of_parts`). Parsed routes and answers are remembered by text
within a budget of characters (`_TextCache`), so a route seen before costs no parse.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import attrs

from .._values import Perm, TopicRouteData
from ._schema import Row

__all__ = ["ABSENT", "Answer", "Change", "Contribution", "answer_of_change", "answer_of_parts",
           "canonical_json", "change_row", "merge_routes", "route_digest"]

_V = TypeVar("_V")


@attrs.frozen(kw_only=True)
class Contribution:
    """One partition's answer for ``topic`` on ``ns`` after the record ``seq`` (at ``at_ms``).

    ``route_json`` is the route's `canonical_json` (the sweep takes it as the answer's
    text and digest as it is) or None when the partition has no route for the topic."""

    ns: str
    topic: str
    at_ms: int
    seq: int
    part: int
    route_json: str | None


def canonical_json(route: TopicRouteData) -> str:
    """The route's RocketMQ JSON with sorted keys and no spaces."""
    return json.dumps(route.to_json(), sort_keys=True, separators=(",", ":"))


def route_digest(route: TopicRouteData) -> str:
    """16 hex digits of SHA-256 over `canonical_json`: equal routes, equal digests."""
    return _digest(canonical_json(route))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def merge_routes(parts: Iterable[TopicRouteData]) -> TopicRouteData | None:
    """The union of disjoint per-partition routes (None if there are none).

    Rows and groups are sorted by broker name, as `RouteInfoManager.pickup_route` sorts
    them; filter servers (keyed by address) and static-topic mappings (keyed by broker name)
    are merged.
    """
    routes = list(parts)
    if not routes:
        return None
    if len(routes) == 1:
        return routes[0]
    filters: dict[str, tuple[str, ...]] = {}
    mappings: dict[str, Any] | None = None
    for route in routes:
        filters.update(route.filter_server_table)
        if route.topic_queue_mapping_by_broker is not None:
            mappings = mappings or {}
            mappings.update(route.topic_queue_mapping_by_broker)
    return TopicRouteData(
        queue_datas=sorted((q for r in routes for q in r.queue_datas),
                           key=lambda q: q.broker_name),
        broker_datas=sorted((b for r in routes for b in r.broker_datas),
                            key=lambda b: b.broker_name),
        filter_server_table=dict(sorted(filters.items())),
        order_topic_conf=next((r.order_topic_conf for r in routes if r.order_topic_conf), None),
        topic_queue_mapping_by_broker=None if mappings is None else dict(sorted(
            mappings.items())),
    )


@attrs.frozen(kw_only=True)
class Answer:
    """What one name server answers for a topic from ``since_ms`` on."""

    present: bool
    since_ms: int | None
    digest: str | None
    groups: tuple[str, ...]
    read_queue_count: int
    writable_queue_count: int
    route_json: str | None

    @classmethod
    def of(cls, route: TopicRouteData | None, since_ms: int | None) -> Answer:
        if route is None:
            return cls(present=False, since_ms=since_ms, digest=None, groups=(),
                       read_queue_count=0, writable_queue_count=0, route_json=None)
        text = canonical_json(route)
        return cls(present=True, since_ms=since_ms, digest=_digest(text),
                   groups=tuple(sorted(b.broker_name for b in route.broker_datas)),
                   read_queue_count=sum(q.read_queue_nums for q in route.queue_datas),
                   writable_queue_count=route.writable_queue_count, route_json=text)

    @property
    def writable(self) -> bool:
        return self.writable_queue_count > 0


#: No route: the answer of a topic a name server does not serve.
ABSENT = Answer.of(None, None)

#: One name server's new answer for a topic, as its ``route_changes`` row says it:
#: (at_ms, ns, seq, answer). The input of `TopicSweep.feed_changes`.
Change = tuple[int, str, int, Answer]


def change_row(ns: str, topic: str, seq: int, answer: Answer) -> Row:
    """The ``route_changes`` row of ``answer`` (at its ``since_ms``), by record ``seq``."""
    return {"ns": ns, "topic": topic, "at_ms": answer.since_ms, "seq": seq,
            "present": answer.present, "groups": list(answer.groups),
            "read_queue_count": answer.read_queue_count,
            "writable_queue_count": answer.writable_queue_count,
            "digest": answer.digest, "route_json": answer.route_json}


def answer_of_change(row: Mapping[str, Any], *, groups: tuple[str, ...] | None = None
                     ) -> Answer:
    """The answer a ``route_changes`` row records, without its route text (the sweep
    compares digests and reads groups and queue counts only); ``groups``: the row's groups
    as a tuple the caller already holds (shared between equal lists). O(groups)."""
    return Answer(present=row["present"], since_ms=row["at_ms"], digest=row["digest"],
                  groups=tuple(row["groups"]) if groups is None else groups,
                  read_queue_count=row["read_queue_count"],
                  writable_queue_count=row["writable_queue_count"], route_json=None)


class _TextCache(Generic[_V]):
    """``make(text)``, remembered by text while the remembered texts hold at most
    ``budget`` characters; past it everything is forgotten at once (O(1) amortized). A
    budget in characters, not a count of entries: a route of a topic served by every
    group can be 100 kB of JSON, and 4 096 of them held a sweep worker at 0.5 GB."""

    __slots__ = ("_budget", "_held", "_make", "_map")

    def __init__(self, make: Callable[[str], _V], budget: int) -> None:
        self._make = make
        self._budget = budget
        self._map: dict[str, _V] = {}
        self._held = 0

    def __call__(self, text: str) -> _V:
        got = self._map.get(text)
        if got is None:
            got = self._make(text)
            if self._held + len(text) > self._budget:
                self._map.clear()
                self._held = 0
            self._map[text] = got
            self._held += len(text)
        return got


#: ``TopicRouteData.from_json`` of a contribution's text, remembered: a topic's route takes
#: a few shapes over and over (a broker leaves and comes back), and the routes are
#: immutable, so equal texts share one parsed route. O(len(text)) on a miss. A parsed
#: route takes several times its text's size: 4 M characters of text.
_parsed_route: _TextCache[TopicRouteData] = _TextCache(TopicRouteData.from_json, 4 << 20)


def answer_of_parts(parts: Mapping[int, str], since_ms: int) -> Answer:
    """`Answer.of` the union of the partitions' routes (given as their canonical JSON).
    One partition (every partition of ``--partition ns``): its text's answer, remembered
    by text (`_single_answer`), so a route seen before costs no parse, merge or dump."""
    if len(parts) == 1:
        (text,) = parts.values()
        return attrs.evolve(_single_answer(text), since_ms=since_ms)
    return Answer.of(merge_routes(_parsed_route(parts[p]) for p in sorted(parts)), since_ms)


def _answer_of_text(text: str) -> Answer:
    """``Answer.of(TopicRouteData.from_json(text), None)`` for a contribution's text, read
    off the JSON document (one C-level ``json.loads``) instead of built as a route (about
    2 ms for a route of 20 groups) and dumped again: the text is the route's
    `canonical_json` already, so it is the answer's text and its digest. Equal to the slow
    form (tests/test_pipeline_topics_fast.py)."""
    doc = json.loads(text)
    queues = doc["queueDatas"]
    return Answer(present=True, since_ms=None, digest=_digest(text),
                  groups=tuple(sorted(b["brokerName"] for b in doc["brokerDatas"])),
                  read_queue_count=sum(q["readQueueNums"] for q in queues),
                  writable_queue_count=sum(q["writeQueueNums"] for q in queues
                                           if q["perm"] & Perm.WRITE),
                  route_json=text)


#: `_answer_of_text`, remembered by text (equal routes of different topics share it too):
#: an answer holds its text, so 16 M characters.
_single_answer: _TextCache[Answer] = _TextCache(_answer_of_text, 16 << 20)
