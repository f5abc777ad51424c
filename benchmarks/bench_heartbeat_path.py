"""CPU per BROKER_HEARTBEAT (or GET_ROUTEINFO_BY_TOPIC) through ``routing serve``'s read
path, in process.

Everything the server does for one request between the kernel's ``recv`` and its
``send``: the connection's ``buffer_updated`` (`nameserver/_connection.py`) on a frame
already in the host's receive buffer, the frame decoder, the host's admission, the
processor, the manager's liveness update (a heartbeat) or route lookup (a route read), the
answer's encoding and the transport's ``write`` (a fake transport that keeps the last
frame). A `NameServerHost` is built as ``routing serve`` builds it (`RouteInfoManager` on
the system clock, ``renew_unchanged``), ``CONNECTIONS`` connections each register their
broker once (with ``benchmarks/load_serve.py``'s ten topics of 8 queues), then send in
turn, each with its own opaque, the frame a broker sends (``--request heartbeat``) or a
client polling one hot topic's route (``--request route``), as ``load_serve.py``'s load.

    python -m benchmarks.bench_heartbeat_path [--seconds 2] [--repeat 3]
        [--before SRC] [--dialect json|rocketmq|both] [--request heartbeat|route|both]

With ``--before SRC`` (e.g. ``git archive <commit> src | tar x -C /tmp/before``) each
round times ``SRC``'s sources and this tree's in alternate child processes and prints
the ratio before/after per round and of the medians. Reports µs of process CPU
(``time.process_time``) per request and requests/s on one core. Not part of
``python -m benchmarks``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CONNECTIONS = 64
_SRC = Path(__file__).resolve().parent.parent / "src"


class _Transport:
    """The host's view of a socket: ``write`` keeps the last frame."""

    def __init__(self) -> None:
        self.last = b""
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.last = data
        self.writes += 1

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40_000) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


async def _measure(seconds: float, dialect: str, request: str) -> dict[str, Any]:
    import routing as r
    from routing.remoting import (
        CURRENT_VERSION,
        NameServerHost,
        NameServerProcessor,
        RegisterBrokerBody,
        RemotingCommand,
        RequestCode,
        SerializeType,
        body_crc32,
        decode,
        encode,
    )

    manager = r.RouteInfoManager(clock=r.SystemClock())
    processor = NameServerProcessor(manager, renew_unchanged=True)
    host = NameServerHost(processor, port=0, scan_interval_ms=None)
    kind = SerializeType.ROCKETMQ if dialect == "rocketmq" else SerializeType.JSON
    conns, frames = [], []
    topics = {f"Topic{i}": r.TopicConfig(topic_name=f"Topic{i}", read_queue_nums=8,
                                         write_queue_nums=8) for i in range(10)}
    body = RegisterBrokerBody(data_version=r.DataVersion(counter=1, timestamp=1),
                              topics=topics).encode()
    for n in range(CONNECTIONS):
        conn = host._connection()
        conn.connection_made(_Transport())  # type: ignore[arg-type]
        ext = {"brokerName": f"broker-{n}", "brokerAddr": f"10.0.{n}.1:10911",
               "clusterName": "bench", "brokerId": "0"}
        register = encode(RemotingCommand(
            code=RequestCode.REGISTER_BROKER, opaque=1, version=CURRENT_VERSION, body=body,
            ext_fields={**ext, "haServerAddr": ext["brokerAddr"],
                        "bodyCrc32": str(body_crc32(body))}, serialize_type=kind))
        _feed(host, conn, register)
        assert decode(conn.transport.last).code == 0, "registration refused"
        # 16 frames per connection, each its own opaque (of as many digits: a broker counts
        # up, one digit more every tenfold), as a broker numbers its requests
        code, fields = ((RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Topic0"})
                        if request == "route" else (RequestCode.BROKER_HEARTBEAT, ext))
        frames.append([encode(RemotingCommand(
            code=code, opaque=100_000 + o, version=CURRENT_VERSION,
            ext_fields=fields, serialize_type=kind)) for o in range(2, 18)])
        conns.append(conn)
    receive = host._receive
    assert receive is not None
    work = [(conn, frame, len(frame)) for i in range(16)
            for conn, fs in zip(conns, frames, strict=True) for frame in (fs[i],)]
    for conn, frame, size in work:  # warm: every header seen once
        receive[:size] = frame
        conn.buffer_updated(size)
    answer = decode(conns[0].transport.last)
    assert answer.code == 0 and answer.opaque == 100_017, answer
    gc.collect()
    gc.freeze()
    calls = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        for conn, frame, size in work:
            receive[:size] = frame
            conn.buffer_updated(size)
        calls += len(work)
    cpu = time.process_time() - cpu0
    gc.unfreeze()
    assert sum(c.transport.writes for c in conns) == calls + len(work) + CONNECTIONS
    return {"dialect": dialect, "request": request, "calls": calls, "cpu_s": cpu,
            "us_per_request": 1e6 * cpu / calls, "requests_per_cpu_s": calls / cpu}


def _feed(host: Any, conn: Any, frame: bytes) -> None:
    host._receive[:len(frame)] = frame
    conn.buffer_updated(len(frame))


def _child(args: argparse.Namespace) -> int:
    try:
        import uvloop
        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    print(json.dumps(runner(_measure(args.seconds, args.dialect, args.request))))
    return 0


def _run(src: Path, seconds: float, dialect: str, request: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{_SRC.parent}"}
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_heartbeat_path", "--child",
                          "--seconds", str(seconds), "--dialect", dialect,
                          "--request", request],
                         env=env, check=True, capture_output=True, text=True,
                         cwd=_SRC.parent).stdout
    return dict(json.loads(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_heartbeat_path",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another tree's src, timed alternately")
    parser.add_argument("--dialect", choices=["json", "rocketmq", "both"], default="both")
    parser.add_argument("--request", choices=["heartbeat", "route", "both"],
                        default="heartbeat")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args)
    dialects = ["json", "rocketmq"] if args.dialect == "both" else [args.dialect]
    requests = ["heartbeat", "route"] if args.request == "both" else [args.request]
    trees = [("before", args.before.resolve())] if args.before else []
    trees.append(("after" if args.before else "this", _SRC))
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    for request, dialect in ((q, d) for q in requests for d in dialects):
        got: dict[str, list[float]] = {name: [] for name, _ in trees}
        for round_ in range(args.repeat):
            line = []
            for name, src in trees:
                row = _run(src, args.seconds, dialect, request)
                got[name].append(row["us_per_request"])
                line.append(f"{name} {row['us_per_request']:.2f} µs "
                            f"({row['requests_per_cpu_s']:,.0f}/s)")
            if args.before:
                line.append(f"ratio {got['after'][-1] / got['before'][-1]:.2f}")
            print(f"{request} {dialect} round {round_ + 1}: " + ", ".join(line), flush=True)
        med = {name: statistics.median(values) for name, values in got.items()}
        text = ", ".join(f"{name} {value:.2f} µs ({1e6 / value:,.0f}/s)"
                         for name, value in med.items())
        if args.before:
            text += f", after/before {med['after'] / med['before']:.2f}"
        print(f"{request} {dialect} median: {text}  "
              f"(load average {os.getloadavg()[0]:.2f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
