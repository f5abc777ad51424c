"""Start to ready of a fake name server on the wire, beside ``routing serve`` and Java's.

    python -m benchmarks.bench_fake_start [--quick] [--runs N] [--java-runs N] [--publish]

Each start is timed from the call (or the process spawn) to the first accepted TCP
connection on the name server's port, and to the first answered GET_ROUTEINFO_BY_TOPIC:

* the ``nameserver_on_wire`` fixture's work, in process (`serve_on_wire` of a new
  `FakeNameServer`: a thread, an event loop, a bound port), warm, as every test after the
  first pays it; and its first use in a fresh interpreter that has imported
  ``routing.testing`` (the plugin does), which also imports ``routing.remoting``;
* ``routing fake`` (spawned: interpreter, imports, name server, control API) and, for
  comparison, ``routing serve``; resident memory once ready, and the CPU time the process
  used until its first answer (on a shared machine the wall time includes waiting for a
  core; the CPU time does not);
* Apache RocketMQ's ``NamesrvStartup`` built from source
  (``../shared/tools/java-namesrv``: ``build.sh``, then ``PORT=... run.sh``); its rows are
  skipped, with the reason, where ``javac`` or the tool is missing.

Spawned Python children may write bytecode (as an installed wheel has it compiled); one
unmeasured start warms them. Part of ``python -m benchmarks`` (`run`; the quick run
leaves Java out). ``--publish`` writes the table into docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the src layout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from routing.remoting import FrameDecoder, RemotingCommand, RequestCode, encode
from routing.testing import FakeNameServer, serve_on_wire

__all__ = ["run"]

SUITE = "fake_start"
ROOT = Path(__file__).resolve().parent.parent
#: Where ``shared/tools/java-namesrv`` may be: ``$ROUTING_JAVA_NAMESRV``, beside the
#: checkout, or beside the directory of worktrees holding it.
JAVA_TOOLS = [Path(p) for p in (os.environ.get("ROUTING_JAVA_NAMESRV", ""),) if p] + [
    base / "shared" / "tools" / "java-namesrv" for base in (ROOT.parent, ROOT.parent.parent)]
_ROUTE = encode(RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=1,
                                ext_fields={"topic": "TopicTest"}))
_CLI = "from routing.cli import main; main()"
_COLD = """
import socket, sys, time
import routing.testing
t0 = time.perf_counter()
from routing.testing import FakeNameServer, serve_on_wire
with serve_on_wire(FakeNameServer()) as wire:
    with socket.create_connection(("127.0.0.1", wire[0].port)):
        print(time.perf_counter() - t0)
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _answered(sock: socket.socket) -> None:
    """Send a route request on ``sock`` and wait for its answer (any code)."""
    sock.sendall(_ROUTE)
    decoder = FrameDecoder()
    while not decoder.feed(sock.recv(65_536)):
        pass


def _wait_accepted(port: int, started: float, proc: subprocess.Popen[bytes] | None,
                   limit_s: float) -> socket.socket:
    """Connect to ``port`` until it accepts (polling every 1 ms)."""
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=limit_s)
        except OSError:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"the process exited with {proc.returncode}") from None
            if time.perf_counter() - started > limit_s:
                raise TimeoutError(f"port {port} did not accept within {limit_s} s") from None
            time.sleep(0.001)


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds ``pid`` has used (``/proc/PID/stat``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree_rss_mb(pid: int) -> float | None:
    """RSS of ``pid`` and its children (``run.sh`` execs java, but be safe)."""
    total = _rss_mb(pid)
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if total is not None and children.exists():
        for child in children.read_text().split():
            total += _rss_mb(int(child)) or 0.0
    return total


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _row(operation: str, accepted: list[float], answered: list[float],
         rss: list[float], note: str, cpu: list[float] | None = None) -> dict[str, Any]:
    return {"suite": SUITE, "operation": operation, "size": len(accepted),
            "size_unit": "starts",
            "routing_median_ns": statistics.median(accepted) * 1e9,
            "accepted_median_ms": round(statistics.median(accepted) * 1000, 1),
            "accepted_p95_ms": round(_p95(accepted) * 1000, 1),
            "answered_median_ms": round(statistics.median(answered) * 1000, 1)
            if answered else None,
            "answered_p95_ms": round(_p95(answered) * 1000, 1) if answered else None,
            "rss_mb": round(statistics.median(rss), 1) if rss else None,
            "cpu_to_answer_ms": round(statistics.median(cpu) * 1000) if cpu else None,
            "note": f"{note}; to first accepted connection, p95 {_p95(accepted) * 1000:.1f} ms"}


def _skipped(operation: str, reason: str) -> dict[str, Any]:
    return {"suite": SUITE, "operation": operation, "size": 0, "size_unit": "starts",
            "skipped": reason, "note": f"skipped: {reason}"}


# --------------------------------------------------------------------------- in process


def fixture_starts(runs: int) -> dict[str, Any]:
    accepted, answered = [], []
    for _ in range(runs + 1):
        t0 = time.perf_counter()
        with serve_on_wire(FakeNameServer()) as wire, contextlib.closing(
                _wait_accepted(wire[0].port, t0, None, 10)) as sock:
            t1 = time.perf_counter()
            _answered(sock)
            t2 = time.perf_counter()
        accepted.append(t1 - t0)
        answered.append(t2 - t0)
    return _row("fixture nameserver_on_wire (in process, warm)", accepted[1:], answered[1:],
                [], "serve_on_wire(FakeNameServer()): thread, event loop, bound port")


def fixture_cold(runs: int, env: dict[str, str]) -> dict[str, Any]:
    times = []
    for _ in range(runs + 1):
        out = subprocess.run([sys.executable, "-c", _COLD], capture_output=True, text=True,
                             env=env, check=True).stdout
        times.append(float(out.strip()))
    return _row("fixture, first use in a session (imports routing.remoting)", times[1:], [],
                [], "after `import routing.testing` (the pytest plugin does it)")


# --------------------------------------------------------------------------- processes


def _spawn_starts(name: str, argv: Callable[[int], list[str]], runs: int, env: dict[str, str],
                  *, warm: int, limit_s: float, note: str) -> dict[str, Any]:
    accepted, answered, rss, cpu = [], [], [], []
    for i in range(runs + warm):
        port = _free_port()
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv(port), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        try:
            with contextlib.closing(_wait_accepted(port, t0, proc, limit_s)) as sock:
                t1 = time.perf_counter()
                _answered(sock)
                t2 = time.perf_counter()
            if i >= warm:
                accepted.append(t1 - t0)
                answered.append(t2 - t0)
                size, used = _tree_rss_mb(proc.pid), _cpu_s(proc.pid)
                if size is not None:
                    rss.append(size)
                if used is not None:
                    cpu.append(used)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return _row(name, accepted, answered, rss, note, cpu)


def python_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                      env.get("PYTHONPATH")]))
    return env


