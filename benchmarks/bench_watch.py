"""``routing watch`` (issue 31's targets): latency from a journal file's appearance to its
micro-batch's incidents, throughput against the batch pipeline in the same run, idle cost.

One process, one embedded SparkSession (``local[2,2]``, as the tests), one simulator fleet
(3 name servers, default faults) rotated into pieces: piece ``i`` of every name server gets
the same modification time, so a micro-batch holds the name servers side by side, as live
rotating writers produce them.

0. an untimed warm-up: ``analyze`` of the first round of files (the session's first jobs
   pay the JVM's start-up and JIT, which neither timed engine should);
1. **batch**: ``analyze`` on the rotated folder and ``Analysis.write`` (records/s);
2. **watch, throughput**: ``start_watch`` with ``availableNow`` on the same folder, one round
   of pieces (one file per name server) a micro-batch (records/s), and its tables compared
   with the batch run's (``equal``);
3. **watch, latency**: a fresh query (``--trigger`` ms interval) on an empty folder; every
   ``--every`` s the next round of pieces is renamed into place (written under a hidden name
   first, the rotation's rule); a file's latency is the time from its rename to the end of
   the sink's delivery of its micro-batch (its incidents written); p50/p99 over files;
4. **idle**: the same query left running with no new file for ``--idle`` s: CPU seconds of
   the whole process tree (this process, the JVM, the Python workers; read from ``/proc``)
   per wall second, in % of one core.

Prints one JSON object with the load average beside the numbers. Run:
``PYTHONPATH=src python -m benchmarks.bench_watch`` (defaults: 20 groups, 2 simulated hours,
12 pieces, 1 s trigger, a round every 2 s, 20 s idle; about 3 minutes on 2 quiet cores).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def _tree_cpu(root: int) -> dict[int, float]:
    """CPU seconds of ``root`` and every process below it, by pid, from ``/proc``: each
    live process's utime + stime plus its waited-for children's (cutime + cstime), so that
    a Python worker that exited still counts (through the daemon that forked it)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = sum(int(f) for f in fields[11:15]) / tick
    mine: dict[int, float] = {}
    for pid, seconds in cpu.items():
        p = pid
        while p > 1 and p != root:
            p = parents.get(p, 0)
        if p == root:
            mine[pid] = seconds
    return mine


def _tree_cpu_s(root: int) -> float:
    """The sum of `_tree_cpu` (a process that exited unwaited between two readings drops
    out: use `_cpu_between` for a window where processes come and go)."""
    return sum(_tree_cpu(root).values())


