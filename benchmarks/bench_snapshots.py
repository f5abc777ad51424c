"""Journal snapshots: what they cost to write, to keep and to restore, and how evenly a
name server's replay splits at them (issue 30's lever).

For each snapshot interval (none, then ``--every``, e.g. ``10m,30m,60m``) the simulator writes
the fleet's journals (``--groups`` groups, 3 name servers, ``--duration`` of simulated time,
default faults; cached in ``build/bench-snapshots/``) and this prints one JSON line with:
the journal's bytes and lines and what snapshots add (their lines, the tables written again
after each), the simulation's wall time (the recorder's cost is inside it), the cost of one
snapshot line (taking the state and encoding it, the recorder's pause) and of one restore
(decoding and building the manager, with and without the invariant check), and the
replay time of every segment: each segment read, replayed and derived on its own with the
reference deriver as a Spark task would (``tests/split_replay.py``), its boundary probed.
``ratio`` is total segment time ÷ longest segment (the issue's target: ≥ 16 at 8.5 M
records with 3 name servers); ``whole_s`` is each name server replayed whole the same way
(one run over all its lines, snapshots checked on the way), summed. Times are CPU seconds
of this process (``time.process_time``), the least of ``--repeat`` runs: on a shared
machine wall times measure the neighbours. Not a timed test. Run from the checkout:
``python -m benchmarks.bench_snapshots --groups 300 --duration 4h --every 10m,30m,60m``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the split-replay reference (split_replay.py)

from routing import ManualClock, restore_manager, snapshot_manager  # noqa: E402
from routing.cli._simulate import parse_duration_ms  # noqa: E402
from routing.journal import (  # noqa: E402
    JournalSnapshot,
    Replayer,
    read_journal,
    replay,
    segment_starts,
)
from routing.journal._snapshot import decode_snapshot, snapshot_line  # noqa: E402
from routing.sim import SimConfig, simulate  # noqa: E402

CACHE = ROOT / "build" / "bench-snapshots"


def _journals(groups: int, duration_ms: int, every_ms: int | None, seed: int
              ) -> tuple[dict[str, list[str]], float]:
    name = f"g{groups}-d{duration_ms}-s{seed}-e{every_ms or 0}"
    folder = CACHE / name
    wall = folder / "wall.txt"
    if not wall.exists():
        started = time.perf_counter()
        simulate(SimConfig(groups=groups, nameservers=3, duration_ms=duration_ms, seed=seed,
                           snapshot_every_ms=every_ms), out_dir=folder)
        wall.write_text(f"{time.perf_counter() - started:.3f}\n")
    return ({p.stem: p.read_text(encoding="utf-8").splitlines()
             for p in sorted(folder.glob("ns-*.jsonl"))}, float(wall.read_text()))


def _segment_times(ns: str, lines: list[str], repeat: int) -> tuple[list[float], int]:
    from split_replay import SegmentRun

    rows = [(f"{ns}.jsonl", i + 1, text) for i, text in enumerate(lines)]
    starts = [*segment_starts(lines), len(lines)]
    times, dirty = [], 0
    for k in range(len(starts) - 1):
        segment = rows[starts[k]:starts[k + 1]]
        probe = rows[starts[k + 1]] if k + 2 < len(starts) else None
        best = float("inf")
        for _ in range(repeat):
            began = time.process_time()
            run = SegmentRun(ns, segment, probe)
            best = min(best, time.process_time() - began)
        times.append(best)
        dirty += probe is not None and not run.clean_end
    return times, dirty


def _whole_time(ns: str, lines: list[str], repeat: int) -> float:
    from split_replay import SegmentRun

    rows = [(f"{ns}.jsonl", i + 1, text) for i, text in enumerate(lines)]
    best = float("inf")
    for _ in range(repeat):
        began = time.process_time()
        SegmentRun(ns, rows, None)
        best = min(best, time.process_time() - began)
    return best


def _costs(lines: list[str]) -> dict[str, Any]:
    """One snapshot's write and restore costs, on the largest snapshot of ``lines``."""
    snaps = [text for text in lines if '"op":"snapshot"' in text]
    if not snaps:
        return {}
    biggest = max(snaps, key=len)
    at = lines.index(biggest)
    player = Replayer()
    list(replay(read_journal(lines[:at]).records, replayer=player))
    manager = next(iter(player.managers.values()))
    refs: dict[Any, int] = {}
    doc = json.loads(biggest)
    entry: JournalSnapshot = decode_snapshot(doc)
    write = _best(lambda: snapshot_line("ns", 1, 0, snapshot_manager(manager), entry.tables,
                                        refs))
    decode = _best(lambda: decode_snapshot(doc))
    build = _best(lambda: restore_manager(entry.state, clock=ManualClock(entry.at_ms)))
    fast = _best(lambda: restore_manager(entry.state, clock=ManualClock(entry.at_ms),
                                         check=False))
    parse = _best(lambda: json.loads(biggest))
    live, topics = len(entry.state.live), len(entry.state.topics)
    return {"snapshot_bytes_max": len(biggest), "live": live, "topics": topics,
            "tables_in_snapshot": len(entry.tables),
            "state_bytes": len(json.dumps(doc["args"]["state"], separators=(",", ":"))),
            "write_ms": round(write * 1e3, 2), "parse_ms": round(parse * 1e3, 2),
            "decode_ms": round(decode * 1e3, 2), "restore_ms": round(build * 1e3, 2),
            "restore_unchecked_ms": round(fast * 1e3, 2)}


