"""Per-fault measurements of a run: time to stop routing to a lost broker, disagreement.

Everything is computed after the run from its timelines (`RunTimelines`; a `SimResult`
has them), with no re-simulation:

- **stopped routing** (per name server): for a fault that made broker ``A`` unreachable, the
  time from the fault until that name server's routes of the group's topics no longer list
  ``A``, looking until the fault's cause ended (restart, heal, repair). A name server that was
  not serving, or not routing to ``A`` when the fault struck, has no entry; one that goes
  down stops routing then; ``None`` means it still routed to ``A`` when the window closed
  ("kept").
- **disagreement** (per affected topic): how long, from the fault until its cause ended plus a
  settle period (180 s), the serving name servers did not all return the same route. For a
  fault on one broker group only that group's part of each route is compared, so faults on
  other groups sharing a topic (the cluster topic, say) do not count. For a name-server
  restart, only the time during which the restarted name server differed from the others
  (while they agreed among themselves) counts.
- **clients**: the same as "stopped routing", seen by the clients' 30 s polls (the slowest
  client that routed to ``A``).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs

from .._frozen import FrozenMap
from .._values import TopicRouteData
from ._faults import SETTLE_MS, FaultRecord, describe

__all__ = ["FaultSummary", "RunTimelines", "SimSummary", "summarize"]


class RunTimelines(Protocol):
    """What `summarize` reads of a run (`SimResult` has it all): the summary depends on the
    run's records, never the other way round."""

    @property
    def end_ms(self) -> int: ...
    @property
    def nameserver_ids(self) -> tuple[str, ...]: ...
    @property
    def group_names(self) -> tuple[str, ...]: ...
    @property
    def faults(self) -> tuple[FaultRecord, ...]: ...
    @property
    def route_timeline(
        self) -> Mapping[str, Mapping[str, Sequence[tuple[int, TopicRouteData | None]]]]: ...
    @property
    def serving(self) -> Mapping[str, Sequence[tuple[int, bool]]]: ...
    @property
    def client_views(self) -> Sequence[Sequence[tuple[int, frozenset[str]]]]: ...


@attrs.frozen(kw_only=True)
class FaultSummary:
    """The measurements of one fault (all durations in ms after ``at_ms``)."""

    index: int
    kind: str
    at_ms: int
    end_ms: int | None
    description: str
    target_addrs: tuple[str, ...] = ()
    #: ns id → ms until it stopped routing to the target, None if it never did in the window.
    #: Name servers that did not route to the target when the fault struck are absent.
    stopped_routing_ms: FrozenMap[str, int | None] = attrs.field(factory=FrozenMap)
    #: affected topic → ms during which the serving name servers disagreed about its route.
    disagreement_ms: FrozenMap[str, int] = attrs.field(factory=FrozenMap)
    #: ms until the slowest client stopped routing to the target (None: some never did;
    #: also None when no client routed to it, see ``clients_routing``).
    client_stopped_ms: int | None = None
    clients_routing: int = 0
    skipped: str | None = None
    note: str = ""

    @property
    def max_disagreement_ms(self) -> int:
        return max(self.disagreement_ms.values(), default=0)

    @property
    def disagreeing_topics(self) -> tuple[str, ...]:
        return tuple(t for t, ms in self.disagreement_ms.items() if ms > 0)


def _secs(ms: int | None) -> str:
    if ms is None:
        return "kept"
    return f"{ms} ms" if ms < 1_000 else f"{ms / 1000:.1f} s"


