"""The per-topic stage: route history, disagreement, availability and routes at given times.

Input: the *contributions* of one topic, from every name server and replay partition. A
contribution is one partition's `pickup_route` answer right after a journal record changed
it (`RouteChange.changed_topics`), as RocketMQ JSON (None: no route). A name server replayed
in several partitions (one per independent set of broker groups, see ``_plan.py``) has one
contribution per partition; its real answer is their union, because a route is a
disjoint union of per-group parts (rows, group data and filter servers are keyed by broker
name or by address, and partitions never share either). Replayed whole, a name server has
one partition and the union is the answer itself, so the reference and Spark run this same
code.

The sweep walks instants in time order, applies every contribution of an instant (grouped by
name server, then by journal sequence number: one record is one write), and emits a
``route_changes`` row whenever a name server's answer changed. Between instants the answers
are constant; that is when disagreement is integrated. Availability over each topic's life
is `_lifetime.TopicLife`, fed every ``route_changes`` row as it is emitted; it needs to know
which broker sessions ended when (``removals``, from the ``sessions`` table) to tell a
deletion on purpose from an outage. All times are ms.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import attrs

from .._values import Perm, TopicRouteData
from ._lifetime import Removals, TopicLife

__all__ = [
    "Answer", "Change", "Contribution", "TopicSweep", "answer_of_change", "canonical_json",
    "change_row", "merge_routes", "route_digest", "sweep_changes", "sweep_topic",
]

Row = dict[str, Any]
_V = TypeVar("_V")
Emitted = tuple[str, Row]


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
    #: `TopicRouteData.producer_writable_queue_count`: what availability counts
    producer_writable_queue_count: int
    route_json: str | None

    @classmethod
    def of(cls, route: TopicRouteData | None, since_ms: int | None) -> Answer:
        if route is None:
            return cls(present=False, since_ms=since_ms, digest=None, groups=(),
                       read_queue_count=0, writable_queue_count=0,
                       producer_writable_queue_count=0, route_json=None)
        text = canonical_json(route)
        return cls(present=True, since_ms=since_ms, digest=_digest(text),
                   groups=tuple(sorted(b.broker_name for b in route.broker_datas)),
                   read_queue_count=sum(q.read_queue_nums for q in route.queue_datas),
                   writable_queue_count=route.writable_queue_count,
                   producer_writable_queue_count=route.producer_writable_queue_count,
                   route_json=text)

    @property
    def writable(self) -> bool:
        """Some row carries the write bit."""
        return self.writable_queue_count > 0

    @property
    def producer_writable(self) -> bool:
        """A producer can write: some row with the write bit whose group has a master
        (what availability counts)."""
        return self.producer_writable_queue_count > 0


_ABSENT = Answer.of(None, None)

#: One name server's new answer for a topic, as its ``route_changes`` row says it:
#: (at_ms, ns, seq, answer). The input of `TopicSweep.feed_changes`.
Change = tuple[int, str, int, Answer]


def change_row(ns: str, topic: str, seq: int, answer: Answer) -> Row:
    """The ``route_changes`` row of ``answer`` (at its ``since_ms``), by record ``seq``."""
    return {"ns": ns, "topic": topic, "at_ms": answer.since_ms, "seq": seq,
            "present": answer.present, "groups": list(answer.groups),
            "read_queue_count": answer.read_queue_count,
            "writable_queue_count": answer.writable_queue_count,
            "producer_writable_queue_count": answer.producer_writable_queue_count,
            "digest": answer.digest, "route_json": answer.route_json}


def answer_of_change(row: Mapping[str, Any], *, groups: tuple[str, ...] | None = None
                     ) -> Answer:
    """The answer a ``route_changes`` row records, without its route text (the sweep
    compares digests and reads groups and queue counts only); ``groups``: the row's groups
    as a tuple the caller already holds (shared between equal lists). O(groups)."""
    return Answer(present=row["present"], since_ms=row["at_ms"], digest=row["digest"],
                  groups=tuple(row["groups"]) if groups is None else groups,
                  read_queue_count=row["read_queue_count"],
                  writable_queue_count=row["writable_queue_count"],
                  producer_writable_queue_count=row["producer_writable_queue_count"],
                  route_json=None)


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


def _answer_of(parts: Mapping[int, str], since_ms: int) -> Answer:
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
    mastered: dict[str, bool] = {}  # the first group of each name, as Java's producer
    for b in doc["brokerDatas"]:
        mastered.setdefault(b["brokerName"], "0" in b["brokerAddrs"])
    writable = [q for q in queues if q["perm"] & Perm.WRITE]
    return Answer(present=True, since_ms=None, digest=_digest(text),
                  groups=tuple(sorted(b["brokerName"] for b in doc["brokerDatas"])),
                  read_queue_count=sum(q["readQueueNums"] for q in queues),
                  writable_queue_count=sum(q["writeQueueNums"] for q in writable),
                  producer_writable_queue_count=sum(
                      q["writeQueueNums"] for q in writable
                      if mastered.get(q["brokerName"], False)),
                  route_json=text)


#: `_answer_of_text`, remembered by text (equal routes of different topics share it too):
#: an answer holds its text, so 16 M characters.
_single_answer: _TextCache[Answer] = _TextCache(_answer_of_text, 16 << 20)


class _Server:
    """One name server's state in the sweep: partition parts and its answer."""

    __slots__ = ("answer", "parts", "window")

    def __init__(self, window: tuple[int, int]) -> None:
        self.parts: dict[int, str] = {}  # partition -> its route's canonical JSON
        self.answer = _ABSENT
        self.window = window  # [start, end] of the journal, ms