def _best(action: Any, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        began = time.process_time()
        action()
        times.append(time.process_time() - began)
    return min(times)


def measure(groups: int, duration_ms: int, every_ms: int | None, seed: int, repeat: int = 1
            ) -> dict[str, Any]:
    journals, wall = _journals(groups, duration_ms, every_ms, seed)
    lines = sum(len(v) for v in journals.values())
    size = sum(len(t) + 1 for v in journals.values() for t in v)
    snaps = [t for v in journals.values() for t in v if '"op":"snapshot"' in t]
    tables = [t for v in journals.values() for t in v if '"table":{' in t]
    row: dict[str, Any] = {
        "groups": groups, "duration_h": duration_ms / 3_600_000,
        "every_min": None if every_ms is None else every_ms / 60_000, "lines": lines,
        "bytes": size, "sim_wall_s": round(wall, 1), "snapshots": len(snaps),
        "snapshot_bytes": sum(len(t) + 1 for t in snaps),
        "table_lines": len(tables), "table_bytes": sum(len(t) + 1 for t in tables)}
    row.update(_costs(journals["ns-0"]))
    every: list[float] = []
    dirty = 0
    for ns, ns_lines in journals.items():
        times, bad = _segment_times(ns, ns_lines, repeat)
        every.extend(times)
        dirty += bad
    whole = 0.0
    for ns, ns_lines in journals.items():
        whole += _whole_time(ns, ns_lines, repeat)
    row.update(whole_s=round(whole, 2), segments=len(every), dirty_boundaries=dirty,
               replay_total_s=round(sum(every), 2), replay_max_s=round(max(every), 3),
               replay_median_s=round(statistics.median(every), 3),
               replay_p90_s=round(sorted(every)[int(0.9 * (len(every) - 1))], 3),
               ratio=round(sum(every) / max(every), 1))
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=300)
    parser.add_argument("--duration", default="4h")
    parser.add_argument("--every", default="10m,30m,60m")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1,
                        help="time every replay this many times and keep the least")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the run without snapshots")
    args = parser.parse_args(argv)
    duration = parse_duration_ms(args.duration)
    intervals: list[int | None] = [] if args.no_baseline else [None]
    intervals += [parse_duration_ms(x) for x in args.every.split(",") if x]
    for every in intervals:
        print(json.dumps(measure(args.groups, duration, every, args.seed, args.repeat)),
              flush=True)


if __name__ == "__main__":
    main()