@attrs.frozen(kw_only=True)
class SimSummary:
    """One `FaultSummary` per fault, in order, and a plain-text table of them."""

    nameserver_ids: tuple[str, ...]
    rows: tuple[FaultSummary, ...]

    def headers(self) -> list[str]:
        return ["#", "at", "fault", "details", *self.nameserver_ids, "clients", "disagreed",
                "topics"]

    def table(self) -> list[list[str]]:
        """The table as strings: one row per fault, columns as `headers`. In a name-server
        column: the time until it stopped routing to the lost broker, ``kept`` if it never
        did before the cause ended, ``—`` when not applicable. ``disagreed`` is the longest
        disagreement over the affected topics, ``topics`` how many of them saw any."""
        out = []
        for row in self.rows:
            cells = [str(row.index), f"{row.at_ms / 1000:.0f} s", row.kind,
                     row.description + (f" [{row.skipped}]" if row.skipped else "")]
            for ns in self.nameserver_ids:
                cells.append(_secs(row.stopped_routing_ms[ns])
                             if ns in row.stopped_routing_ms else "—")
            cells.append(_secs(row.client_stopped_ms) if row.clients_routing else "—")
            cells.append(_secs(row.max_disagreement_ms) if row.disagreement_ms else "—")
            cells.append(f"{len(row.disagreeing_topics)}/{len(row.disagreement_ms)}")
            out.append(cells)
        return out

    def topic_table(self) -> list[list[str]]:
        """One row per (fault, affected topic) with any disagreement: fault index, kind,
        topic, how long the name servers disagreed about it. Longest first within a fault."""
        out = []
        for row in self.rows:
            for topic, ms in sorted(row.disagreement_ms.items(), key=lambda kv: (-kv[1], kv[0])):
                if ms:
                    out.append([str(row.index), row.kind, topic, _secs(ms)])
        return out

    def to_text(self) -> str:
        """The table as aligned plain text."""
        rows = [self.headers(), *self.table()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                         for r in rows)

    def to_json(self) -> list[dict[str, Any]]:
        """One JSON-ready object per fault."""
        return [{
            "index": r.index, "kind": r.kind, "at_ms": r.at_ms, "end_ms": r.end_ms,
            "description": r.description, "target_addrs": list(r.target_addrs),
            "stopped_routing_ms": dict(r.stopped_routing_ms),
            "client_stopped_ms": r.client_stopped_ms, "clients_routing": r.clients_routing,
            "max_disagreement_ms": r.max_disagreement_ms,
            "disagreement_ms": {t: ms for t, ms in r.disagreement_ms.items() if ms},
            "skipped": r.skipped, "note": r.note} for r in self.rows]


class _Steps:
    """A step function given as sorted (time, value) changes; O(log n) lookups."""

    __slots__ = ("times", "values")

    def __init__(self, steps: Sequence[tuple[int, Any]]) -> None:
        self.times = [t for t, _ in steps]
        self.values = [v for _, v in steps]

    def at(self, t: int, default: Any = None) -> Any:
        i = bisect.bisect_right(self.times, t) - 1
        return self.values[i] if i >= 0 else default

    def changes(self, a: int, b: int) -> list[int]:
        """Change times in (a, b]."""
        return self.times[bisect.bisect_right(self.times, a):bisect.bisect_right(self.times, b)]


def _routes_to(route: TopicRouteData | None, addr: str) -> bool:
    return route is not None and any(addr in d.broker_addrs.values() for d in route.broker_datas)


def _part(route: TopicRouteData | None, group: str | None) -> object:
    """The part of ``route`` about ``group`` (its queue data and broker data), or the whole
    route when ``group`` is None: what a fault on that group can change."""
    if group is None or route is None:
        return route
    return (tuple(q for q in route.queue_datas if q.broker_name == group),
            tuple(d for d in route.broker_datas if d.broker_name == group))