def _cpu_between(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds spent between two `_tree_cpu` readings by the processes alive at both
    (each one's counters only grow), plus all of those born in between."""
    return (sum(after[p] - before[p] for p in before.keys() & after.keys())
            + sum(after[p] for p in after.keys() - before.keys()))


def _fleet(folder: Path, groups: int, hours: float, pieces: int) -> tuple[list[list[Path]], int]:
    """Rotated journals of a simulated fleet: rounds of files (one per name server) and the
    number of lines."""
    from routing.sim import SimConfig, simulate

    result = simulate(SimConfig(groups=groups, slaves=1, nameservers=3, seed=7,
                                duration_ms=int(hours * 3_600_000), faults="default"))
    rounds: list[list[Path]] = [[] for _ in range(pieces)]
    total = 0
    for ns, text in sorted(result.journal_texts.items()):
        lines = text.splitlines()
        total += len(lines)
        size = -(-len(lines) // pieces)
        for i in range(pieces):
            path = folder / f"{ns}.{i:016d}.jsonl"
            path.write_text("\n".join(lines[i * size:(i + 1) * size]) + "\n", encoding="utf-8")
            os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
            rounds[i].append(path)
    return rounds, total


def _batches(checkpoint: Path) -> dict[str, int]:
    """File name → the micro-batch that read it (Spark's source log: one file a batch, and
    every tenth batch a ``<id>.compact`` file holding all entries so far, each with its
    ``batchId``)."""
    out: dict[str, int] = {}
    log = checkpoint / "spark" / "sources" / "0"
    for part in (p for p in log.iterdir() if p.name.split(".")[0].isdigit()):
        for line in part.read_text().splitlines()[1:]:
            entry = json.loads(line)
            out[entry["path"].rsplit("/", 1)[1]] = int(entry["batchId"])
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from routing.pipeline import analyze, live_tables, spark_session, start_watch
    from routing.pipeline._schema import rows_equal

    work = Path(tempfile.mkdtemp(prefix="bench-watch-"))
    try:
        source = work / "fleet"
        source.mkdir()
        rounds, lines = _fleet(source, args.groups, args.hours, args.pieces)
        spark = spark_session(args.master, app_name="bench-watch", shuffle_partitions=2)
        me = os.getpid()
        # warm-up (untimed): the session's first jobs pay the JVM's start-up and JIT
        analyze(spark, [str(p) for p in rounds[0]]).collect()
        # 1. batch
        cpu0, t0 = _tree_cpu_s(me), time.monotonic()
        analysis = analyze(spark, str(source))
        analysis.write(str(work / "batch"))
        batch_s, batch_cpu = time.monotonic() - t0, _tree_cpu_s(me) - cpu0
        expected = analysis.collect()
        records = sum(r["records"] for r in expected["name_servers"])
        analysis.unpersist()
        # 2. watch, throughput
        cpu0, t0 = _tree_cpu_s(me), time.monotonic()
        query = start_watch(spark, source, work / "out", work / "ck", available_now=True,
                            incidents=work / "incidents.jsonl", max_files=3)
        query.awaitTermination()
        query.stop()
        watch_s, watch_cpu = time.monotonic() - t0, _tree_cpu_s(me) - cpu0
        equal = not rows_equal(expected, live_tables(work / "out"))
        # 3. latency: rounds renamed into place while a query runs
        live = work / "live"
        live.mkdir()
        delivered: dict[int, float] = {}
        query = start_watch(spark, live, work / "out2", work / "ck2",
                            incidents=work / "incidents2.jsonl", trigger_ms=args.trigger,
                            between=lambda batch: delivered.__setitem__(batch, time.time()))
        appeared: dict[str, float] = {}
        for files in rounds:
            for path in files:
                hidden = live / f".{path.name}"
                shutil.copyfile(path, hidden)
                os.rename(hidden, live / path.name)
                appeared[path.name] = time.time()
            time.sleep(args.every)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the last round's batch
            batches = _batches(work / "ck2")
            if len(batches) == len(appeared) and all(b in delivered for b in batches.values()):
                break
            time.sleep(0.2)
        # 4. idle
        before, t0 = _tree_cpu(me), time.monotonic()
        time.sleep(args.idle)
        idle_share = _cpu_between(before, _tree_cpu(me)) / (time.monotonic() - t0)
        query.stop()
        batches = _batches(work / "ck2")
        missing = sorted(set(appeared) - set(batches))
        latencies = sorted(delivered[batches[name]] - at for name, at in appeared.items()
                           if name in batches and batches[name] in delivered)
        spark.stop()
        q = statistics.quantiles(latencies, n=100, method="inclusive") if len(
            latencies) > 1 else latencies * 99
        return {
            "lines": lines, "records": records, "files": sum(len(r) for r in rounds),
            "batch_s": round(batch_s, 2), "batch_cpu_s": round(batch_cpu, 1),
            "batch_records_per_s": round(records / batch_s),
            "watch_s": round(watch_s, 2), "watch_cpu_s": round(watch_cpu, 1),
            "watch_records_per_s": round(records / watch_s),
            "watch_over_batch": round(batch_s / watch_s, 3), "tables_equal": equal,
            "latency_files": len(latencies), "latency_missing": missing,
            "undelivered_batches": sorted(set(batches.values()) - set(delivered)),
            "latency_p50_s": round(q[49], 3),
            "latency_p99_s": round(q[98], 3), "latency_max_s": round(latencies[-1], 3),
            "trigger_ms": args.trigger, "idle_cpu_share_of_one_core": round(idle_share, 3),
            "loadavg": os.getloadavg(), "master": args.master,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--pieces", type=int, default=12)
    parser.add_argument("--trigger", type=int, default=1000, help="ms")
    parser.add_argument("--every", type=float, default=2.0, help="s between rounds")
    parser.add_argument("--idle", type=float, default=20.0, help="s")
    parser.add_argument("--master", default="local[2,2]")
    print(json.dumps(run(parser.parse_args(argv))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
