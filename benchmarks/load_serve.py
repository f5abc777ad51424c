"""Load benchmark of ``routing serve`` over TCP, alone or beside Apache RocketMQ's own name
server (not part of ``python -m benchmarks``).

    python -m benchmarks.load_serve [--seconds 3] [--loops asyncio,uvloop] [--out FILE]
        [--kinds route,register,heartbeat] [--topics 10] [--connections 1,8,64]
        [--server-src SRC] [--java] [--null] [--client python|c] [--stable] [--repeat N]
    python -m benchmarks.load_serve flood [--connections 64] [--in-flight 256]
        [--seconds 20] [--queue-capacity 10000] [--server-src SRC] [--out FILE]

Starts ``routing serve`` as its own process (one per event loop in ``--loops``; a loop
written ``LOOP@SRC`` runs the server from another source tree, for a before/after in one
run), with
``--java`` Java's name server too (tests/java/java_namesrv.py: the shared java-namesrv tool)
and with ``--null`` a server that answers every frame with a fixed frame and does no work (the
clients' ceiling). On each it registers one broker group (10 topics) on a connection that stays
open, then for each request kind and connection count runs closed-loop load generators in
**separate processes** (one per 32 connections; each connection sends one request and waits
for its answer): GET_ROUTEINFO_BY_TOPIC of a hot topic (``route``), an unchanged
REGISTER_BROKER (``register``: each connection is one broker re-registering the same body),
and BROKER_HEARTBEAT (``heartbeat``: each connection registers its broker once, untimed, then
sends heartbeats). The generators are the project's Python workers (``--client python``) or
a small C client on epoll (``--client c``, built with gcc at run time:
benchmarks/_load_peers.py), which needs far less CPU per request and so leaves the servers
the cores. With ``--stable``, Java's name server is first driven at 16 connections of each kind in
2 s windows until the last five windows (10 s) are within 5 % of each other (its JIT
compiles the hot paths meanwhile; at most ``--stable-max`` seconds); the others get the
plain ``--warmup`` of each cell (Python and C have no JIT to wait for). All servers run at
once and take each cell in turn, so that other load on the machine falls on all alike.
Reports requests/s, p50/p99 latency, response bytes, the server's CPU seconds per request
and its RSS; then opens 1 000 idle connections and reports the RSS again. The load
generators share the machine with the servers.

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


def _heartbeat_command(n: int, opaque: int) -> RemotingCommand:
    registration = _register_command(n, opaque, 0)
    ext = {k: registration.ext_fields[k]
           for k in ("brokerName", "brokerAddr", "clusterName", "brokerId")}
    return RemotingCommand(code=RequestCode.BROKER_HEARTBEAT, opaque=opaque,
                           version=CURRENT_VERSION, ext_fields=ext)


def _frames(kind: str, n: int, topics: int) -> tuple[bytes | None, bytes]:
    """Connection ``n``'s setup frame (sent once, untimed) and load frame."""
    if kind == "route":
        return None, encode(_route_command(1))
    register = encode(_register_command(n, 1, topics))
    if kind == "register":
        return register, register
    return register, encode(_heartbeat_command(n, 2))


def _route_command(opaque: int) -> RemotingCommand:
    return RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=opaque,
                           version=CURRENT_VERSION, ext_fields={"topic": TOPICS[0]})


