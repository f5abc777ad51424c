"""Availability over a topic's life: the share of the time a topic existed during which a
name server would have given a producer a writable queue for it. This is the measure of
the ``availability`` table, the summary, ``--summary-json`` and the report (one
implementation: `TopicLife`).

*Writable* is as a producer sees the route (``producer_writable_queue_count`` of the
``route_changes`` row, `TopicRouteData.producer_writable_queue_count`): some row with the
write bit whose group has a master (broker id 0). A route whose groups all lost their
master still carries write queues (``writable_queue_count``) but a Java producer skips
every one of them, so that time is an outage.

A topic's window on a name server runs from its first appearance on any name server (or
that name server's first record, if later) to the end of that name server's journal. Its
*life* is the window less the time it did not exist: the life on a name server **pauses
when the topic is deleted on purpose there**, and resumes when the topic appears again on
some name server (a re-creation starts a new stretch of the same life; the time between is
neither up nor down). A disappearance is on purpose when no session of a broker that
served the topic (a group of its last route) ended at that instant on that name server:
the brokers stayed live and the topic was deleted (or re-registered without it). When the
route vanished because its brokers expired, closed their channel, unregistered, were
replaced, or the name server restarted, the topic was unavailable, and that counts against
it (an *outage*).

`TopicLife` is fed the route changes of one topic in time order: the per-topic sweep
(``_sweep.py``, both engines) feeds it as it emits ``route_changes`` rows;
`availability_over_life` feeds it from finished rows. Which sessions ended when comes from
the ``sessions`` table (`session_removals`). All times are ms.

The ranking of the least available topics (`rank_availability`) is for the business
topics: the brokers' own topics (`is_system_topic`: the ``rmq_sys_`` prefix, Java's named
system topics, and the topics named after a cluster or a broker group) are never written
by producers, so they are ranked apart (`split_system_topics`): the member-group topic has
no write bit at all (0 %), and a broker's own topic is as available as that broker.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Mapping, Sequence

from .._errors import InvalidRequest
from ._schema import Row

__all__ = ["SYSTEM_TOPICS", "SYSTEM_TOPIC_PREFIX", "Removals", "TopicLife",
           "availability_over_life", "is_system_topic", "rank_availability",
           "session_removals", "split_system_topics", "system_topic_names"]

#: (name server, broker name, ms) of every session that ended other than by the journal's end
Removals = Container[tuple[str, str, int]]
#: Java ``TopicValidator.SYSTEM_TOPIC_PREFIX``: topics the brokers keep for themselves.
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
#: Java ``TopicValidator``'s named system topics (``isSystemTopic``).
SYSTEM_TOPICS = frozenset({
    "TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"})


def session_removals(sessions: Iterable[Row]) -> frozenset[tuple[str, str, int]]:
    """(ns, broker name, end ms) of every session that ended other than by the journal's
    end (expired, unregistered, channel closed, replaced, name-server restart)."""
    return frozenset((s["ns"], s["broker_name"], s["end_ms"]) for s in sessions
                     if s["end_reason"] != "open")


class _Life:
    """One name server's clock for one topic. Times in ms."""

    __slots__ = ("alive", "deleted_at", "deletions", "down_since", "end", "first", "groups",
                 "life", "longest", "outages", "start", "t", "up", "writable")

    def __init__(self, first: int, end: int) -> None:
        self.first, self.end = first, end
        self.start = self.t = first  # set again at the topic's first appearance
        self.writable = False
        self.groups: tuple[str, ...] = ()
        self.alive = True  # False after a deletion on purpose, until the topic reappears
        self.life = self.up = self.outages = self.longest = self.deletions = 0
        self.down_since: int | None = None  # start of the current outage
        self.deleted_at: int | None = None  # the deletion the life is paused at

    def advance(self, to: int) -> None:
        """The state is constant on [t, to): integrate it (clipped to the journal's end)."""
        to = min(to, self.end)
        if to <= self.t:
            return
        if self.alive:
            self.life += to - self.t
            if self.writable:
                self.close_outage(self.t)
                self.up += to - self.t
            elif self.down_since is None:
                self.outages += 1
                self.down_since = self.t
        else:
            self.close_outage(self.t)  # a pause of the life ends a run of down time
        self.t = to

    def close_outage(self, at: int) -> None:
        if self.down_since is not None:
            self.longest = max(self.longest, min(at, self.end) - self.down_since)
            self.down_since = None

    def resume(self, at: int) -> None:
        """The topic appeared again somewhere at ``at``: a new stretch of life starts."""
        self.advance(at)
        self.alive, self.deleted_at = True, None