class TopicSweep:
    """Feed one topic's contributions in (at_ms, ns, seq, part) order; read rows back.

    ``spans`` maps every name server of the input to its journal's [first, last] record
    times (ms); ``at_times`` are the instants for ``routes_at``; ``removals`` holds
    (ns, broker name, ms) of every session that ended before its journal's end
    (`_lifetime.session_removals` of the ``sessions`` rows). Rows come out as
    ``(table name, row)`` pairs from `feed` (route changes, as they happen) and `finish`
    (everything else).
    """

    def __init__(self, topic: str, spans: Mapping[str, tuple[int, int]],
                 at_times: Sequence[int] = (), *, removals: Removals) -> None:
        self.topic = topic
        self.servers = {ns: _Server(span) for ns, span in sorted(spans.items())}
        self.life = TopicLife(topic, spans, removals)
        self.at_times = sorted(set(at_times))
        self._next_at = 0
        self.now: int | None = None  # the instant whose contributions are being applied
        # disagreement over the common span [w0, w1)
        self.w0 = max((s[0] for s in spans.values()), default=0)
        self.w1 = min((s[1] for s in spans.values()), default=0)
        self.compare = len(spans) >= 2 and self.w1 > self.w0
        self.intervals: list[Row] = []
        self._open: Row | None = None
        self._routes_at: list[Row] = []

    # ------------------------------------------------------------------ input

    def feed(self, contributions: Iterable[Contribution]) -> Iterator[Emitted]:
        """Apply contributions (sorted by at_ms, ns, seq, part); yield route_changes rows."""
        pending: list[Contribution] = []
        for c in contributions:
            if pending and c.at_ms != pending[0].at_ms:
                yield from self._instant(pending)
                pending = []
            pending.append(c)
        if pending:
            yield from self._instant(pending)

    def feed_changes(self, changes: Iterable[Change]) -> None:
        """Apply answers that are already changes (sorted by at_ms, ns, seq): the
        ``route_changes`` rows of a name server replayed whole, which its replay emitted
        itself (`ReplayDeriver` with ``changes=True``). The same state as `feed` of the
        contributions they came from, without their route texts; emits nothing."""
        servers, life = self.servers, self.life
        for t, ns, _seq, answer in changes:
            if t != self.now:
                self._at(t)
            server = servers.get(ns)
            if server is None:
                raise ValueError(f"route change from name server {ns!r} without a span")
            server.answer = answer
            life.change(ns, t, answer.present, answer.producer_writable, answer.groups)

    def _at(self, t: int) -> None:
        """The sweep reaches instant ``t`` (ms): integrate the time since the last one."""
        if self.now is not None and t < self.now:
            raise ValueError(f"contributions out of order: {t} ms after {self.now} ms")
        if self.now is not None and t > self.now:
            self._advance(self.now, t)
        elif self.now is None:
            self._take_routes_at(t)  # at-times before the first instant see no route
        self.now = t

    def _instant(self, batch: list[Contribution]) -> Iterator[Emitted]:
        t = batch[0].at_ms
        self._at(t)
        i = 0
        while i < len(batch):
            ns, seq = batch[i].ns, batch[i].seq
            server = self.servers.get(ns)
            if server is None:
                raise ValueError(f"contribution from name server {ns!r} without a span")
            while i < len(batch) and batch[i].ns == ns and batch[i].seq == seq:
                c = batch[i]
                if c.route_json is None:
                    server.parts.pop(c.part, None)
                else:
                    server.parts[c.part] = c.route_json
                i += 1
            answer = _answer_of(server.parts, t)
            if (answer.present, answer.digest) == (server.answer.present, server.answer.digest):
                continue
            server.answer = answer
            self.life.change(ns, t, answer.present, answer.producer_writable, answer.groups)
            yield "route_changes", change_row(ns, self.topic, seq, answer)

    # ------------------------------------------------------------------ time passes

    def _take_routes_at(self, before: int | None) -> None:
        """Record routes_at for every requested time < ``before`` (None: all remaining)."""
        while self._next_at < len(self.at_times) and (
                before is None or self.at_times[self._next_at] < before):
            self._snapshot(self.at_times[self._next_at])
            self._next_at += 1

    def _snapshot(self, at: int) -> None:
        answers = {ns: s.answer for ns, s in self.servers.items()}
        if not any(a.present for a in answers.values()):
            return
        for ns, a in answers.items():
            self._routes_at.append({
                "at_ms": at, "ns": ns, "topic": self.topic, "present": a.present,
                "since_ms": a.since_ms, "groups": list(a.groups),
                "writable_queue_count": a.writable_queue_count, "digest": a.digest})

    def _advance(self, a: int, b: int) -> None:
        """Answers are constant on [a, b): integrate disagreement."""
        self._take_routes_at(b)
        if self.compare:
            lo, hi = max(a, self.w0), min(b, self.w1)
            if hi > lo:
                self._compare(lo, hi)

    def _compare(self, lo: int, hi: int) -> None:
        digests = {ns: s.answer.digest for ns, s in self.servers.items()}
        counts: dict[str | None, int] = {}
        for d in digests.values():
            counts[d] = counts.get(d, 0) + 1
        if len(counts) == 1:
            self._close()
            return
        top = max(counts.values())
        modal = [d for d, n in counts.items() if n == top]
        majority = modal[0] if len(modal) == 1 else object()
        out = {ns for ns, d in digests.items() if d != majority}
        current = self._open
        if current is None:
            self._open = {"topic": self.topic, "start_ms": lo, "end_ms": hi,
                          "variants": len(counts), "out_of_step": out}
        else:
            current["end_ms"] = hi
            current["variants"] = max(current["variants"], len(counts))
            current["out_of_step"] |= out

    def _close(self) -> None:
        current = self._open
        if current is not None:
            current["duration_ms"] = current["end_ms"] - current["start_ms"]
            current["open_at_end"] = False
            current["out_of_step"] = sorted(current["out_of_step"])
            self.intervals.append(current)
            self._open = None

    # ------------------------------------------------------------------ output

    def finish(self) -> Iterator[Emitted]:
        """Integrate to the end of every journal and yield the remaining rows."""
        end = max((s.window[1] for s in self.servers.values()), default=0)
        start = self.now if self.now is not None else end
        if self.now is None:
            self._take_routes_at(None)
        elif end > start:
            self._advance(start, end)
        self._take_routes_at(None)
        if self._open is not None:
            is_open = self._open["end_ms"] >= self.w1
            self._close()
            self.intervals[-1]["open_at_end"] = is_open
        yield from (("routes_at", row) for row in self._routes_at)
        yield from (("disagreement", row) for row in self.intervals)
        if self.compare:
            total = sum(r["duration_ms"] for r in self.intervals)
            span = self.w1 - self.w0
            yield "disagreement_totals", {
                "topic": self.topic, "intervals": len(self.intervals), "total_ms": total,
                "longest_ms": max((r["duration_ms"] for r in self.intervals), default=0),
                "span_ms": span, "share": total / span}
        yield from (("availability", row) for row in self.life.rows())


def sweep_changes(topic: str, changes: Iterable[Change], spans: Mapping[str, tuple[int, int]],
                  at_times: Sequence[int] = (), *, removals: Removals) -> Iterator[Emitted]:
    """Every row the topic stage produces for ``topic`` but its ``route_changes`` (given:
    ``changes`` are their answers, sorted by (at_ms, ns, seq)); ``removals`` as for
    `TopicSweep`. Equal to `sweep_topic` of the contributions behind them, less those rows."""
    sweep = TopicSweep(topic, spans, at_times, removals=removals)
    sweep.feed_changes(changes)
    yield from sweep.finish()


def sweep_topic(topic: str, contributions: Iterable[Contribution],
                spans: Mapping[str, tuple[int, int]],
                at_times: Sequence[int] = (), *, removals: Removals) -> Iterator[Emitted]:
    """Every row the topic stage produces for ``topic`` (contributions sorted by
    (at_ms, ns, seq, part)); ``removals`` as for `TopicSweep`."""
    sweep = TopicSweep(topic, spans, at_times, removals=removals)
    yield from sweep.feed(contributions)
    yield from sweep.finish()
