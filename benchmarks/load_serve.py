"""Load benchmark of ``routing serve`` over TCP (not part of ``python -m benchmarks``).

    python -m benchmarks.load_serve [--seconds 3] [--loops asyncio,uvloop] [--out FILE]
        [--kinds route,register] [--topics 10] [--connections 1,8,64] [--server-src SRC]
    python -m benchmarks.load_serve flood [--connections 64] [--in-flight 256]
        [--seconds 20] [--queue-capacity 10000] [--server-src SRC] [--out FILE]

Starts ``routing serve`` as its own process, registers one broker group (10 topics), then
for each event loop, request kind and connection count (1, 8, 64) runs closed-loop load
generators in **separate processes** (one per 32 connections; each connection sends one
request and waits for its answer): GET_ROUTEINFO_BY_TOPIC of a hot topic, and an unchanged
REGISTER_BROKER (each connection is one broker re-registering the same body). Reports
requests/s, p50/p99 latency, response bytes, the server's CPU seconds per request and its
RSS; then opens 1 000 idle connections and reports the RSS again. The load generators
share the machine with the server: on 2 cores the numbers are a floor, not a ceiling.

``flood`` is the overload probe of issue 27: CONNECTIONS connections (each one broker)
keep IN_FLIGHT unchanged REGISTER_BROKER requests in flight each (a new one for every
answer) for SECONDS, far past the server's queue capacity. It reports, per connection,
the answers (SUCCESS and SYSTEM_BUSY), the time to the first answer (the start-up burst:
every connection's IN_FLIGHT requests arrive at once) and the longest time without an
answer after it (between two answers, or from the last to the end): the server promises
SYSTEM_BUSY at once, so that gap should stay well under a second for every connection.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import routing as r
from routing.remoting import (
    CURRENT_VERSION,
    FrameDecoder,
    RegisterBrokerBody,
    RemotingCommand,
    RequestCode,
    body_crc32,
    encode,
)

CONNECTIONS_PER_PROCESS = 32
TOPICS = [f"Topic{i}" for i in range(10)]


def _register_command(n: int, opaque: int, topics: int = len(TOPICS)) -> RemotingCommand:
    names = TOPICS if topics == len(TOPICS) else [f"Topic{i}" for i in range(topics)]
    body = RegisterBrokerBody(
        data_version=r.DataVersion(counter=1, timestamp=1_700_000_000_000),
        topics={t: r.TopicConfig(topic_name=t, read_queue_nums=8, write_queue_nums=8)
                for t in names}).encode()
    addr = f"10.{n // 250 % 250}.{n % 250}.1:10911"
    return RemotingCommand(code=RequestCode.REGISTER_BROKER, opaque=opaque,
                           version=CURRENT_VERSION, body=body, ext_fields={
                               "brokerName": f"broker-{n}", "brokerAddr": addr,
                               "clusterName": "bench", "haServerAddr": addr,
                               "brokerId": "0", "bodyCrc32": str(body_crc32(body))})


def _route_command(opaque: int) -> RemotingCommand:
    return RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=opaque,
                           version=CURRENT_VERSION, ext_fields={"topic": TOPICS[0]})


async def _connection(port: int, kind: str, n: int, stop_at: float, warm_until: float,
                      out: list[float], sizes: list[int], topics: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    decoder = FrameDecoder()
    # the same request with a new number (opaque) each time, as a client sends it
    frames = [encode(_route_command(i) if kind == "route"
                     else _register_command(n, i, topics)) for i in range(1, 17)]
    clock = time.perf_counter
    sent = 0
    while True:
        start = clock()
        if start >= stop_at:
            break
        writer.write(frames[sent % len(frames)])
        sent += 1
        got: list[RemotingCommand] = []
        while not got:
            data = await reader.read(65536)
            if not data:
                raise ConnectionError("server closed the connection")
            got = decoder.feed(data)
        end = clock()
        if start >= warm_until:
            out.append(end - start)
            sizes.append(len(got[0].body))
    writer.close()


async def _worker(port: int, kind: str, first: int, count: int, seconds: float,
                  warmup: float, topics: int) -> dict[str, Any]:
    now = time.perf_counter()
    latencies: list[float] = []
    sizes: list[int] = []
    await asyncio.gather(*(_connection(port, kind, first + i, now + warmup + seconds,
                                       now + warmup, latencies, sizes, topics)
                           for i in range(count)))
    return {"latencies": latencies, "bytes": sizes[:1], "seconds": seconds}


def worker_main(args: argparse.Namespace) -> None:
    result = asyncio.run(_worker(args.port, args.kind, args.first, args.count, args.seconds,
                                 args.warmup, args.topics))
    json.dump(result, sys.stdout)


# --------------------------------------------------------------------------- the flood


async def _flood_connection(port: int, n: int, in_flight: int, start: float,
                            stop_at: float) -> dict[str, Any]:
    """One broker keeping ``in_flight`` unchanged registrations outstanding until
    ``stop_at``: the answers by code and the longest silence (s)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    decoder = FrameDecoder()
    frames = [encode(_register_command(n, i)) for i in range(1, 17)]
    clock = time.perf_counter
    writer.write(b"".join(frames[i % len(frames)] for i in range(in_flight)))
    sent, last, between = in_flight, start, 0.0
    first: float | None = None
    codes: dict[int, int] = {}
    while True:
        try:
            data = await asyncio.wait_for(reader.read(256 * 1024), max(0.0, stop_at - clock()))
        except TimeoutError:
            break
        if not data:
            raise ConnectionError("server closed the connection")
        now = clock()
        answers = decoder.feed(data)
        if answers:
            if first is None:
                first = now - start
            else:
                between = max(between, now - last)
            last = now
        for answer in answers:
            codes[answer.code] = codes.get(answer.code, 0) + 1
        if now >= stop_at:
            break
        writer.write(b"".join(frames[(sent + i) % len(frames)] for i in range(len(answers))))
        sent += len(answers)
    between = max(between, stop_at - last) if first is not None else 0.0
    writer.close()
    return {"connection": n, "answers": sum(codes.values()),
            "success": codes.get(0, 0), "busy": codes.get(2, 0),
            "first_answer_s": first if first is not None else stop_at - start,
            "max_gap_after_first_s": between}


