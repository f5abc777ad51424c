"""``routing demo``'s live part: a live simulation watched as it runs (issue 31).

`run_live_demo` starts ``routing simulate --live`` on a thread (`routing.sim.simulate` with
`LivePacing`: a simulated hour per real minute, journal times on the wall clock, a new file
every 2 s of wall time) into ``OUT/live/journals``, and `routing watch` on the same folder
(`routing.pipeline.start_watch`, a 1 s trigger, on the session the batch part used); it
prints the incidents an operator acts on as the stream delivers them (`worth_showing`:
expiries, closed channels, disagreements of 30 s or more once they end; the first `SHOWN`),
counts all, and once the simulation ends lets the query consume the last files and stops it.
The same, by hand::

    routing simulate --live --speed 60 --duration 20m --out live/journals --rotate-every 2s &
    routing watch live/journals --out live/out --incidents live/incidents.jsonl
"""

from __future__ import annotations

import io
import json
import shutil
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..pipeline import plural, start_watch
from ..sim import LivePacing, SimConfig, SimResult, simulate

__all__ = ["LIVE_CONFIG", "SHOWN", "LiveDemo", "run_live_demo", "worth_showing"]

#: 10 groups × (master + slave), 3 name servers, 20 simulated minutes (20 s at speed 60),
#: a crash, partition or name-server restart every ~3 simulated minutes.
LIVE_CONFIG = SimConfig(groups=10, slaves=1, nameservers=3, duration_ms=20 * 60_000,
                        seed=2024, faults="crash,partition,ns_restart",
                        fault_interval_ms=180_000)

#: Incidents printed at most; all are counted.
SHOWN = 40

#: A disagreement is printed (when it ends) if it lasted this long (ms); the many shorter
#: ones (brokers registering with one name server before the others) are only counted.
LONG_DISAGREEMENT_MS = 30_000


def worth_showing(incident: dict[str, Any]) -> bool:
    """Printed by the demo: broker expired, channel closed, long disagreement ended."""
    event = incident["event"]
    return event in ("broker_expired", "channel_closed") or (
        event == "agreement_restored" and incident["duration_ms"] >= LONG_DISAGREEMENT_MS)


class LiveDemo(io.StringIO):
    """The incident stream of the live part: a text stream `start_watch` writes JSON lines
    to; each is kept (``incidents``), the first `SHOWN` `worth_showing` printed on
    ``console``. O(1) a line."""

    def __init__(self, console: Any) -> None:
        super().__init__()
        self.console = console
        self.incidents: list[dict[str, Any]] = []
        self.shown = 0

    def write(self, text: str, /) -> int:
        for line in text.splitlines():
            incident = json.loads(line)
            self.incidents.append(incident)
            if self.shown < SHOWN and worth_showing(incident):
                self.shown += 1
                self.console.print(_describe(incident), highlight=False, soft_wrap=True)
        return len(text)


def _describe(incident: dict[str, Any]) -> str:
    """One incident in a line: journal time (UTC), event, where, what."""
    at = datetime.fromtimestamp(incident.get("at_ms", 0) / 1000, tz=UTC)
    what = incident.get("broker_addr") or incident.get("topic") or ""
    where = incident.get("ns") or ",".join(incident.get("out_of_step", ()) or ())
    extra = ""
    if "detection_delay_ms" in incident:
        extra = f" (last heartbeat {incident['detection_delay_ms'] / 1000:.1f} s before)"
    elif "duration_ms" in incident:
        extra = f" (they disagreed for {incident['duration_ms'] / 1000:.0f} s)"
    return f"  {at:%H:%M:%S} {incident['event']:<18} {where:<8} {what}{extra}"


def run_live_demo(spark: Any, out_dir: Path, console: Any, *,
                  config: SimConfig = LIVE_CONFIG, pacing: LivePacing | None = None,
                  rotate_every_ms: int = 2_000) -> tuple[SimResult, LiveDemo]:
    """Simulate ``config`` live into ``out_dir/live/journals`` (``pacing``: default a
    simulated hour per real minute on the wall clock; a test passes a `ManualClock`'s) while
    watching it on ``spark``; return the simulation's result and the incidents. Wall time:
    ``config.duration_ms / speed`` plus the last micro-batches (a few seconds)."""
    root = out_dir / "live"
    shutil.rmtree(root, ignore_errors=True)  # a fresh checkpoint: the run starts over
    journals = root / "journals"
    journals.mkdir(parents=True)
    pacing = pacing or LivePacing(speed=60, wall_times=True)
    seconds = config.duration_ms / pacing.speed / 1000
    console.print(f"\n[bold]live[/bold]: {plural(config.groups, 'broker group')}, "
                  f"{config.duration_ms // 60_000} simulated minutes in {seconds:g} s into "
                  f"{journals}, watched as the files appear:", highlight=False,
                  soft_wrap=True)
    done: list[SimResult] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(simulate(config, out_dir=journals, live=pacing,
                                 rotate_every_ms=rotate_every_ms))
        except BaseException as exc:  # reported on the main thread
            failed.append(exc)

    shown = LiveDemo(console)
    started = time.monotonic()
    query = start_watch(spark, journals, root / "out", root / "checkpoint",
                        incidents=shown, trigger_ms=1_000)
    try:
        writer = threading.Thread(target=run, name="routing-demo-live", daemon=True)
        writer.start()
        writer.join()
        if failed:
            raise failed[0]
        query.processAllAvailable()  # the files written since the last micro-batch
    finally:
        query.stop()
    kinds = Counter(i["event"] for i in shown.incidents)
    console.print(f"live: {plural(len(shown.incidents), 'incident')} "
                  f"({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}) from "
                  f"{plural(sum(len(f) for f in done[0].journal_files.values()), 'file')} "
                  f"in {time.monotonic() - started:.1f} s; incidents as JSON lines: "
                  f"routing watch {journals} --out {root / 'out'}", highlight=False,
                  soft_wrap=True)
    return done[0], shown
