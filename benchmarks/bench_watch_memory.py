"""``routing watch``'s memory over a long live run (issue 31: "memory flat over 30 minutes").

Starts ``routing simulate --live`` (``--groups`` groups with a slave each, 3 name servers,
default faults, ``--speed``; a new file every
``--rotate-every`` s) into a fresh folder and ``routing watch`` on it (``--trigger`` ms,
``--metrics`` on a local port), both as child processes; every ``--every`` s samples the
resident memory of the watcher's whole process tree (its driver, the JVM it starts, the
Python workers the JVM forks: ``/proc/<pid>/task/*/children`` walked down) by kind, the
tree's CPU seconds and the watcher's metrics, into ``--csv``. After ``--minutes`` both are
stopped (SIGINT) and one JSON object is printed: start (first sample after ``--settle`` s),
peak and end RSS (MB) by kind, the least-squares slope (MB/min) of each over the last
``--window`` minutes, the lag (wall s between the simulation's now and the newest record
read, from ``routing_watch_lag_seconds`` and the speed; the simulator runs with
``--sim-times`` for that, so that the gauge tells how far into the run the watcher has
read; it includes up to one rotation interval: a record is read once its file is
closed), records/s, the tree's CPU (% of one core) and the load average.

Every ``--heap-every`` s it also asks the JVM for its class histogram (``jcmd <jvm>
GC.class_histogram``, which runs a full collection first): the total is the JVM's *live*
heap (MB, column ``jvm_live_mb``), reported like RSS (start, end, slope). RSS alone
cannot tell a leak from a heap that merely expands towards ``-Xmx`` while its live set
is flat. ``--histograms DIR`` keeps each histogram (``live-<s>.txt``) for a diff of what
grows.

Run: ``PYTHONPATH=src python -m benchmarks.bench_watch_memory --minutes 30`` (defaults:
20 groups at speed 40, about 190 records/s — two 1 000-broker fleets' worth; 10 s samples).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

KINDS = ("driver", "jvm", "workers", "other")
#: The column of the JVM's live heap after a full collection (MB), sampled every
#: ``--heap-every`` s.
LIVE = "jvm_live"
METRICS = ("routing_watch_lag_seconds", "routing_watch_records_total",
           "routing_watch_records_per_second", "routing_watch_batch_seconds")


def tree(root: int) -> list[int]:
    """``root`` and every process below it (``/proc/<pid>/task/*/children``)."""
    out, i = [root], 0
    while i < len(out):
        pid = out[i]
        i += 1
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children") as handle:
                    out += [int(x) for x in handle.read().split()]
            except OSError:
                pass
    return out


def process(pid: int, root: int) -> tuple[str, int, float, int] | None:
    """(kind, RSS kB, CPU s, parent pid) of ``pid``, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            rss = next((int(line.split()[1]) for line in handle if line.startswith("VmRSS")),
                       0)
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmd = handle.read().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, IndexError, StopIteration):
        return None
    cpu = sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    if pid == root:
        kind = "driver"
    elif "java" in cmd.split(" ")[0]:
        kind = "jvm"
    elif "pyspark" in cmd:
        kind = "workers"
    else:
        kind = "other"
    return kind, rss, cpu, int(fields[1])


def tally(found: dict[int, tuple[str, int, float, int]]
          ) -> tuple[dict[str, float], float, int | None]:
    """MB by kind, CPU s and the JVM's pid (the first found) of `process` rows by pid. A JVM
    whose parent is a JVM is that JVM forked to run a command (Hadoop's ``chmod`` of a
    checkpoint file) and not yet replaced by it: its RSS is its parent's pages, counted once."""
    mb = dict.fromkeys(KINDS, 0.0)
    cpu = 0.0
    jvm = None
    for pid, (kind, rss, seconds, parent) in found.items():
        if kind == "jvm" and parent in found and found[parent][0] == "jvm":
            continue
        mb[kind] += rss / 1024
        cpu += seconds
        jvm = pid if jvm is None and kind == "jvm" else jvm
    return mb, cpu, jvm


def live_heap(pid: int, keep: Path | None = None, at: float = 0.0) -> float | None:
    """The live heap (MB) of the JVM ``pid``: the total of ``jcmd PID GC.class_histogram``
    (a full collection, then every live object counted), or None if jcmd fails. ``keep``:
    a folder to write the histogram to (``live-<at>.txt``). Stops the JVM for the
    collection: about 0.1–1 s on a 100–300 MB heap."""
    try:
        got = subprocess.run(["jcmd", str(pid), "GC.class_histogram"], capture_output=True,
                             text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    total = histogram_total(got.stdout)
    if total is not None and keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"live-{int(at):05d}.txt").write_text(got.stdout)
    return total


def histogram_total(text: str) -> float | None:
    """The bytes of a class histogram's ``Total`` line, in MB (None without one)."""
    for line in reversed(text.splitlines()):
        fields = line.split()
        if len(fields) == 3 and fields[0] == "Total":
            return int(fields[2]) / 2**20
    return None


def metrics(port: int) -> dict[str, float]:
    """The watcher's metrics named in `METRICS` ({} while it has none)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as got:
            text = got.read().decode()
    except OSError:
        return {}
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name in METRICS:
            found[name] = float(value)
    return found


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (s, MB) points, in MB per minute."""
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    den = sum((p[0] - mx) ** 2 for p in points)
    return 60 * sum((p[0] - mx) * (p[1] - my) for p in points) / den if den else 0.0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--groups", type=int, default=20)
    ap.add_argument("--speed", type=float, default=40)
    ap.add_argument("--rotate-every", default="10s")
    ap.add_argument("--trigger", type=int, default=1000)
    ap.add_argument("--every", type=float, default=10, help="sample interval (s)")
    ap.add_argument("--settle", type=float, default=60, help="start sample after (s)")
    ap.add_argument("--window", type=float, default=20, help="slope over the last (min)")
    ap.add_argument("--port", type=int, default=9931)
    ap.add_argument("--heap-every", type=float, default=60,
                    help="live heap (jcmd GC.class_histogram) every (s); 0: never")
    ap.add_argument("--histograms", default=None, help="keep each histogram in this folder")
    ap.add_argument("--watch-arg", action="append", default=[],
                    help="an extra argument for routing watch (repeatable)")
    ap.add_argument("--csv", default="watch-memory.csv")
    ap.add_argument("--work", default=None, help="folder (default: a temporary one)")
    args = ap.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="watch-memory-"))
    shutil.rmtree(work / "journals", ignore_errors=True)
    shutil.rmtree(work / "out", ignore_errors=True)
    (work / "journals").mkdir(parents=True)
    with open(work / "sim.err", "w") as sim_err, open(work / "watch.err", "w") as watch_err:
        samples = _run(args, work, sim_err, watch_err)
    print(json.dumps(summarize(samples, args), indent=2))


def _run(args: argparse.Namespace, work: Path, sim_err: Any, watch_err: Any
         ) -> list[dict[str, Any]]:
    """Start both, sample until ``--minutes`` have passed, stop both; the samples."""
    routing = [sys.executable, "-c", "from routing.cli import main; main()"]
    duration = f"{int(args.minutes * args.speed + args.speed) + 60}m"
    started = time.time()
    sim = subprocess.Popen([*routing, "simulate", "--live", "--speed", str(args.speed),
                            "--groups", str(args.groups), "--duration", duration,
                            "--out", str(work / "journals"), "--rotate-every",
                            args.rotate_every, "--no-progress", "--json",
                            # journal time from 0: the lag gauge then tells how far into
                            # the run the watcher has read (see `summarize`)
                            "--sim-times"],
                           stdout=subprocess.DEVNULL, stderr=sim_err)
    watch = subprocess.Popen([*routing, "watch", str(work / "journals"), "--out",
                              str(work / "out"), "--incidents", str(work / "incidents.jsonl"),
                              "--metrics", f"127.0.0.1:{args.port}", "--trigger",
                              str(args.trigger), *args.watch_arg],
                             stdout=subprocess.DEVNULL, stderr=watch_err)
    samples: list[dict[str, Any]] = []
    try:
        with open(args.csv, "w", newline="") as handle:
            out = csv.writer(handle)
            out.writerow(["s", *(f"{k}_mb" for k in KINDS), "total_mb", f"{LIVE}_mb",
                          "cpu_s", "load1", *METRICS])
            keep = Path(args.histograms) if args.histograms else None
            heap_at = 0.0
            while time.time() - started < args.minutes * 60 and watch.poll() is None:
                now = time.time()
                found = {pid: got for pid in tree(watch.pid)
                         if (got := process(pid, watch.pid)) is not None}
                mb, cpu, jvm = tally(found)
                seen = metrics(args.port)
                row = {"s": now - started, "epoch": now, **mb, "total": sum(mb.values()),
                       "cpu": cpu, "load1": os.getloadavg()[0], **seen}
                if (args.heap_every and jvm is not None and now - started >= args.settle
                        and now - heap_at >= args.heap_every):
                    heap_at = now
                    live = live_heap(jvm, keep, now - started)
                    if live is not None:
                        row[LIVE] = live
                samples.append(row)
                out.writerow([f"{row['s']:.1f}", *(f"{mb[k]:.1f}" for k in KINDS),
                              f"{row['total']:.1f}", f"{row[LIVE]:.1f}" if LIVE in row else "",
                              f"{cpu:.1f}", f"{row['load1']:.2f}",
                              *(seen.get(m, "") for m in METRICS)])
                handle.flush()
                time.sleep(max(0.0, args.every - (time.time() - now)))
    finally:
        for child in (watch, sim):
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
        for child in (watch, sim):
            try:
                child.wait(timeout=120)
            except subprocess.TimeoutExpired:
                child.kill()
    return samples


def summarize(samples: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """The JSON report of the samples (see the module docstring)."""
    run = [s for s in samples if s["s"] >= args.settle]
    end_s = run[-1]["s"]
    last = [s for s in run if s["s"] >= end_s - args.window * 60]
    report: dict[str, Any] = {"groups": args.groups, "speed": args.speed,
                              "minutes": round(end_s / 60, 1), "samples": len(samples)}
    for kind in (*KINDS, "total"):
        report[kind] = {"start_mb": round(run[0][kind]), "peak_mb": round(max(
            s[kind] for s in run)), "end_mb": round(run[-1][kind]),
            f"slope_last_{args.window:g}_min_mb_per_min": round(
                slope([(s["s"], s[kind]) for s in last]), 3)}
    heap = [s for s in run if LIVE in s]
    if heap:
        report[LIVE] = {"start_mb": round(heap[0][LIVE], 1), "peak_mb": round(max(
            s[LIVE] for s in heap), 1), "end_mb": round(heap[-1][LIVE], 1),
            f"slope_last_{args.window:g}_min_mb_per_min": round(
                slope([(s["s"], s[LIVE]) for s in heap
                       if s["s"] >= end_s - args.window * 60]), 3),
            "samples": len(heap)}
    # on simulated journal times the gauge is (wall now − newest simulated s read): the
    # newest read is that far into the run, the simulation is s · speed into it
    lags = sorted((s["s"] * args.speed - (s["epoch"] - s["routing_watch_lag_seconds"]))
                  / args.speed for s in run if s.get("routing_watch_lag_seconds"))
    if lags:
        report["lag_s"] = {"p50": round(lags[len(lags) // 2], 1), "max": round(lags[-1], 1)}
    counted = [s for s in run if "routing_watch_records_total" in s]
    if len(counted) > 1:
        report["records_per_s"] = round(
            (counted[-1]["routing_watch_records_total"] - counted[0]["routing_watch_records_total"])
            / (counted[-1]["s"] - counted[0]["s"]))
    report["cpu_pct_of_one_core"] = round(
        100 * (run[-1]["cpu"] - run[0]["cpu"]) / (end_s - run[0]["s"]), 1)
    loads = [s["load1"] for s in run]
    report["load1"] = {"min": round(min(loads), 1), "max": round(max(loads), 1)}
    return report


if __name__ == "__main__":
    main()
