"""The arithmetic of ``benchmarks/bench_watch_memory.py`` (the 30-minute memory run): the
process tree it samples, the slope and the report, on synthetic samples."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the benchmarks package lives beside src/, not in it
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_watch_memory import (  # noqa: E402
    histogram_total,
    process,
    slope,
    summarize,
    tally,
    tree,
)


def test_the_tree_holds_a_grandchild_and_its_memory_is_read() -> None:
    # the child starts a grandchild that waits on the shared stdin, prints its pid, waits
    child = subprocess.Popen([sys.executable, "-c",
                              "import subprocess, sys; p = subprocess.Popen([sys.executable, "
                              "'-c', 'import sys; sys.stdin.read()']); print(p.pid, "
                              "flush=True); p.wait()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        pids = tree(os.getpid())
        assert child.pid in pids and grandchild in pids
        got = process(os.getpid(), os.getpid())
        assert got is not None and got[0] == "driver" and got[1] > 1000
        assert got[3] == os.getppid()
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


def test_slope_is_mb_per_minute() -> None:
    assert slope([(0, 100), (60, 101), (120, 102)]) == 1.0
    assert slope([(0, 5), (30, 5), (60, 5)]) == 0.0


def test_the_report_takes_start_after_settle_and_the_slope_over_the_window() -> None:
    args = argparse.Namespace(settle=60, window=20, groups=20, speed=40)
    samples = []
    for i in range(0, 1801, 10):
        grows = 0 if i < 600 else (i - 600) / 60  # 1 MB/min in the last 20 min, workers
        samples.append({"s": i, "epoch": 1e9 + i, "driver": 150, "jvm": 500.0,
                        "workers": 300 + grows, "other": 0, "total": 950 + grows,
                        "cpu": i * 0.2, "load1": 5.0,
                        # 10 s behind: newest simulated s read = (s − 10) · speed
                        "routing_watch_lag_seconds": 1e9 + i - (i - 10) * 40,
                        "routing_watch_records_total": i * 100})
    report = summarize(samples, args)
    assert report["total"]["start_mb"] == 950 and report["total"]["end_mb"] == 970
    assert report["workers"]["slope_last_20_min_mb_per_min"] == 1.0
    assert report["jvm"]["slope_last_20_min_mb_per_min"] == 0.0
    assert report["lag_s"] == {"p50": 10.0, "max": 10.0}
    assert report["records_per_s"] == 100 and report["cpu_pct_of_one_core"] == 20.0


HISTOGRAM = """\
 num     #instances         #bytes  class name (module)
-------------------------------------------------------
   1:        827898       26492736  java.util.concurrent.ConcurrentHashMap$Node (java.base)
   2:          6171       13681272  [B (java.base)
Total       1186789       79691776
"""


def test_the_live_heap_is_the_histograms_total_in_mb() -> None:
    assert histogram_total(HISTOGRAM) == 79691776 / 2**20
    assert histogram_total("12345:\nCommand failed\n") is None


def test_the_report_gives_the_live_heap_slope_over_the_window() -> None:
    args = argparse.Namespace(settle=60, window=20, groups=20, speed=40)
    samples = []
    for i in range(0, 1801, 10):
        row = {"s": i, "epoch": 1e9 + i, "driver": 150, "jvm": 500.0, "workers": 300,
               "other": 0, "total": 950, "cpu": i * 0.2, "load1": 5.0}
        if i % 60 == 0 and i >= 60:  # every minute after the settle: 80 MB + 0.5 MB/min
            row["jvm_live"] = 80 + 0.5 * (i - 60) / 60
        samples.append(row)
    report = summarize(samples, args)
    live = report["jvm_live"]
    assert live["start_mb"] == 80.0 and live["end_mb"] == 94.5 and live["samples"] == 30
    assert live["slope_last_20_min_mb_per_min"] == 0.5
    assert report["jvm"]["slope_last_20_min_mb_per_min"] == 0.0


def test_a_jvm_forked_by_the_jvm_is_counted_once() -> None:
    found = {10: ("driver", 150 * 1024, 1.0, 1), 11: ("jvm", 500 * 1024, 2.0, 10),
             12: ("jvm", 500 * 1024, 0.0, 11),  # the JVM forked for a chmod
             13: ("workers", 300 * 1024, 0.5, 11)}
    mb, cpu, jvm = tally(found)
    assert mb == {"driver": 150.0, "jvm": 500.0, "workers": 300.0, "other": 0.0}
    assert cpu == 3.5 and jvm == 11