class TopicLife:
    """Availability over one topic's life on every name server.

    ``spans`` maps each name server to its journal's [first, last] record times (ms);
    ``removals`` holds (ns, broker name, ms) for every session end (`session_removals`).
    Call `change` for each change of a name server's answer, in (ms, ns, seq) order, then
    `rows`."""

    def __init__(self, topic: str, spans: Mapping[str, tuple[int, int]],
                 removals: Removals) -> None:
        self.topic = topic
        self.removals = removals
        self.servers = {ns: _Life(first, last) for ns, (first, last) in sorted(spans.items())}
        self.present: dict[str, bool] = {}
        self.first_seen: int | None = None

    def change(self, ns: str, at: int, present: bool, writable: bool,
               groups: Sequence[str]) -> None:
        """Name server ``ns`` answers differently from ``at`` (ms) on: a route or none
        (``present``), with a writable queue or not, served by broker ``groups``."""
        me = self.servers.get(ns)
        if me is None:
            raise InvalidRequest(f"route change from name server {ns!r} without a span",
                                 field="ns", value=ns)
        if present and not self.present.get(ns, False):
            self._appear(at)
        self.present[ns] = present
        me.advance(at)
        if at < me.start:  # before the window: only take the state
            me.writable, me.groups = writable, tuple(groups)
            return
        if not present and me.alive and me.groups and not any(
                (ns, g, at) in self.removals for g in me.groups):
            me.alive, me.deleted_at = False, at
            me.deletions += 1
        elif present and not me.alive:
            me.alive, me.deleted_at = True, None
        # An outage ends where time passes writable or paused (`_Life.advance`), not at a
        # change: an answer that is writable for 0 ms (two changes at one instant) does not
        # split a run of down time, nor does a deletion undone at the same instant.
        me.writable = writable
        if present:
            me.groups = tuple(groups)

    def _appear(self, at: int) -> None:
        """The topic appeared on some name server where it was absent."""
        if self.first_seen is None:
            self.first_seen = at
            for s in self.servers.values():
                s.start = s.t = max(s.first, at)
            return
        for s in self.servers.values():
            # a deletion at this same instant stands; a reappearance after the journal's
            # end does not undo it
            if not s.alive and s.deleted_at is not None and s.deleted_at < at <= s.end:
                s.resume(at)

    def rows(self) -> Iterator[Row]:
        """One ``availability`` row per name server (none if the topic never appeared):
        see ``_schema.AVAILABILITY``. Call once, after the last change."""
        if self.first_seen is None:
            return
        for ns, s in self.servers.items():
            s.advance(s.end)
            s.close_outage(s.end)
            yield {"ns": ns, "topic": self.topic, "window_start_ms": s.start,
                   "window_end_ms": s.end, "window_ms": max(0, s.end - s.start),
                   "life_ms": s.life, "writable_ms": s.up,
                   "share": s.up / s.life if s.life else None, "outages": s.outages,
                   "longest_outage_ms": s.longest, "deletions": s.deletions,
                   "deleted_ms": s.deleted_at}


def availability_over_life(route_changes: Iterable[Row], sessions: Iterable[Row],
                           name_servers: Iterable[Row]) -> list[Row]:
    """The ``availability`` rows, from finished rows: ``route_changes`` (``route_json``
    not needed), ``sessions`` and ``name_servers``; the sweep computes the same rows as
    it goes. Sorted by (topic, ns)."""
    spans = {r["ns"]: (r["first_ms"], r["last_ms"]) for r in name_servers}
    removals = session_removals(sessions)
    by_topic: dict[str, list[Row]] = {}
    for r in route_changes:
        by_topic.setdefault(r["topic"], []).append(r)
    out: list[Row] = []
    for topic in sorted(by_topic):
        life = TopicLife(topic, spans, removals)
        for r in sorted(by_topic[topic], key=lambda r: (r["at_ms"], r["ns"], r["seq"])):
            life.change(r["ns"], r["at_ms"], r["present"],
                        r["producer_writable_queue_count"] > 0, r["groups"])
        out.extend(life.rows())
    return out


def system_topic_names(sessions: Iterable[Row]) -> frozenset[str]:
    """The cluster and broker-group names of the ``sessions`` rows: every broker creates a
    topic named after its cluster and one after its group (Java ``TopicConfigManager``,
    ``clusterTopicEnable``/``brokerTopicEnable``; the names ``GET_SYSTEM_TOPIC_LIST_FROM_NS``
    lists). O(sessions)."""
    return frozenset(n for s in sessions for n in (s["cluster"], s["broker_name"]))


def is_system_topic(topic: str, named: Container[str] = frozenset()) -> bool:
    """Java ``TopicValidator.isSystemTopic`` (the ``rmq_sys_`` prefix or a named system
    topic), or a name in ``named`` (`system_topic_names`). O(1)."""
    return topic.startswith(SYSTEM_TOPIC_PREFIX) or topic in SYSTEM_TOPICS or topic in named


def split_system_topics(rows: Iterable[Row], sessions: Iterable[Row]
                        ) -> tuple[list[Row], list[Row]]:
    """``availability`` rows as (business topics, system topics), each in the given order;
    the system topics as `is_system_topic` with the names of ``sessions``. O(rows +
    sessions)."""
    named = system_topic_names(sessions)
    business: list[Row] = []
    system: list[Row] = []
    for r in rows:
        (system if is_system_topic(r["topic"], named) else business).append(r)
    return business, system


def rank_availability(rows: Iterable[Row], top: int = 10) -> list[Row]:
    """The least available (topic, name server) pairs: real outages first, i.e. by share
    of the life, then the longest outage; rows with no life or no outage are left out.
    Give it one kind of topic at a time (`split_system_topics`)."""
    ranked = [r for r in rows if r["share"] is not None and r["outages"] > 0]
    ranked.sort(key=lambda r: (r["share"], -r["longest_outage_ms"], r["topic"], r["ns"]))
    return ranked[:top]
