"""The watcher's second stage: which topics the name servers answer differently right now.

The per-name-server replay (``_live.py``) emits each name server's ``route_changes``
as it reads them; name servers are read independently, so one may be minutes ahead of
another. `TopicWatch` compares them in event time, with a watermark: a change at ``t`` is
applied only once every active name server's journal has reached ``t`` (its ``last_ms``:
the minimum over active name servers is the watermark), changes of one instant together
(ordered by name server and sequence number), and after each instant every topic it
touched is compared across the active name servers (a missing route is an answer, as in
the batch's ``disagreement`` table). A name server is *active* while its journal is within
``stale_ms`` (default `STALE_MS`) of the most advanced one: a name server that stopped
writing (stopped, cut off, or a journal that ended) neither holds the watermark back nor
takes part in comparisons — the batch compares only the span every journal covers. If its
journal resumes, its changes older than the watermark are applied when they arrive. It
emits:

* ``disagreement`` — a topic's answers started to differ at ``since_ms``; ``answers``
  maps each name server to its route's digest (None: no route), ``out_of_step`` names the
  name servers off the majority answer (all of them when there is no strict majority);
* ``agreement_restored`` — they agree again at ``at_ms``, after ``duration_ms``.

This is the documented simpler rule beside the batch sweep: instants, not integrated
intervals — the batch's ``disagreement`` rows (within the span every journal covers) come
from ``_live_tables.tables_of`` once a folder is consumed. A name server that stops writing
holds the watermark back (its topics are not compared past its last record). The state is
kept by the sink on the driver, one pickle per micro-batch in the checkpoint folder
(`TopicWatch.load_before` / `save`), so a micro-batch run again after a crash starts from
the state before it and emits the same incidents. Name servers are known from their first
micro-batch on: a fleet's rotating writers start together. All times are ms.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from ._live_tables import batch_name, write_atomic
from ._schema import Row

__all__ = ["STALE_MS", "TopicWatch"]

#: A name server whose journal is this far behind the most advanced one (event time, ms)
#: is left out of the watermark and the comparisons: twelve scan intervals, half the
#: default heartbeat timeout.
STALE_MS = 60_000

#: (at_ms, ns, seq, topic, digest or None)
_Change = tuple[int, str, int, str, str | None]


class TopicWatch:
    """Cross-name-server comparison per topic (see the module docstring). O(changes log
    changes) a micro-batch; memory: one answer per topic and name server, plus the changes
    not yet under the watermark."""

    def __init__(self, *, stale_ms: int = STALE_MS) -> None:
        self.stale_ms = stale_ms
        self.active: list[str] = []
        self.progress: dict[str, int] = {}  # ns -> its journal's last_ms
        self.answers: dict[str, dict[str, str | None]] = {}  # topic -> ns -> digest
        self.pending: list[_Change] = []
        self.open: dict[str, int] = {}  # topic -> since_ms of its open disagreement

    def batch(self, changes: Iterable[Row], statuses: Mapping[str, Row]) -> Iterator[Row]:
        """Take one micro-batch's ``route_changes`` rows and name-server statuses; yield the
        incidents of every instant now under the watermark, in time order."""
        for status in statuses.values():
            for row in status["name_servers"]:
                self.progress[row["ns"]] = row["last_ms"]
        self.pending += [(r["at_ms"], r["ns"], r["seq"], r["topic"], r["digest"]
                          if r["present"] else None) for r in changes]
        if not self.progress:
            return
        newest = max(self.progress.values())
        self.active = sorted(ns for ns, at in self.progress.items()
                             if at >= newest - self.stale_ms)
        mark = min(self.progress[ns] for ns in self.active)
        self.pending.sort()
        ready = [c for c in self.pending if c[0] <= mark]
        self.pending = [c for c in self.pending if c[0] > mark]
        i = 0
        while i < len(ready):
            at = ready[i][0]
            touched: set[str] = set()
            while i < len(ready) and ready[i][0] == at:
                _at, ns, _seq, topic, digest = ready[i]
                self.answers.setdefault(topic, {})[ns] = digest
                touched.add(topic)
                i += 1
            for topic in sorted(touched):
                yield from self._compare(topic, at)

    @property
    def disagreeing(self) -> int:
        """Topics whose answers differ now (under the watermark)."""
        return len(self.open)

    def _compare(self, topic: str, at: int) -> Iterator[Row]:
        held = self.answers[topic]
        answers = {ns: held.get(ns) for ns in self.active}
        counts: dict[str | None, int] = {}
        for digest in answers.values():
            counts[digest] = counts.get(digest, 0) + 1
        since = self.open.get(topic)
        if len(counts) <= 1:
            if since is not None:
                del self.open[topic]
                yield {"event": "agreement_restored", "topic": topic, "at_ms": at,
                       "since_ms": since, "duration_ms": at - since, "answers": answers}
            return
        if since is None:
            top = max(counts.values())
            modal = [d for d, n in counts.items() if n == top]
            out = sorted(ns for ns, d in answers.items() if len(modal) > 1 or d != modal[0])
            self.open[topic] = at
            yield {"event": "disagreement", "topic": topic, "at_ms": at, "since_ms": at,
                   "answers": answers, "out_of_step": out}

    # ------------------------------------------------------------------ kept per batch

    @classmethod
    def load_before(cls, folder: Path, batch_id: int) -> TopicWatch:
        """The state saved after the latest micro-batch before ``batch_id`` (a new one if
        none). O(state)."""
        saved = sorted(p for p in folder.glob("batch-*.pickle")
                       if int(p.stem.split("-")[1]) < batch_id) if folder.is_dir() else []
        if not saved:
            return cls()
        watch = pickle.loads(saved[-1].read_bytes())
        assert isinstance(watch, TopicWatch)
        return watch

    def save(self, folder: Path, batch_id: int, *, keep: int = 3) -> None:
        """Save the state after micro-batch ``batch_id``; keep the ``keep`` latest."""
        write_atomic(folder / batch_name(batch_id, ".pickle"), pickle.dumps(self, protocol=5))
        for old in sorted(folder.glob("batch-*.pickle"))[:-keep]:
            old.unlink(missing_ok=True)