async def _flood_worker(port: int, first: int, count: int, in_flight: int, seconds: float,
                        start_at: float) -> list[dict[str, Any]]:
    await asyncio.sleep(max(0.0, start_at - time.time()))  # every process starts together
    start = time.perf_counter()
    return list(await asyncio.gather(*(
        _flood_connection(port, first + i, in_flight, start, start + seconds)
        for i in range(count))))


def flood_worker_main(args: argparse.Namespace) -> None:
    json.dump(asyncio.run(_flood_worker(args.port, args.first, args.count, args.in_flight,
                                        args.seconds, args.start_at)), sys.stdout)


def flood(connections: int, in_flight: int, seconds: float, src: Path | None = None,
          queue_capacity: int | None = None) -> dict[str, Any]:
    """The overload probe (module docstring): per-connection answers and longest gap.
    ``queue_capacity`` sets ``defaultThreadPoolQueueCapacity`` (Java's 10 000)."""
    config = None
    if queue_capacity is not None:
        config = Path(tempfile.mkdtemp()) / "namesrv.properties"
        config.write_text(f"defaultThreadPoolQueueCapacity={queue_capacity}\n")
    server = Server("asyncio", src, config)
    try:
        cpu0 = _cpu_s(server.proc.pid)
        start_at = time.time() + 1.0
        procs = [subprocess.Popen(
            [sys.executable, "-m", "benchmarks.load_serve", "flood-worker", "--port",
             str(server.port), "--first", str(first),
             "--count", str(min(CONNECTIONS_PER_PROCESS, connections - first)),
             "--in-flight", str(in_flight), "--seconds", str(seconds),
             "--start-at", str(start_at)], stdout=subprocess.PIPE, text=True)
            for first in range(0, connections, CONNECTIONS_PER_PROCESS)]
        rows = sorted((row for p in procs for row in json.loads(p.communicate()[0])),
                      key=lambda row: row["connection"])
        cpu = _cpu_s(server.proc.pid) - cpu0
    finally:
        server.stop()
    for row in rows:
        row["max_gap_s"] = max(row["first_answer_s"], row["max_gap_after_first_s"])
    gaps = sorted(row["max_gap_s"] for row in rows)
    return {"connections": connections, "in_flight": in_flight, "seconds": seconds,
            "queue_capacity": queue_capacity or 10_000,
            "server_src": str(src) if src else None,
            "max_gap_s": gaps[-1], "median_max_gap_s": statistics.median(gaps),
            "max_gap_after_first_answer_s": max(r["max_gap_after_first_s"] for r in rows),
            "first_answer_max_s": max(r["first_answer_s"] for r in rows),
            "connections_silent_over_1s_after_first_answer": sum(
                r["max_gap_after_first_s"] > 1.0 for r in rows),
            "answers_min": min(row["answers"] for row in rows),
            "answers_max": max(row["answers"] for row in rows),
            "success_total": sum(row["success"] for row in rows),
            "busy_total": sum(row["busy"] for row in rows),
            "server_cpu_s": cpu,
            "server_cpu_us_per_answer": 1e6 * cpu / max(1, sum(r["answers"] for r in rows)),
            "load_avg": os.getloadavg(), "rows": rows}