async def _connection(port: int, kind: str, n: int, stop_at: float, warm_until: float,
                      out: list[float], sizes: list[int], topics: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    decoder = FrameDecoder()
    # the same request with a new number (opaque) each time, as a client sends it
    frames = [encode(_route_command(i) if kind == "route"
                     else _heartbeat_command(n, i) if kind == "heartbeat"
                     else _register_command(n, i, topics)) for i in range(1, 17)]
    clock = time.perf_counter
    sent = 0
    if kind == "heartbeat":  # the broker registers first (during the warm-up)
        writer.write(encode(_register_command(n, 99, topics)))
        while not decoder.feed(await reader.read(65536)):
            pass
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
    return sum(_cpu_split_s(pid))


def _cpu_split_s(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid`` so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


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
        self.pid = self.proc.pid

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


def _stats(latencies_s: list[float] | None, hist_us: dict[int, int] | None,
           seconds: float) -> dict[str, Any]:
    """requests/s, p50/p99/mean ms from sorted latencies (s) or a histogram (µs → count)."""
    if hist_us is not None:
        n = sum(hist_us.values())
        keys = sorted(hist_us)

        def quantile(q: float) -> float:
            rank, seen = int(n * q), 0
            for key in keys:
                seen += hist_us[key]
                if seen > rank:
                    return (key + 0.5) / 1000
            return (keys[-1] + 0.5) / 1000

        mean = sum((k + 0.5) * c for k, c in hist_us.items()) / n / 1000 if n else None
        return {"requests": n, "req_per_s": n / seconds,
                "p50_ms": quantile(0.5) if n else None,
                "p99_ms": quantile(0.99) if n else None, "mean_ms": mean}
    latencies = sorted(latencies_s or [])
    n = len(latencies)
    return {"requests": n, "req_per_s": n / seconds,
            "p50_ms": 1000 * latencies[n // 2] if n else None,
            "p99_ms": 1000 * latencies[min(n - 1, int(n * 0.99))] if n else None,
            "mean_ms": 1000 * statistics.fmean(latencies) if n else None}


def _run_load(port: int, kind: str, connections: int, seconds: float,
              warmup: float, topics: int = len(TOPICS), client: str = "python",
              workdir: Path | None = None) -> dict[str, Any]:
    if client == "c":
        from benchmarks._load_peers import run_c_load

        frames = [_frames(kind, n, topics) for n in range(connections)]
        setup = [s for s, _ in frames if s is not None]
        with tempfile.TemporaryDirectory(dir=workdir) as folder:
            got = run_c_load(port, connections, seconds, warmup, setup,
                             [f for _, f in frames], Path(folder), CONNECTIONS_PER_PROCESS)
        row = _stats(None, got["hist"], seconds)
        reply = _probe(port, frames[0])
        row["response_bytes"] = reply
        return row
    procs = []
    for first in range(0, connections, CONNECTIONS_PER_PROCESS):
        count = min(CONNECTIONS_PER_PROCESS, connections - first)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "benchmarks.load_serve", "worker", "--port", str(port),
             "--kind", kind, "--first", str(first), "--count", str(count),
             "--seconds", str(seconds), "--warmup", str(warmup), "--topics", str(topics)],
            stdout=subprocess.PIPE, text=True))
    results = [json.loads(p.communicate()[0]) for p in procs]
    row = _stats([x for res in results for x in res["latencies"]], None, seconds)
    row["response_bytes"] = results[0]["bytes"][0] if results[0]["bytes"] else 0
    return row


def _probe(port: int, frames: tuple[bytes | None, bytes]) -> int:
    """The body size of the answer to one connection's load frame (after its setup)."""
    setup, load = frames
    with socket.create_connection(("127.0.0.1", port)) as sock:
        decoder = FrameDecoder()
        answers: list[RemotingCommand] = []
        for frame in ([setup] if setup is not None else []) + [load]:
            sock.sendall(frame)
            answers = []
            while not answers:
                answers = decoder.feed(sock.recv(65536))
        return len(answers[0].body)


def _warm(port: int, kind: str, client: str, topics: int, max_s: float,
          window_s: float = 2.0, windows: int = 5, tolerance: float = 0.05) -> dict[str, Any]:
    """Drive 16 connections in ``window_s`` windows until the last ``windows`` rates are
    within ``tolerance`` of their mean (at most ``max_s``). Returns the rates seen."""
    rates: list[float] = []
    started = time.monotonic()
    while time.monotonic() - started < max_s:
        rates.append(_run_load(port, kind, 16, window_s, 0.2, topics, client)["req_per_s"])
        last = rates[-windows:]
        if len(last) == windows:
            mean = statistics.fmean(last)
            if mean and (max(last) - min(last)) / mean <= tolerance:
                return {"kind": kind, "stable": True, "seconds": time.monotonic() - started,
                        "rates": [round(x) for x in rates]}
    return {"kind": kind, "stable": False, "seconds": time.monotonic() - started,
            "rates": [round(x) for x in rates]}


