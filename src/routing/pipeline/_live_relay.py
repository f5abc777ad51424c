"""``routing watch --remote``: the watcher's client-side outputs on Spark Connect.

On a Spark Connect server, the query's ``foreachBatch`` sink (``_live_spark.LiveSink``) runs
in a Python process the *server* starts, not in the client: what it prints goes to the
server's log, and a metrics registry it updates is not the one the client serves. So on
Connect the sink writes incidents to a file only (the same exactly-once `IncidentLog`), and
the client relays what it delivered (`LiveRelay.poll`, called by the CLI every half
second and once more at the end):

* the incident lines delivered since the last poll, copied to a text stream (stdout);
  the position relayed is kept in the checkpoint folder (``incidents-relayed.json``), so a
  restarted client continues after the last line it copied (at least once: a crash
  between copying and saving the position repeats those lines, as a stream does locally);
* each micro-batch's statuses (``OUT/status``), the topic watch's open disagreements
  (``CHECKPOINT/topics``) and those incidents fed to `LiveMetrics`, batch by batch.

Only what the sink marked delivered is relayed: the marker (``incidents-delivered.json``)
is read before and after the file's size, and a batch being written (``pending``) is not
relayed until it is marked done. The files are the server's: as for the journals, the
client must see them at the same paths (the same machine or shared storage).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from ._live_tables import STATUS_DIR, batch_name, write_atomic
from ._live_topics import TopicWatch
from ._schema import Row

__all__ = ["DELIVERED_MARKER", "RELAYED_MARKER", "LiveRelay"]

#: The `IncidentLog`'s marker in the checkpoint folder (the last batch delivered).
DELIVERED_MARKER = "incidents-delivered.json"
#: `LiveRelay`'s own marker there: the incident file's bytes and the batches relayed.
RELAYED_MARKER = "incidents-relayed.json"


class LiveRelay:
    """Relays a Connect watcher's delivered incidents to ``stream`` and its batches to
    ``metrics`` (either may be None). ``incidents``: the file the sink appends to;
    ``checkpoint``: the watcher's checkpoint folder; ``out_dir``: its output folder.
    Cost of `poll`: three small file reads, plus O(new incident bytes + statuses of the
    new batches)."""

    def __init__(self, incidents: str | os.PathLike[str], checkpoint: str | os.PathLike[str],
                 out_dir: str | os.PathLike[str], *, stream: IO[str] | None = None,
                 metrics: Any = None) -> None:
        self.incidents = Path(incidents)
        self.checkpoint = Path(checkpoint)
        self.out_dir = Path(out_dir)
        self.stream = stream
        self.metrics = metrics
        relayed = self._read(RELAYED_MARKER) or {"offset": 0, "batch": -1}
        self.offset: int = relayed["offset"]
        self.batch: int = relayed["batch"]

    def _read(self, name: str) -> dict[str, int] | None:
        path = self.checkpoint / name
        try:
            doc: dict[str, int] = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return doc

    def _delivered(self) -> tuple[int, int]:
        """(last batch delivered, bytes of the incident file delivered), consistent: the
        marker read before and after the file's size, again until both reads agree."""
        marker = self.checkpoint / DELIVERED_MARKER
        while True:
            before = marker.read_bytes() if marker.exists() else b""
            size = self.incidents.stat().st_size if self.incidents.exists() else 0
            after = marker.read_bytes() if marker.exists() else b""
            if before == after:
                break
        mark = json.loads(before) if before else {"done": -1, "pending": -1, "length": 0}
        return mark["done"], size if mark["pending"] < 0 else mark["length"]

    def poll(self, progress: Any = None) -> int:
        """Relay what was delivered since the last call; returns the incidents relayed.
        ``progress``: the query's ``lastProgress`` (its ``addBatch`` time is the metrics'
        batch seconds; 0 without it)."""
        done, length = self._delivered()
        if done <= self.batch and length <= self.offset:
            return 0
        text = b""
        if length > self.offset:
            with open(self.incidents, "rb") as handle:
                handle.seek(self.offset)
                text = handle.read(length - self.offset)
            text = text[:text.rfind(b"\n") + 1]  # whole lines only
        lines = text.decode("utf-8").splitlines(keepends=True)
        if self.stream is not None and lines:
            self.stream.write("".join(lines))
            self.stream.flush()
        if self.metrics is not None:
            durations = (progress or {}).get("durationMs") or {}
            self._meter(done, [json.loads(line) for line in lines],
                        durations.get("addBatch", 0) / 1000)
        self.offset += len(text)
        self.batch = max(self.batch, done)
        write_atomic(self.checkpoint / RELAYED_MARKER,
                     json.dumps({"offset": self.offset, "batch": self.batch}).encode())
        return len(lines)

    def _meter(self, done: int, incidents: list[Row], seconds: float) -> None:
        """Feed `LiveMetrics` each new batch's statuses; the incidents with the last."""
        first = self.batch + 1
        for batch_id in range(first, done + 1):
            statuses: dict[str, Row] = {}
            part = self.out_dir / STATUS_DIR / batch_name(batch_id, ".jsonl")
            if part.exists():
                for line in part.read_text(encoding="utf-8").splitlines():
                    doc = json.loads(line)
                    statuses[doc["key"]] = doc["status"]
            last = batch_id == done
            watch = TopicWatch.load_before(self.checkpoint / "topics", batch_id + 1)
            self.metrics.batch(statuses, incidents if last else [],
                               disagreeing=watch.disagreeing, seconds=seconds)
