"""Simulator throughput: simulated events per second (`routing.sim`), not a timed test.

The full run simulates 1 000 brokers (500 groups of a master and a slave) and 3 name servers
for 24 simulated hours with the default fault profile, every name server journaling to a sink
that only counts (the JSON encoding is measured, the disk is not). ``--quick`` simulates 100
brokers for one hour. Rates are per CPU second of this process (``time.process_time``), which
other processes on a shared machine disturb less than wall time; the wall figures are kept in
each row.

``python -m benchmarks.bench_sim [--quick]`` prints the rows.
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

from routing.sim import SimConfig, simulate

SUITE = "sim"

#: (groups, slaves, name servers, simulated hours) per run.
FULL = ((50, 1, 3, 24.0), (500, 1, 3, 24.0))
QUICK = ((50, 1, 3, 1.0),)


class CountingSink:
    """A journal sink that keeps nothing: lines and characters written."""

    def __init__(self) -> None:
        self.lines = 0
        self.chars = 0

    def write(self, text: str) -> int:
        self.lines += 1
        self.chars += len(text)
        return len(text)


def measure(groups: int, slaves: int, nameservers: int, hours: float, *, seed: int = 7,
            faults: str = "default") -> list[dict[str, Any]]:
    """Run one simulation; rows for events/s and journal lines/s."""
    brokers = groups * (slaves + 1)
    config = SimConfig(groups=groups, slaves=slaves, nameservers=nameservers,
                       duration_ms=int(hours * 3_600_000), seed=seed, faults=faults)
    sinks: dict[str, CountingSink] = {}

    def sink(ns: str) -> CountingSink:
        return sinks.setdefault(ns, CountingSink())

    gc.collect()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = simulate(config, sink_factory=sink)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    stats = result.stats
    lines = sum(s.lines for s in sinks.values())
    chars = sum(s.chars for s in sinks.values())
    label = f"{brokers:,} brokers x {nameservers} ns, {hours:g} h"
    common = {"suite": SUITE, "size": brokers, "size_unit": "brokers", "cpu_s": round(cpu, 2),
              "wall_s": round(wall, 2), "simulated_s": hours * 3600,
              "speedup": round(hours * 3600 / wall, 1), "events": stats.events,
              "messages": stats.messages, "lost": stats.lost, "faults": len(result.faults),
              "journal_lines": lines, "journal_bytes_per_line": round(chars / max(lines, 1), 1)}
    return [
        {**common, "name": f"simulate: events [{label}]", "operation": "simulated events",
         "ops_per_s": stats.events / cpu, "routing_ops_per_s": stats.events / cpu,
         "routing_calls": stats.events, "wall_ops_per_s": stats.events / wall,
         "note": f"{hours * 3600 / wall:,.0f}x real time; {stats.events:,} events in "
                 f"{wall:.1f} s wall / {cpu:.1f} s CPU"},
        {**common, "name": f"simulate: journal lines [{label}]",
         "operation": "journal lines written", "ops_per_s": lines / cpu,
         "routing_ops_per_s": lines / cpu, "routing_calls": lines, "wall_ops_per_s": lines / wall,
         "note": f"{chars / max(lines, 1):.0f} bytes per line on average"},
    ]


def run(quick: bool) -> list[dict[str, Any]]:
    """The harness protocol: rows with ``name`` and ``ops_per_s`` (per CPU second)."""
    rows: list[dict[str, Any]] = []
    for groups, slaves, nameservers, hours in (QUICK if quick else FULL):
        rows.extend(measure(groups, slaves, nameservers, hours))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_sim",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 brokers for 1 hour")
    args = parser.parse_args(argv)
    for row in run(args.quick):
        print(f"{row['name']:<58} {row['ops_per_s']:>12,.0f}/s CPU "
              f"{row['wall_ops_per_s']:>12,.0f}/s wall  {row['note']}")


if __name__ == "__main__":
    main()
