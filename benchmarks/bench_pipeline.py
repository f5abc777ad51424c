"""The PySpark pipeline against the single-process reference: journal records per second.

Journals come from the simulator (`routing.sim`, default faults, 3 name servers). The run
simulates about 1 M records once (cached in ``build/bench-pipeline/``) and makes larger
sizes by copying those journals under new name-server names (``r<i>-ns-<j>``: the same work
per record, more name servers). Each engine runs in a fresh child process so that its time
includes everything a user waits for (for Spark: JVM and session start, reading, the
analysis and writing every table as Parquet) and its peak memory is its own (the process
tree's RSS, sampled every 0.2 s; CPU seconds of the whole tree too). Spark runs on
``local[2,2]`` (this machine's two cores, a failed task retried once: the default
``local[*,2]``) with the default options. Both engines' tables are compared row for row (read
back from their Parquet files): a row with ``equal: false`` means the run is wrong.

``python -m benchmarks.bench_pipeline --records 10M`` (or ``--records 1M,10M``, ``--quick``;
``--master 'local-cluster[2,1,1024]'``, ``spark://127.0.0.1:7077`` or a Spark Connect
server's ``sc://127.0.0.1:15002``, whose process the CPU and memory columns do not count;
``--engines reference,spark``; ``--publish`` merges the rows into ``docs/benchmarks.json``)
prints the rows as JSON lines. ``--single-ns --records 5M`` instead simulates one name
server into one file of about that many records (300 groups, cached; about 20 minutes to
simulate 5 M on a busy 2-core machine): the case where Spark reads one file in byte ranges
(``read_tasks``); ``--split-read-bytes N`` overrides the size above which such a file is cut
(0: always, when the files are fewer than the cores; a huge value: never), to compare the
two reads. Not a timed test: 10 M records take several minutes per engine on 2 cores.
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

FULL_SIZES = (1_000_000,)
#: This machine's two cores; a failed task is retried once, as with the default local[*,2].
MASTER = "local[2,2]"
QUICK_SIZES = (20_000,)


def _base_config(quick: bool) -> Any:
    from routing.sim import SimConfig

    if quick:  # about 20 k records
        return SimConfig(groups=10, slaves=1, nameservers=3, duration_ms=3_600_000 * 9 // 10,
                         seed=11, faults="default")
    # about 1 M records: 50 groups x 2 brokers x 3 name servers, 26 simulated hours
    return SimConfig(groups=50, slaves=1, nameservers=3, duration_ms=26 * 3_600_000,
                     seed=11, faults="default")


#: Journal records a simulated hour of the single-name-server input (300 groups of a master
#: and a slave: one registration per broker every 30 s, one scan every 5 s).
_ONE_NS_PER_HOUR = 72_000


def _one_ns_config(size: int) -> Any:
    from routing.sim import SimConfig

    hours = max(1, -(-size // _ONE_NS_PER_HOUR))
    return SimConfig(groups=300, slaves=1, nameservers=1, duration_ms=hours * 3_600_000,
                     seed=11, faults="default")


def one_ns_journal(size: int, log: Any = print) -> tuple[Path, int]:
    """A folder holding one name server's journal in one file of about ``size`` records
    (simulated once, cached): (folder, exact lines). Same as ``routing simulate --groups
    300 --nameservers 1 --duration <size / 72 000>h --seed 11 --out FOLDER``."""
    from routing.sim import simulate

    config = _one_ns_config(size)
    folder = CACHE / f"one-ns-{config.duration_ms // 3_600_000}h"
    if not (folder / "ns-0.jsonl").exists():
        log(f"simulating one name server for {config.duration_ms // 3_600_000} h into "
            f"{folder} …")
        started = time.perf_counter()
        tmp = folder.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        simulate(config, out_dir=tmp)
        (tmp / "summary.json").unlink(missing_ok=True)
        tmp.rename(folder)
        log(f"  {time.perf_counter() - started:.0f} s")
    return folder, _count(folder)


#: The fleet shape: a few name servers, each one long journal with snapshots (issue 30).
FLEET_COMMAND = ("routing simulate --groups 300 --nameservers 3 --duration 40h "
                 "--snapshot-every 60m --seed 0")
FLEET_SHAPE = "fleet shape (3 name servers x 1 file, 40 h, 60-min snapshots, distinct content)"


def fleet_journals(path: str | None, log: Any = print) -> tuple[Path, int]:
    """The fleet-shape folder: ``path``, or simulated once into the cache with
    `FLEET_COMMAND` (about 8.5 M records, 1.55 GB; about an hour on a busy 2-core
    machine). Returns (folder, lines)."""
    if path is not None:
        folder = Path(path)
    else:
        folder = CACHE / "fleet40h"
        if not (folder / "ns-2.jsonl").exists():
            log(f"simulating the fleet journals into {folder} ({FLEET_COMMAND}) …")
            subprocess.run([sys.executable, "-c", "from routing.cli import main; main()",
                            *FLEET_COMMAND.split()[1:],
                            "--out", str(folder), "--no-progress"], cwd=ROOT, check=True,
                           stdout=subprocess.DEVNULL)
    return folder, _count(folder)


def _count(folder: Path) -> int:
    return sum(sum(1 for _ in open(f, "rb")) for f in sorted(folder.glob("*.jsonl")))


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
            for src in sorted(base.glob("*.jsonl")):
                text = src.read_text(encoding="utf-8")
                (tmp / f"r{i}-{src.name}").write_text(text.replace('"ns-', f'"r{i}-ns-'),
                                                      encoding="utf-8")
        tmp.rename(folder)
    return folder, base_lines * copies


# --------------------------------------------------------------------------- child runs


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _kind(pid: int) -> str:
    """What a process of the run is: ``jvm``, ``driver`` (this Python) or ``python worker``."""
    if pid == os.getpid():
        return "driver"
    argv = _cmdline(pid).split(b"\0")
    if not argv[0]:
        return "other"
    return "jvm" if argv[0].endswith(b"java") else "python worker"


class _PeakRss:
    """Samples the RSS of this process and all its descendants (Linux /proc) every 0.2 s,
    and their CPU time (user + system, the last value seen of each process: a JVM that
    outlives ``spark.stop()`` is counted too)."""

    def __init__(self) -> None:
        self.peak = 0
        #: each process's peak RSS, by pid: (kind, bytes); kinds: see `_kind`
        self.by_pid: dict[int, tuple[str, int]] = {}
        self.cpu: dict[int, float] = {}
        self._tick = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree_rss(self) -> int:
        parents: dict[int, int] = {}
        rss: dict[int, int] = {}
        cpu: dict[int, float] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                parents[int(entry)] = int(fields[1])
                rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
                cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / self._tick
            except (OSError, IndexError, ValueError):
                continue
        tree, frontier = {os.getpid()}, [os.getpid()]
        while frontier:
            pid = frontier.pop()
            for child, parent in parents.items():
                if parent == pid and child not in tree:
                    tree.add(child)
                    frontier.append(child)
        # A JVM starts a process (Hadoop's shell calls, Python workers) by spawning a copy of
        # itself that shares its memory until it runs the new program: that copy shows the
        # JVM's whole RSS for a moment and is not memory of its own (counting it had added
        # about 1 GB to some peaks). Python workers forked by their daemon are real copies
        # and stay counted (their shared pages twice: the figure errs high).
        tree -= {pid for pid in tree if parents.get(pid) in tree
                 and _kind(parents[pid]) == "jvm"
                 and _cmdline(pid) == _cmdline(parents[pid])}
        for pid in tree:
            if pid in cpu:
                self.cpu[pid] = max(self.cpu.get(pid, 0.0), cpu[pid])
            if pid in rss and rss[pid] > self.by_pid.get(pid, ("", 0))[1]:
                # its kind as it is now: a JVM starts as a copy of the Python that spawns it
                self.by_pid[pid] = (_kind(pid), rss[pid])
        return sum(rss.get(p, 0) for p in tree)

    def peaks_by_kind(self) -> dict[str, int]:
        """The largest single process of each kind, MB (the JVM, the driver's Python, the
        largest Python worker)."""
        out: dict[str, int] = {}
        for kind, size in self.by_pid.values():
            out[kind] = max(out.get(kind, 0), round(size / 2**20))
        return out

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, self._tree_rss())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self._tree_rss())


def _child(engine: str, path: str, out_dir: str, master: str,
           split_read_bytes: int | None = None, partition: str = "ns",
           event_log: str | None = None) -> dict[str, Any]:
    sampler = _PeakRss()
    out = Path(out_dir)
    result: dict[str, Any] = {}
    try:
        started = time.perf_counter()
        if engine == "reference":  # what `routing analyze --local` runs
            from routing.pipeline import analyze_local_to

            analyze_local_to(out, path)
            result["seconds"] = time.perf_counter() - started
        else:
            from routing.pipeline import _spark_lines, analyze, spark_session

            if split_read_bytes is not None:
                _spark_lines.SPLIT_READ_BYTES = split_read_bytes
            if master.startswith("sc://"):  # a Spark Connect server (not our child)
                from routing.pipeline import remote_session

                spark = remote_session(master)
            else:
                conf = None if event_log is None else {
                    "spark.eventLog.enabled": "true", "spark.eventLog.dir": event_log,
                    "spark.eventLog.compress": "false"}
                spark = spark_session(master, app_name="bench-pipeline", conf=conf)
            result["session_s"] = time.perf_counter() - started
            analysis = analyze(spark, path, partition=partition)
            analysis.write(str(out))
            result["seconds"] = time.perf_counter() - started
            result["partitions"] = sum(analysis.partitions.values())
            result["read_tasks"] = analysis.read_tasks
            files = [p for p in Path(path).iterdir() if p.suffix == ".jsonl"]
            result["files"] = len(files)
            result["file_mb"] = round(max(p.stat().st_size for p in files) / 2**20, 1)
            analysis.unpersist()
            spark.stop()
            if event_log is not None:
                from benchmarks.task_metrics import replay_tasks, summary

                result["replay_tasks"] = summary(replay_tasks(Path(event_log)))
    finally:
        result["peak_rss_mb"] = sampler.stop() / 2**20
        result["peak_by_process_mb"] = sampler.peaks_by_kind()
        result["cpu_s"] = sum(sampler.cpu.values())
    return result


def _tables(folder: Path) -> dict[str, list[dict[str, Any]]]:
    import pyarrow.parquet as pq

    from routing.pipeline._schema import TABLES, sort_rows

    return {name: sort_rows(table, pq.read_table(folder / name).to_pylist())
            for name, table in TABLES.items()}


def _equal(a: Path, b: Path) -> list[str]:
    """The tables whose rows differ between two output folders."""
    left, right = _tables(a), _tables(b)
    return [name for name in left if left[name] != right[name]]


def _run_child(engine: str, path: Path, out: Path, master: str = MASTER,
               split_read_bytes: int | None = None, partition: str = "ns") -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.bench_pipeline", "--child", engine,
           "--path", str(path), "--child-out", str(out), "--master", master,
           "--partition", partition]
    if engine == "spark":
        cmd += ["--event-log", tempfile.mkdtemp(prefix="bench-pipeline-events-")]
    if split_read_bytes is not None:
        cmd += ["--split-read-bytes", str(split_read_bytes)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{engine} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# --------------------------------------------------------------------------- the suite


def _row(operation: str, records: int, seconds: float, **extra: Any) -> dict[str, Any]:
    rate = records / seconds if seconds else 0.0
    return {"suite": SUITE, "name": f"{operation} @ {records:,}", "operation": operation,
            "size": records, "size_unit": "records", "ops_per_s": rate,
            "routing_ops_per_s": rate, "seconds": round(seconds, 2), **extra}


def run(quick: bool, log: Any = None, *, sizes: tuple[int, ...] | None = None,
        engines: tuple[str, ...] = ("reference", "spark"), master: str = MASTER,
        single_ns: bool = False, split_read_bytes: int | None = None, fleet: bool = False,
        fleet_path: str | None = None, partitions: tuple[str, ...] = ("ns",)
        ) -> list[dict[str, Any]]:
    """Rows: records/s, CPU seconds and peak memory of the reference and of Spark (default
    options; each of ``partitions``) for each size; ``ratio`` is Spark's rate over the
    reference's, ``equal`` says whether every table matched the reference's row for row,
    ``replay_tasks`` holds Spark's task metrics of the replay (`benchmarks.task_metrics`).
    ``fleet``: the fleet shape (`fleet_journals`) instead of copies of one simulation."""
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    rows: list[dict[str, Any]] = []
    sizes = sizes or (QUICK_SIZES if quick else tuple(
        int(float(s)) for s in os.environ.get("BENCH_PIPELINE_SIZES", "").split(",") if s
    ) or FULL_SIZES)
    load = os.getloadavg()[0]
    for size in (sizes[:1] if fleet else sizes):
        folder, records = (fleet_journals(fleet_path, say) if fleet
                           else one_ns_journal(size, say) if single_ns
                           else journals(size, quick, say))
        say(f"pipeline: {records:,} records in {folder} (load {load:.1f})")
        runs = [e if e != "spark" or len(partitions) == 1 else f"spark:{p}"
                for e in engines for p in (partitions if e == "spark" else ("",))]
        outs = {e: Path(tempfile.mkdtemp(prefix="bench-pipeline-")) for e in runs}
        got: dict[str, dict[str, Any]] = {}
        differ: list[str] = []
        try:
            for engine in runs:
                kind, _, partition = engine.partition(":")
                got[engine] = _run_child(kind, folder, outs[engine], master,
                                         split_read_bytes if kind == "spark" else None,
                                         partition or partitions[0])
                r = got[engine]
                say(f"  {engine}: {r['seconds']:.1f} s, {r['cpu_s']:.0f} CPU s, "
                    f"{r['peak_rss_mb']:.0f} MB (largest process of each kind, MB: "
                    f"{r.get('peak_by_process_mb', {})})")
            # against the reference's tables; without it, the Spark runs against the first
            base = "reference" if "reference" in outs else runs[0]
            differ = sorted({name for e in outs if e != base
                             for name in _equal(outs[base], outs[e])})
        finally:
            for out in outs.values():
                shutil.rmtree(out, ignore_errors=True)
        if differ:
            say(f"  TABLES DIFFER: {differ}")
        ref = got.get("reference")
        for engine, r in got.items():
            extra: dict[str, Any] = {
                "cpu_s": round(r["cpu_s"], 1), "peak_rss_mb": round(r["peak_rss_mb"]),
                "peak_by_process_mb": r.get("peak_by_process_mb", {}),
                "loadavg_1m": round(load, 1)}
            if len(got) >= 2:
                extra["equal"] = not differ
                extra["compared_with"] = base
            if engine.startswith("spark"):
                extra.update(session_s=round(r["session_s"], 1), master=master,
                             replay_partitions=r["partitions"],
                             read_tasks=r["read_tasks"], files=r["files"],
                             file_mb=r["file_mb"], partition=engine.partition(":")[2]
                             or partitions[0], replay_tasks=r.get("replay_tasks"))
                if split_read_bytes is not None:
                    extra["split_read_bytes"] = split_read_bytes
                if ref is not None:
                    extra["ratio"] = round(ref["seconds"] / r["seconds"], 3)
            name = ("reference (1 process)" if engine == "reference"
                    else f"spark {master}, default options, end to end"
                    if extra.get("partition", "ns") == "ns"
                    else f"spark {master}, --partition {extra['partition']}, end to end")
            if single_ns:
                name += ", one name server in one file"
            if fleet:
                name += f", {FLEET_SHAPE}"
            rows.append(_row(name, records, r["seconds"], **extra,
                             note=f"{r['seconds']:.1f} s, {r['cpu_s']:.0f} CPU s, peak "
                                  f"{r['peak_rss_mb']:.0f} MB"
                                  + ("" if "equal" not in extra else
                                     ", tables equal" if extra["equal"] else ", TABLES DIFFER")))
    return rows


def _size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("KM")) * scale)


def publish(rows: list[dict[str, Any]]) -> None:
    """Replace the rows of the same operation and size in ``docs/benchmarks.json``."""
    path = ROOT / "docs" / "benchmarks.json"
    document = json.loads(path.read_text())
    keys = {(r["operation"], r["size"]) for r in rows}
    kept = [r for r in document["rows"]
            if r.get("suite") != SUITE or (r["operation"], r["size"]) not in keys]
    document["rows"] = kept + rows
    path.write_text(json.dumps(document, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_pipeline",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--records", default=None, help="sizes, e.g. 1M,10M")
    parser.add_argument("--engines", default="reference,spark")
    parser.add_argument("--master", default=MASTER,
                        help="Spark master [local[2,2]]; e.g. 'local-cluster[2,1,1024]', "
                             "spark://127.0.0.1:7077, or sc://127.0.0.1:15002 (a Spark "
                             "Connect server's URL: --remote)")
    parser.add_argument("--single-ns", action="store_true",
                        help="one name server in one simulated file of --records records")
    parser.add_argument("--split-read-bytes", type=int, default=None,
                        help="cut one-name-server files above this size into byte ranges "
                             "(default: the pipeline's 128 MB; 0: always)")
    parser.add_argument("--fleet", action="store_true",
                        help="the fleet shape instead: 3 name servers, long journals with "
                             "60-min snapshots (FLEET_COMMAND, cached; or --fleet-path)")
    parser.add_argument("--fleet-path", default=None,
                        help="a folder holding such journals already (e.g. made by "
                             "FLEET_COMMAND)")
    parser.add_argument("--partition", default="ns",
                        help="Spark's partition (ns, ns-whole, group); with --fleet, "
                             "several: ns,ns-whole")
    parser.add_argument("--publish", action="store_true",
                        help="merge the rows into docs/benchmarks.json")
    parser.add_argument("--child", choices=("reference", "spark"), help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    parser.add_argument("--event-log", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.path, args.child_out, args.master,
                                args.split_read_bytes, args.partition, args.event_log)),
              flush=True)
        return 0
    sizes = tuple(_size(s) for s in args.records.split(",")) if args.records else None
    rows = run(args.quick, sizes=sizes, engines=tuple(args.engines.split(",")),
               master=args.master, single_ns=args.single_ns,
               split_read_bytes=args.split_read_bytes,
               fleet=args.fleet or args.fleet_path is not None, fleet_path=args.fleet_path,
               partitions=tuple(args.partition.split(",")))
    for row in rows:
        print(json.dumps(row), flush=True)
    if args.publish:
        publish(rows)
    return 0 if all(r.get("equal", True) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