class _Analysis:
    def __init__(self, result: RunTimelines) -> None:
        self.result = result
        self.serving = {ns: _Steps(s) for ns, s in result.serving.items()}
        self._routes: dict[tuple[str, str], _Steps] = {}
        self.clients = [_Steps(v) for v in result.client_views]

    def route(self, topic: str, ns: str) -> _Steps:
        key = (topic, ns)
        steps = self._routes.get(key)
        if steps is None:
            line = self.result.route_timeline.get(topic)
            steps = self._routes[key] = _Steps(line[ns] if line is not None else ())
        return steps

    def stopped(self, ns: str, addr: str, topics: Sequence[str], a: int, b: int
                ) -> tuple[bool, int | None]:
        """(was routing to addr at a, ms until it stopped or None). A name server that stops
        serving (goes down) stops routing too."""
        serving = self.serving[ns]
        lines = [self.route(t, ns) for t in topics]

        def routing(t: int) -> bool:
            return bool(serving.at(t, False)) and any(_routes_to(s.at(t), addr) for s in lines)

        if not routing(a):
            return False, None
        for p in sorted({*serving.changes(a, b), *(p for s in lines for p in s.changes(a, b))}):
            if not routing(p):
                return True, p - a
        return True, None

    def disagreement(self, topic: str, a: int, b: int, group: str | None,
                     focus: str | None = None) -> int:
        """ms in [a, b) during which the serving name servers' routes of ``topic`` (only
        ``group``'s part when given) were not all equal; with ``focus``, only the time during
        which the others agreed and ``focus`` differed from them."""
        ids = self.result.nameserver_ids
        lines = [self.route(topic, ns) for ns in ids]
        serving = [self.serving[ns] for ns in ids]
        points = sorted({a, *(p for s in lines for p in s.changes(a, b) if p < b),
                         *(p for s in serving for p in s.changes(a, b) if p < b)})
        total = 0
        for i, p in enumerate(points):
            values = {ns: _part(line.at(p), group)
                      for ns, line, up in zip(ids, lines, serving, strict=True)
                      if up.at(p, False)}
            if focus is None:
                seen = list(values.values())
                split = bool(seen) and any(v != seen[0] for v in seen[1:])
            else:
                others = [v for ns, v in values.items() if ns != focus]
                split = (focus in values and bool(others)
                         and all(v == others[0] for v in others[1:])
                         and values[focus] != others[0])
            if split:
                total += (points[i + 1] if i + 1 < len(points) else b) - p
        return total

    def client_stop(self, addr: str, a: int, b: int) -> tuple[int, int | None]:
        routing, worst = 0, 0
        never = False
        for view in self.clients:
            before = view.at(a)
            if before is None or addr not in before:
                continue
            routing += 1
            stop = next((p for p in view.changes(a, b) if addr not in view.at(p)), None)
            if stop is None:
                never = True
            else:
                worst = max(worst, stop - a)
        return routing, (None if never or not routing else worst)


def summarize(result: RunTimelines) -> SimSummary:
    """Measure every fault of ``result`` (see the module doc). Cost: O(faults · affected
    topics · name servers · log(changes))."""
    analysis = _Analysis(result)
    return SimSummary(nameserver_ids=result.nameserver_ids,
                      rows=tuple(_row(analysis, f) for f in result.faults))


def _row(analysis: _Analysis, fault: FaultRecord) -> FaultSummary:
    result = analysis.result
    text = describe(fault.fault, result.group_names, result.nameserver_ids, fault.note)
    base: dict[str, Any] = {"index": fault.index, "kind": fault.kind, "at_ms": fault.start_ms,
                            "end_ms": fault.end_ms, "description": text,
                            "target_addrs": fault.target_addrs, "skipped": fault.skipped,
                            "note": fault.note}
    if fault.skipped is not None:
        return FaultSummary(**base)
    a = fault.start_ms
    cause_end = fault.end_ms if fault.end_ms is not None else result.end_ms
    b = min(result.end_ms, cause_end)
    stopped: dict[str, int | None] = {}
    clients_routing, client_ms = 0, None
    for addr in fault.target_addrs:
        for ns in result.nameserver_ids:
            routing, ms = analysis.stopped(ns, addr, fault.topics, a, b)
            if routing:
                stopped[ns] = ms
        clients_routing, client_ms = analysis.client_stop(addr, a, b)
    settle_end = min(result.end_ms, cause_end + SETTLE_MS)
    focus = fault.nameservers[0] if fault.kind == "ns_restart" and fault.nameservers else None
    disagreement = {t: analysis.disagreement(t, a, settle_end, fault.group, focus)
                    for t in fault.topics}
    return FaultSummary(**base, stopped_routing_ms=FrozenMap(stopped),
                        disagreement_ms=FrozenMap(disagreement),
                        client_stopped_ms=client_ms, clients_routing=clients_routing)
