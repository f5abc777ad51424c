"""The PySpark pipeline against the single-process reference: journal records per second.

Journals come from the simulator (`routing.sim`, default faults, 3 name servers). The full
run simulates about 1 M records once (cached in ``build/bench-pipeline/``) and makes the
larger sizes by copying those journals under new name-server names (``r<i>-ns-<j>``: the
same work per record, more name servers). Each engine runs in a fresh child process so that
its time includes everything a user waits for (for Spark: JVM and session start, reading,
the analysis and writing every table as Parquet) and its peak memory is its own (the
process tree's RSS, sampled every 0.2 s). Spark runs on ``local[2]`` with
``partition="group"`` (the default) and ``partition="ns"``; at the smallest full size a
second, warm run in the same JVM is timed too. Both engines' tables are compared by row
count (the test suite compares them row by row).

``python -m benchmarks.bench_pipeline [--quick] [--sizes 1e6,3e6] [--modes group,ns]``
prints the rows as JSON lines. Not a timed test: a full run takes about 15-25 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SUITE = "pipeline"
ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "bench-pipeline"

FULL_SIZES = (1_000_000, 3_000_000)
QUICK_SIZES = (20_000,)


def _base_config(quick: bool) -> Any:
    from routing.sim import SimConfig

    if quick:  # about 20 k records
        return SimConfig(groups=10, slaves=1, nameservers=3, duration_ms=3_600_000 * 9 // 10,
                         seed=11, faults="default")
    # about 1 M records: 50 groups x 2 brokers x 3 name servers, 26 simulated hours
    return SimConfig(groups=50, slaves=1, nameservers=3, duration_ms=26 * 3_600_000,
                     seed=11, faults="default")


def _count(folder: Path) -> int:
    return sum(sum(1 for _ in open(f, encoding="utf-8")) for f in sorted(folder.iterdir()))


def journals(size: int, quick: bool, log: Any = print) -> tuple[Path, int]:
    """A folder of simulator journals with about ``size`` lines: (folder, exact lines)."""
    from routing.sim import simulate

    base = CACHE / ("base-quick" if quick else "base-full")
    if not (base / "ns-0.jsonl").exists():
        log(f"simulating the base journals into {base} …")
        started = time.perf_counter()
        simulate(_base_config(quick), out_dir=base)
        log(f"  {time.perf_counter() - started:.0f} s")
    base_lines = _count(base)
    copies = max(1, round(size / base_lines))
    if copies == 1:
        return base, base_lines
    folder = CACHE / f"{base.name}-x{copies}"
    if not folder.exists():
        tmp = folder.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for i in range(copies):
            for src in sorted(base.iterdir()):
                text = src.read_text(encoding="utf-8")
                (tmp / f"r{i}-{src.name}").write_text(text.replace('"ns-', f'"r{i}-ns-'),
                                                      encoding="utf-8")
        tmp.rename(folder)
    return folder, base_lines * copies


# --------------------------------------------------------------------------- child runs


class _PeakRss:
    """Samples the RSS of this process and all its descendants (Linux /proc)."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def _tree_rss() -> int:
        parents: dict[int, int] = {}
        rss: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                parents[int(entry)] = int(fields[1])
                rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, IndexError, ValueError):
                continue
        tree, frontier = {os.getpid()}, [os.getpid()]
        while frontier:
            pid = frontier.pop()
            for child, parent in parents.items():
                if parent == pid and child not in tree:
                    tree.add(child)
                    frontier.append(child)
        return sum(rss.get(p, 0) for p in tree)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, self._tree_rss())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self._tree_rss())


def _child(engine: str, path: str, mode: str, warm: bool) -> dict[str, Any]:
    from routing.pipeline import TABLES

    sampler = _PeakRss()
    out = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    result: dict[str, Any] = {}
    try:
        started = time.perf_counter()
        if engine == "reference":
            from routing.pipeline import analyze_local
            from routing.pipeline._schema import write_local_tables

            tables = analyze_local(path)
            write_local_tables(tables, out)
            result["seconds"] = time.perf_counter() - started
            result["counts"] = {n: len(rows) for n, rows in tables.items()}
        else:
            from routing.pipeline import analyze, spark_session

            spark = spark_session("local[2]", app_name="bench-pipeline")
            result["session_s"] = time.perf_counter() - started
            analysis = analyze(spark, path, partition=mode)
            analysis.write(str(out / "cold"))
            result["seconds"] = time.perf_counter() - started
            result["counts"] = {n: analysis[n].count() for n in TABLES}
            result["partitions"] = sum(analysis.partitions.values())
            analysis.unpersist()
            if warm:
                again = time.perf_counter()
                analysis = analyze(spark, path, partition=mode)
                analysis.write(str(out / "warm"))
                result["warm_s"] = time.perf_counter() - again
                analysis.unpersist()
            spark.stop()
    finally:
        result["peak_rss_mb"] = sampler.stop() / 2**20
        shutil.rmtree(out, ignore_errors=True)
    return result