async def _idle(port: int, count: int, hold: asyncio.Event, opened: asyncio.Event) -> None:
    writers = []
    for _ in range(count):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writers.append(writer)
    opened.set()
    await hold.wait()
    for writer in writers:
        writer.close()


def _rss_with_idle(server: Any, count: int) -> tuple[int, int]:
    """Server RSS (KiB) before and with ``count`` idle connections open."""
    before = _rss_kib(server.pid)

    async def run() -> int:
        hold, opened = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(_idle(server.port, count, hold, opened))
        await opened.wait()
        await asyncio.sleep(1.0)  # let the server accept them all
        rss = _rss_kib(server.pid)
        hold.set()
        await task
        return rss

    return before, asyncio.run(run())


def _start(label: str, src: Path | None, workdir: Path) -> Any:
    """``routing serve`` on event loop ``label``, or Java's (``java``), or the null server;
    ``LOOP@SRC`` runs ``routing serve`` from another source tree (a before/after in one
    run: ``--loops asyncio,asyncio@/tmp/before/src``)."""
    if "@" in label:
        loop, _, other = label.partition("@")
        return Server(loop, Path(other))
    if label == "java":
        from benchmarks._load_peers import JavaServer

        return JavaServer()
    if label == "null":
        from benchmarks._load_peers import NullServer

        answer = RemotingCommand(code=0, opaque=1, flag=1, version=CURRENT_VERSION)
        return NullServer(encode(answer), workdir)
    return Server(label, src)


def bench(loops: list[str], seconds: float, warmup: float,
          connection_counts: list[int], src: Path | None = None,
          kinds: tuple[str, ...] = ("route", "register"),
          topics: int = len(TOPICS), *, client: str = "python", java: bool = False,
          null: bool = False, stable_max_s: float | None = None) -> dict[str, Any]:
    """Every server (``loops``, then Java, then the null server) through every cell.

    All servers run at once and take each cell in turn (kind, then connections, then
    server), so that other load on the machine falls on all of them alike; an idle server
    costs the others next to nothing."""
    report: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                                          "load_avg_at_start": os.getloadavg()},
                              "seconds": seconds, "warmup": warmup, "topics": topics,
                              "client": client, "rows": [], "idle": [], "warm": []}
    labels = [*loops, *(["java"] if java else []), *(["null"] if null else [])]
    with tempfile.TemporaryDirectory() as folder:
        servers: dict[str, Any] = {}
        anchors = []
        try:
            for label in labels:
                servers[label] = _start(label, src, Path(folder))
                anchors.append(_Anchor(servers[label].port))
                report["idle"].append({"loop": label, "phase": "start",
                                       "rss_kib": _rss_kib(servers[label].pid)})
            for kind in kinds:
                if stable_max_s is not None and "java" in servers:  # the JIT's warm-up
                    warm = {"loop": "java", **_warm(servers["java"].port, kind, client, topics,
                                                    stable_max_s)}
                    report["warm"].append(warm)
                    print(json.dumps(warm), flush=True)
                for connections in connection_counts:
                    for label, server in servers.items():
                        row = _cell(server, kind, connections, seconds, warmup, topics, client)
                        row["loop"] = label
                        report["rows"].append(row)
                        print(json.dumps(row), flush=True)
            for label, server in servers.items():
                if label != "null":
                    before, idle = _rss_with_idle(server, 1_000)
                    report["idle"].append({"loop": label, "phase": "after run, then 1000 idle",
                                           "rss_kib_before": before, "rss_kib_idle_1000": idle})
                    print(json.dumps(report["idle"][-1]), flush=True)
        finally:
            for anchor in anchors:
                anchor.close()
            for server in servers.values():
                server.stop()
    return report


