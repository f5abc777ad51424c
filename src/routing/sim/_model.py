"""What a simulation run produces: fault records, route changes, timelines, statistics."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs

from .._frozen import FrozenMap
from .._manager import RouteInfoManager
from .._messages import RouteChange
from .._values import TopicRouteData
from ..journal import JournalReadResult, read_journals
from ._faults import FaultRecord, SimConfig
from ._summary import SimSummary, summarize

__all__ = ["FaultRecord", "NsChange", "SimResult", "SimStats"]  # FaultRecord: re-export

#: One name server's route of one topic over time: (ms, route or None) at each change.
RouteTimeline = tuple[tuple[int, TopicRouteData | None], ...]


@attrs.frozen(kw_only=True)
class NsChange:
    """A `RouteChange` seen on one name server that changed routes or removed a broker."""

    nameserver_id: str
    change: RouteChange

    @property
    def at_ms(self) -> int:
        return self.change.at_ms


@attrs.frozen(kw_only=True)
class SimStats:
    """Counters of a run. ``events`` are the discrete events processed (deliveries, replies,
    polls, scans, client polls, faults); ``wall_s`` the real time it took."""

    events: int
    messages: int
    lost: int
    journal_lines: FrozenMap[str, int]
    wall_s: float

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall_s if self.wall_s > 0 else 0.0


@attrs.frozen(kw_only=True)
class SimResult:
    """Everything a run left behind.

    ``managers`` are the name servers' managers at the end (live objects: read them, do not
    write). Journals are in ``journal_texts`` (ns id → text) when the run kept them in
    memory, or in the files of ``journal_paths`` (``journal_files`` when rotated).
    ``changes`` lists, in order, every route change and broker removal each name server saw.
    ``route_timeline[topic][ns]`` is the route each name server served over time, and
    ``serving[ns]`` when it answered clients (up, past its readiness gate) as (ms, bool)
    steps. ``client_views[c]`` is the set of broker addresses client ``c`` could route to,
    after each poll that changed it.
    """

    config: SimConfig
    end_ms: int
    nameserver_ids: tuple[str, ...]
    group_names: tuple[str, ...]
    faults: tuple[FaultRecord, ...]
    managers: FrozenMap[str, RouteInfoManager]
    changes: tuple[NsChange, ...]
    route_timeline: FrozenMap[str, FrozenMap[str, RouteTimeline]]
    serving: FrozenMap[str, tuple[tuple[int, bool], ...]]
    client_views: tuple[tuple[tuple[int, frozenset[str]], ...], ...]
    stats: SimStats
    journal_texts: FrozenMap[str, str] = attrs.field(factory=FrozenMap)
    journal_paths: FrozenMap[str, Path] = attrs.field(factory=FrozenMap)
    #: Rotated journals: ns id → its files in order (`routing.journal.RotatingJournal`).
    journal_files: FrozenMap[str, tuple[Path, ...]] = attrs.field(factory=FrozenMap)

    def journal_lines(self, nameserver_id: str) -> list[str]:
        """The lines of one name server's journal (from memory or its file)."""
        if nameserver_id in self.journal_texts:
            return self.journal_texts[nameserver_id].splitlines()
        from ..journal import open_journal

        lines: list[str] = []
        for path in self.journal_files.get(nameserver_id) or (
                self.journal_paths[nameserver_id],):
            with open_journal(path) as handle:
                lines += handle.read().splitlines()
        return lines

    def read_journals(self) -> JournalReadResult:
        """Every name server's journal, read and validated (`routing.journal.read_journals`)."""
        if self.journal_texts:
            return read_journals(text.splitlines() for text in self.journal_texts.values())
        if self.journal_files:
            return read_journals(p for files in self.journal_files.values() for p in files)
        return read_journals(self.journal_paths.values())

    def removals(self, broker_addr: str) -> Mapping[str, tuple[int, ...]]:
        """When each name server removed ``broker_addr`` (ms), from ``changes``."""
        out: dict[str, list[int]] = {ns: [] for ns in self.nameserver_ids}
        for c in self.changes:
            if any(r.broker_addr == broker_addr for r in c.change.removed):
                out[c.nameserver_id].append(c.at_ms)
        return FrozenMap({k: tuple(v) for k, v in out.items()})

    def summary(self) -> SimSummary:
        """Per fault: how long until each name server stopped routing to the broker it made
        unreachable, and how long the name servers disagreed about each affected topic."""
        return summarize(self)