def _run_child(engine: str, path: Path, mode: str = "", warm: bool = False) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.bench_pipeline", "--child", engine,
           "--path", str(path), "--mode", mode or "group"] + (["--warm"] if warm else [])
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{engine} {mode} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# --------------------------------------------------------------------------- the suite


def _row(operation: str, records: int, seconds: float, **extra: Any) -> dict[str, Any]:
    rate = records / seconds if seconds else 0.0
    return {"suite": SUITE, "name": f"{operation} @ {records:,}", "operation": operation,
            "size": records, "size_unit": "records", "ops_per_s": rate,
            "routing_ops_per_s": rate, "seconds": round(seconds, 2), **extra}


def run(quick: bool, log: Any = None) -> list[dict[str, Any]]:
    """Rows: records/s of the reference and of Spark local[2] (group and ns partitioning)
    for each size; ``ratio`` is Spark's rate over the reference's."""
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    rows: list[dict[str, Any]] = []
    sizes = QUICK_SIZES if quick else tuple(
        int(float(s)) for s in os.environ.get("BENCH_PIPELINE_SIZES", "").split(",") if s
    ) or FULL_SIZES
    for i, size in enumerate(sizes):
        folder, records = journals(size, quick, say)
        say(f"pipeline: {records:,} records in {folder}")
        ref = _run_child("reference", folder)
        say(f"  reference: {ref['seconds']:.1f} s, {ref['peak_rss_mb']:.0f} MB")
        rows.append(_row("reference (1 process)", records, ref["seconds"],
                         peak_rss_mb=round(ref["peak_rss_mb"]),
                         note=f"{ref['seconds']:.1f} s, peak {ref['peak_rss_mb']:.0f} MB"))
        modes = ("group",) if quick else tuple(
            os.environ.get("BENCH_PIPELINE_MODES", "group,ns").split(","))
        for mode in modes:
            warm = not quick and i == 0 and records <= 2_000_000
            got = _run_child("spark", folder, mode, warm=warm)
            if got["counts"] != ref["counts"]:
                raise AssertionError(f"spark {mode} tables differ in size from the "
                                     f"reference: {got['counts']} vs {ref['counts']}")
            say(f"  spark {mode}: {got['seconds']:.1f} s (session {got['session_s']:.1f} s)"
                + (f", warm {got['warm_s']:.1f} s" if "warm_s" in got else "")
                + f", {got['peak_rss_mb']:.0f} MB")
            rate_ref = records / ref["seconds"]
            rows.append(_row(
                f"spark local[2] partition={mode}, end to end", records, got["seconds"],
                ratio=round(records / got["seconds"] / rate_ref, 3),
                session_s=round(got["session_s"], 1), peak_rss_mb=round(got["peak_rss_mb"]),
                replay_partitions=got["partitions"],
                note=f"{got['seconds']:.1f} s incl. {got['session_s']:.1f} s session start, "
                     f"peak {got['peak_rss_mb']:.0f} MB"))
            if "warm_s" in got:
                rows.append(_row(f"spark local[2] partition={mode}, warm JVM", records,
                                 got["warm_s"],
                                 ratio=round(records / got["warm_s"] / rate_ref, 3),
                                 note=f"{got['warm_s']:.1f} s (second run, same session)"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_pipeline",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", default=None, help="comma-separated record counts")
    parser.add_argument("--modes", default=None, help="Spark partitionings: group,ns")
    parser.add_argument("--child", choices=("reference", "spark"), help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="group", help=argparse.SUPPRESS)
    parser.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.path, args.mode, args.warm)), flush=True)
        return 0
    if args.sizes:
        os.environ["BENCH_PIPELINE_SIZES"] = args.sizes
    if args.modes:
        os.environ["BENCH_PIPELINE_MODES"] = args.modes
    for row in run(args.quick):
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