class _Anchor:
    """The hot topic's group, registered on a connection kept open (closing it would remove
    it) and registered again every 20 s, as a broker does: both servers close a connection
    that sent nothing for 120 s (serverChannelMaxIdleTimeSeconds), which would take the
    group, and the route, with it."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.frame = encode(_register_command(100_000, 1))
        self.stop = threading.Event()
        self._register()
        self.thread = threading.Thread(target=self._keep, daemon=True)
        self.thread.start()

    def _register(self) -> None:
        self.sock.sendall(self.frame)
        decoder = FrameDecoder()
        while not decoder.feed(self.sock.recv(65536)):
            pass

    def _keep(self) -> None:
        while not self.stop.wait(20.0):
            self._register()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.sock.close()


def _cell(server: Any, kind: str, connections: int, seconds: float, warmup: float,
          topics: int, client: str) -> dict[str, Any]:
    load0 = os.getloadavg()[0]
    user0, sys0 = _cpu_split_s(server.pid)
    row = _run_load(server.port, kind, connections, seconds, warmup, topics, client)
    user1, sys1 = _cpu_split_s(server.pid)
    requests = max(1, row["requests"])
    row.update(kind=kind, connections=connections, topics=topics, client=client,
               server_cpu_us_per_req=1e6 * (user1 - user0 + sys1 - sys0) / requests,
               server_user_us_per_req=1e6 * (user1 - user0) / requests,
               server_sys_us_per_req=1e6 * (sys1 - sys0) / requests,
               server_rss_kib=_rss_kib(server.pid),
               load_avg=[round(load0, 2), round(os.getloadavg()[0], 2)])
    return row


def _medians(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cells: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for rep in reports:
        for row in rep["rows"]:
            cells.setdefault((row["loop"], row["kind"], row["connections"]), []).append(row)
    out = []
    for (loop, kind, connections), rows in cells.items():
        med = {k: statistics.median(r[k] for r in rows)
               for k in ("req_per_s", "p50_ms", "p99_ms", "server_cpu_us_per_req",
                         "server_user_us_per_req", "server_sys_us_per_req") if k in rows[0]}
        med["load_avg"] = [min(r["load_avg"][0] for r in rows),
                           max(r["load_avg"][1] for r in rows)]
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
    worker.add_argument("--kind", choices=["route", "register", "heartbeat"], required=True)
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
                        help="request kinds to load: route, register, heartbeat "
                             "(comma-separated)")
    parser.add_argument("--java", action="store_true",
                        help="also load Apache RocketMQ's own name server (tests/java/)")
    parser.add_argument("--null", action="store_true",
                        help="also load a server that does no work (the clients' ceiling)")
    parser.add_argument("--client", choices=["python", "c"], default="python",
                        help="load generator: the Python workers or the C client (gcc)")
    parser.add_argument("--stable", action="store_true",
                        help="warm every server per kind until 5 windows of 2 s agree "
                             "within 5 %%")
    parser.add_argument("--stable-max", type=float, default=90.0,
                        help="longest warm-up per server and kind, s")
    parser.add_argument("--topics", type=int, default=len(TOPICS),
                        help="topics in each registration body (10: ~2 KB; 1000: ~150 KB)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run everything this many times (report the median per cell)")
    args = parser.parse_args(argv)
    # SIGTERM stops the run through the finally blocks: no server is left behind
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
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
    loops = [loop for loop in args.loops.split(",") if loop]
    reports = [bench(loops, args.seconds, args.warmup,
                     [int(c) for c in args.connections.split(",")], args.server_src,
                     tuple(args.kinds.split(",")), args.topics, client=args.client,
                     java=args.java, null=args.null,
                     stable_max_s=args.stable_max if args.stable else None)
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
