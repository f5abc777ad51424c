"""The sweep stage: route history, disagreement, availability and routes at given times, per topic.

Input: one topic's answers from every name server, in time order. Replayed whole (the
reference, and Spark's default ``partition="ns"``), a name server's replay emits its
``route_changes`` itself and the sweep takes their answers (`sweep_changes`). Replayed
in several partitions (``partition="group"``, one per independent set of broker groups,
see ``_groups.py``), a name server gives one *contribution* per partition after each
record that changed the topic (`Contribution`); its real answer is their union, because a
route is a disjoint union of per-group parts (rows, group data and filter servers are
keyed by broker name or by address, and partitions never share either), and the sweep
emits the ``route_changes`` rows itself (`sweep_topic`).

The sweep walks instants in time order, applies every answer of an instant (grouped by
name server, then by journal sequence number: one record is one write), and emits a
``route_changes`` row whenever a name server's answer changed. Between instants the answers
are constant; that is when disagreement is integrated. Availability over each topic's life
is `_availability.TopicLife`, fed every change as it happens; it needs to know which broker
sessions ended when (``removals``, from the ``sessions`` table) to tell a deletion on
purpose from an outage. All times are ms.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from .._errors import InvalidRequest
from ._answers import ABSENT, Change, Contribution, answer_of_parts, change_row
from ._availability import Removals, TopicLife
from ._schema import Emitted, Row

__all__ = ["TopicSweep", "sweep_changes", "sweep_topic"]


class _Server:
    """One name server's state in the sweep: partition parts and its answer."""

    __slots__ = ("answer", "parts", "window")

    def __init__(self, window: tuple[int, int]) -> None:
        self.parts: dict[int, str] = {}  # partition -> its route's canonical JSON
        self.answer = ABSENT
        self.window = window  # [start, end] of the journal, ms


class TopicSweep:
    """Feed one topic's contributions in (at_ms, ns, seq, part) order; read rows back.

    ``spans`` maps every name server of the input to its journal's [first, last] record
    times (ms); ``at_times`` are the instants for ``routes_at``; ``removals`` holds
    (ns, broker name, ms) of every session that ended before its journal's end
    (`_availability.session_removals` of the ``sessions`` rows). Rows come out as
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
                raise InvalidRequest(f"route change from name server {ns!r} without a span",
                                     field="ns", value=ns)
            server.answer = answer
            life.change(ns, t, answer.present, answer.writable, answer.groups)

    def _at(self, t: int) -> None:
        """The sweep reaches instant ``t`` (ms): integrate the time since the last one."""
        if self.now is not None and t < self.now:
            raise InvalidRequest(f"contributions out of order: {t} ms after {self.now} ms",
                                 field="at_ms", value=t)
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
                raise InvalidRequest(f"contribution from name server {ns!r} without a span",
                                     field="ns", value=ns)
            while i < len(batch) and batch[i].ns == ns and batch[i].seq == seq:
                c = batch[i]
                if c.route_json is None:
                    server.parts.pop(c.part, None)
                else:
                    server.parts[c.part] = c.route_json
                i += 1
            answer = answer_of_parts(server.parts, t)
            if (answer.present, answer.digest) == (server.answer.present, server.answer.digest):
                continue
            server.answer = answer
            self.life.change(ns, t, answer.present, answer.writable, answer.groups)
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