def command_starts(runs: int, env: dict[str, str]) -> list[dict[str, Any]]:
    fake = _spawn_starts(
        "routing fake (process: interpreter, imports, name server, control API)",
        lambda port: [sys.executable, "-c", _CLI, "fake", "--listen", f"127.0.0.1:{port}",
                      "--control", "127.0.0.1:0"],
        runs, env, warm=1, limit_s=30, note="the port accepts / answers a route request")
    serve = _spawn_starts(
        "routing serve (process, for comparison)",
        lambda port: [sys.executable, "-c", _CLI, "serve", "--listen", f"127.0.0.1:{port}",
                      "--log-level", "WARNING"],
        runs, env, warm=1, limit_s=30, note="the wall-clock name server, same host")
    return [fake, serve]


def java_starts(runs: int) -> dict[str, Any]:
    name = "Apache RocketMQ NamesrvStartup (Java, built from source)"
    if shutil.which("javac") is None or shutil.which("java") is None:
        return _skipped(name, "javac/java not found (openjdk-17-jdk-headless)")
    tool = next((t for t in JAVA_TOOLS if (t / "build.sh").is_file()), None)
    if tool is None:
        return _skipped(name, "shared/tools/java-namesrv is missing (a fresh clone has none; "
                              "set ROUTING_JAVA_NAMESRV)")
    work = Path(os.environ.get("WORK", Path.home() / ".cache" / "java-namesrv"))
    if not (work / "classpath").is_file():
        built = subprocess.run([str(tool / "build.sh")], capture_output=True, text=True)
        if built.returncode != 0:
            return _skipped(name, f"build.sh failed: {built.stderr.strip()[-300:]}")
    env = {**os.environ, "RMQ_LOG_LEVEL": "WARN"}
    return _spawn_starts(
        name, lambda port: ["env", f"PORT={port}", str(tool / "run.sh")], runs, env,
        warm=0, limit_s=120, note="run.sh: -Xms1g -Xmx1g, as shipped but a smaller heap")


def run(quick: bool, *, runs: int | None = None, java_runs: int | None = None
        ) -> list[dict[str, Any]]:
    """The rows; ``quick`` takes few starts and leaves Java out."""
    n = runs if runs is not None else (5 if quick else 30)
    env = python_env()
    rows = [fixture_starts(n * 4), fixture_cold(max(3, n // 3), env), *command_starts(n, env)]
    java_n = java_runs if java_runs is not None else (0 if quick else 5)
    rows.append(java_starts(java_n) if java_n else
                _skipped("Apache RocketMQ NamesrvStartup (Java, built from source)",
                         "not run in the quick run"))
    return rows


def markdown(rows: list[dict[str, Any]], header: str) -> str:
    lines = [header, "",
             "| start | runs | first accepted connection, median / p95 | first answered "
             "route request, median / p95 | CPU used until then | RSS once ready |",
             "|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        if "skipped" in row:
            lines.append(f"| {row['operation']} | 0 | skipped: {row['skipped']} | | | |")
            continue
        answered = (f"{row['answered_median_ms']} / {row['answered_p95_ms']} ms"
                    if row["answered_median_ms"] is not None else "–")
        rss = f"{row['rss_mb']:.0f} MB" if row["rss_mb"] is not None else "–"
        cpu = f"{row['cpu_to_answer_ms']} ms" if row.get("cpu_to_answer_ms") else "–"
        lines.append(f"| {row['operation']} | {row['size']} | {row['accepted_median_ms']} / "
                     f"{row['accepted_p95_ms']} ms | {answered} | {cpu} | {rss} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_fake_start",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--java-runs", type=int, default=None)
    parser.add_argument("--publish", action="store_true",
                        help="write the table into docs/performance.md")
    args = parser.parse_args(argv)
    rows = run(args.quick, runs=args.runs, java_runs=args.java_runs)
    load = os.getloadavg()[0]
    header = (f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores, load average "
              f"{load:.1f} at the end (`python -m benchmarks.bench_fake_start"
              f"{' --quick' if args.quick else ''}`).")
    text = markdown(rows, header)
    print(text)
    if args.publish:
        from benchmarks._harness import replace_block
        if not replace_block(ROOT / "docs" / "performance.md", "bench:fake_start", text):
            print("docs/performance.md has no bench:fake_start block", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