# --------------------------------------------------------------------------- the server


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """``routing serve`` in its own process; ``src`` runs another checkout's sources (to
    compare with main), and loop ``default`` passes no ``--loop`` (older servers)."""

    def __init__(self, loop: str, src: Path | None = None,
                 config: Path | None = None) -> None:
        command = [sys.executable, "-c", "from routing.cli import main; main()", "serve",
                   "--listen", "127.0.0.1:0", "--log-json"]
        if config is not None:
            command += ["--config", str(config)]
        if loop != "default":
            command += ["--loop", loop]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if src is not None:
            env["PYTHONPATH"] = str(src)
        self.proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
        assert self.proc.stderr is not None
        while True:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError(f"server exited: {self.proc.wait()}")
            event = json.loads(line)
            if event.get("event") == "listening":
                self.port = int(event["port"])
                break
        # keep reading its logs so the pipe never fills
        self._drain = threading.Thread(target=self.proc.stderr.read, daemon=True)
        self._drain.start()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


def _run_load(port: int, kind: str, connections: int, seconds: float,
              warmup: float, topics: int = len(TOPICS)) -> dict[str, Any]:
    procs = []
    for first in range(0, connections, CONNECTIONS_PER_PROCESS):
        count = min(CONNECTIONS_PER_PROCESS, connections - first)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "benchmarks.load_serve", "worker", "--port", str(port),
             "--kind", kind, "--first", str(first), "--count", str(count),
             "--seconds", str(seconds), "--warmup", str(warmup), "--topics", str(topics)],
            stdout=subprocess.PIPE, text=True))
    results = [json.loads(p.communicate()[0]) for p in procs]
    latencies = sorted(x for res in results for x in res["latencies"])
    n = len(latencies)
    return {"requests": n, "req_per_s": n / seconds,
            "p50_ms": 1000 * latencies[n // 2] if n else None,
            "p99_ms": 1000 * latencies[min(n - 1, int(n * 0.99))] if n else None,
            "mean_ms": 1000 * statistics.fmean(latencies) if n else None,
            "response_bytes": results[0]["bytes"][0] if results[0]["bytes"] else 0}


async def _idle(port: int, count: int, hold: asyncio.Event, opened: asyncio.Event) -> None:
    writers = []
    for _ in range(count):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writers.append(writer)
    opened.set()
    await hold.wait()
    for writer in writers:
        writer.close()


def _rss_with_idle(server: Server, count: int) -> tuple[int, int]:
    """Server RSS (KiB) before and with ``count`` idle connections open."""
    before = _rss_kib(server.proc.pid)

    async def run() -> int:
        hold, opened = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(_idle(server.port, count, hold, opened))
        await opened.wait()
        await asyncio.sleep(1.0)  # let the server accept them all
        rss = _rss_kib(server.proc.pid)
        hold.set()
        await task
        return rss

    return before, asyncio.run(run())


def bench(loops: list[str], seconds: float, warmup: float,
          connection_counts: list[int], src: Path | None = None,
          kinds: tuple[str, ...] = ("route", "register"),
          topics: int = len(TOPICS)) -> dict[str, Any]:
    report: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                                          "load_avg_at_start": os.getloadavg()},
                              "seconds": seconds, "warmup": warmup, "topics": topics,
                              "rows": [], "idle": []}
    for loop in loops:
        server = Server(loop, src)
        try:
            # the hot topic's group, on a connection kept open (closing it would remove it)
            anchor = socket.create_connection(("127.0.0.1", server.port))
            anchor.sendall(encode(_register_command(100_000, 1)))
            decoder = FrameDecoder()
            while not decoder.feed(anchor.recv(65536)):
                pass
            report["idle"].append({"loop": loop, "phase": "start",
                                   "rss_kib": _rss_kib(server.proc.pid)})
            for kind in kinds:
                for connections in connection_counts:
                    cpu0 = _cpu_s(server.proc.pid)
                    row = _run_load(server.port, kind, connections, seconds, warmup, topics)
                    cpu = _cpu_s(server.proc.pid) - cpu0
                    row.update(loop=loop, kind=kind, connections=connections, topics=topics,
                               server_cpu_us_per_req=1e6 * cpu / max(1, row["requests"]),
                               server_rss_kib=_rss_kib(server.proc.pid))
                    report["rows"].append(row)
                    print(json.dumps(row), flush=True)
            before, idle = _rss_with_idle(server, 1_000)
            report["idle"].append({"loop": loop, "phase": "after run, then 1000 idle",
                                   "rss_kib_before": before, "rss_kib_idle_1000": idle})
            print(json.dumps(report["idle"][-1]), flush=True)
            anchor.close()
        finally:
            server.stop()
    return report


def _medians(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cells: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for rep in reports:
        for row in rep["rows"]:
            cells.setdefault((row["loop"], row["kind"], row["connections"]), []).append(row)
    out = []
    for (loop, kind, connections), rows in cells.items():
        med = {k: statistics.median(r[k] for r in rows)
               for k in ("req_per_s", "p50_ms", "p99_ms", "server_cpu_us_per_req")}
        out.append({"loop": loop, "kind": kind, "connections": connections, "runs": len(rows),
                    **med, "response_bytes": rows[0]["response_bytes"],
                    "server_rss_kib": max(r["server_rss_kib"] for r in rows)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load_serve",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    worker = sub.add_parser("worker", help="internal: one load-generator process")
    worker.add_argument("--port", type=int, required=True)
    worker.add_argument("--kind", choices=["route", "register"], required=True)
    worker.add_argument("--first", type=int, default=0)
    worker.add_argument("--count", type=int, default=1)
    worker.add_argument("--seconds", type=float, default=3.0)
    worker.add_argument("--warmup", type=float, default=0.5)
    worker.add_argument("--topics", type=int, default=len(TOPICS))
    flood_worker = sub.add_parser("flood-worker", help="internal: one flood process")
    flood_worker.add_argument("--port", type=int, required=True)
    flood_worker.add_argument("--first", type=int, default=0)
    flood_worker.add_argument("--count", type=int, default=1)
    flood_worker.add_argument("--in-flight", type=int, default=256)
    flood_worker.add_argument("--seconds", type=float, default=20.0)
    flood_worker.add_argument("--start-at", type=float, required=True)
    flooding = sub.add_parser("flood", help="the overload probe (see above)")
    flooding.add_argument("--connections", type=int, default=64)
    flooding.add_argument("--in-flight", type=int, default=256)
    flooding.add_argument("--seconds", type=float, default=20.0)
    flooding.add_argument("--server-src", type=Path, default=None)
    flooding.add_argument("--queue-capacity", type=int, default=None,
                          help="the server's defaultThreadPoolQueueCapacity (10000)")
    flooding.add_argument("--out", type=Path, default=None)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--loops", default="asyncio,uvloop")
    parser.add_argument("--connections", default="1,8,64")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--server-src", type=Path, default=None,
                        help="run the server from this source directory (e.g. main's src)")
    parser.add_argument("--kinds", default="route,register",
                        help="request kinds to load: route, register (comma-separated)")
    parser.add_argument("--topics", type=int, default=len(TOPICS),
                        help="topics in each registration body (10: ~2 KB; 1000: ~150 KB)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run everything this many times (report the median per cell)")
    args = parser.parse_args(argv)
    if args.command == "worker":
        worker_main(args)
        return 0
    if args.command == "flood-worker":
        flood_worker_main(args)
        return 0
    if args.command == "flood":
        result = flood(args.connections, args.in_flight, args.seconds, args.server_src,
                       args.queue_capacity)
        print(json.dumps({k: v for k, v in result.items() if k != "rows"}), flush=True)
        if args.out is not None:
            args.out.write_text(json.dumps(result, indent=1) + "\n")
        return 0
    started = time.time()
    reports = [bench(args.loops.split(","), args.seconds, args.warmup,
                     [int(c) for c in args.connections.split(",")], args.server_src,
                     tuple(args.kinds.split(",")), args.topics)
               for _ in range(args.repeat)]
    report: dict[str, Any] = {"runs": reports, "median": _medians(reports),
                              "load_avg_at_end": os.getloadavg()}
    for row in report["median"]:
        print(json.dumps({"median": row}), flush=True)
    report["wall_s"] = time.time() - started
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
