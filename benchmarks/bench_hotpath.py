"""Issue 13's hot paths: what a real broker's periodic traffic costs, routing beside the port.

Every line of the issue's table, measured in one process with `benchmarks._harness`
(medians, best of three rounds; the naive port through the same closures where it has the
operation):

* ``register`` with an unchanged DataVersion, the table an *equal copy decoded from the
  wire* (two `RegisterBrokerBody.decode` results of the same bytes, alternately: distinct
  table objects and distinct name strings), and the *same object*;
* ``NameServerProcessor`` REGISTER_BROKER (frame decode + process + response encode) with
  the body bytes of the previous request (fresh ``bytes`` objects, as a socket hands over)
  and with a changed DataVersion;
* the same re-registration over TCP: ``NameServerHost`` on a thread, one blocking client
  connection, request/response in lock step; and sent to ``routing serve`` in its own
  process on one connection, in lock step and with 4 requests in flight, beside a floor
  measured the same way: a Python server that does no work (reads each frame, answers
  with as many bytes as routing's reply);
* ``heartbeat``, ``query_data_version`` and an idle ``scan_expired`` from 100 to 100 000
  live brokers;
* memory per live broker and per (topic, group) row (tracemalloc, `bench_core`).

``python -m benchmarks.bench_hotpath [--quick] [--json]`` prints the rows;
``python -m benchmarks.bench_hotpath --compare OLD_SRC [--after NEW_SRC] [--repeat N]
[--memory]`` measures the ``src`` tree ``OLD_SRC`` (for example ``git archive`` of an older
commit) and this one (or ``NEW_SRC``) alternately in fresh processes, N times each, and
prints the median of each line for both: a before/after table from one run on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, str(ROOT))

import attrs  # noqa: E402

import routing as r  # noqa: E402
from benchmarks import _harness as h  # noqa: E402
from benchmarks import bench_core as core  # noqa: E402
from benchmarks.bench_remoting import _pipeline, _register_frame, _topics  # noqa: E402

try:  # the table type that skips re-checking (issue 13); a plain copy before it
    from routing._messages import TopicTable  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - an older tree in --compare
    from routing import FrozenMap as TopicTable  # type: ignore[assignment]
from routing.remoting import NameServerHost, NameServerProcessor, RegisterBrokerBody  # noqa: E402

__all__ = ["run"]

SUITE = "hotpath"
_INT32 = struct.Struct(">i")


def _row(op: str, size: int, unit: str, rt: h.Timing, jt: h.Timing | None = None,
         note: str = "") -> h.Row:
    return h.row_from_timings(SUITE, op, size, unit, rt, jt, note)


def register_rows(sizes: tuple[int, ...], budget: float) -> list[h.Row]:
    """``register`` unchanged: a decoded equal copy, and the same object, vs topics."""
    rows: list[h.Row] = []
    for k in sizes:
        rows += _register_at(k, budget)
        gc.collect()
    return rows


def _register_at(k: int, budget: float) -> list[h.Row]:
    _clock, mgr, jm = core.new_pair()
    base = core.registration("C", "reg", core.addr_of(7), [f"reg-{i}" for i in range(k)])
    core.register_both(mgr, jm, base)
    data = RegisterBrokerBody(data_version=base.data_version, topics=base.topics).encode()
    decoded = RegisterBrokerBody.decode(bytes(bytearray(data))).topics
    assert decoded == base.topics and decoded is not base.topics
    held: list[r.Registration] = []

    def fresh_copy() -> None:
        """Untimed: a new table object equal to the applied one, the previous one gone (as
        in a host that decodes each request and drops it after the call)."""
        held.clear()
        held.append(attrs.evolve(base, topics=TopicTable(decoded)))

    def r_copy() -> object:  # the copy is freed by the next setup, outside the timing
        return mgr.register(held[0])

    j_alt = itertools.cycle([core.to_java_wrapper(base) for _ in range(2)]).__next__
    rows = []
    with h.frozen_heap():
        rt = h.time_with_setup(fresh_copy, r_copy, budget_s=budget, min_samples=20)
        jt = h.time_op(lambda: core.java_register(jm, base, j_alt()), budget_s=budget)
        rows.append(_row("register unchanged (decoded equal copy)", k, "topics of the broker",
                         rt, jt, "the previous table dropped before each call"))
        rt = h.time_op(lambda: mgr.register(base), budget_s=budget)
        rows.append(_row("register unchanged (same object)", k, "topics of the broker", rt, jt))
    core.assert_same_state(mgr, jm, expect_topics=k)
    return rows


def _processor(manager: r.RouteInfoManager, **kwargs: Any) -> NameServerProcessor:
    """A processor as ``routing serve`` configures it (renewal on), on older trees the
    default one."""
    try:
        return NameServerProcessor(manager, renew_unchanged=True, **kwargs)
    except TypeError:  # pragma: no cover - a tree before the renewal path (--compare)
        return NameServerProcessor(manager, **kwargs)


def processor_rows(sizes: tuple[int, ...], budget: float) -> list[h.Row]:
    """REGISTER_BROKER through frame decode, processor and response encode."""
    rows: list[h.Row] = []
    for k in sizes:
        topics = _topics(k, "R")
        proc = _processor(r.RouteInfoManager())
        # the same request but for its number (opaque), each frame a new bytes object
        frames = [_register_frame("broker-r", "10.9.0.1:10911", topics, 1, opaque=i)
                  for i in range(1, 101)]
        step = _pipeline(proc, frames, "broker")
        with h.frozen_heap():
            rows.append(_row("processor REGISTER_BROKER, unchanged body", k, "topics",
                             h.time_op(step, budget_s=budget),
                             note="the previous request's body, a new opaque and bytes "
                                  "object; configured as routing serve"))
        if k >= 1_000:
            fresh = _processor(proc.manager)
            frames = [_register_frame("broker-r", "10.9.0.1:10911", topics, c)
                      for c in range(2, 400)]
            step = _pipeline(fresh, frames, "broker")
            with h.frozen_heap():
                rows.append(_row("processor REGISTER_BROKER, changed version", k, "topics",
                                 h.time_op(step, budget_s=budget, max_samples=len(frames) - 3),
                                 note="same topics, a new DataVersion each request"))
        gc.collect()
    return rows


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    parts = []
    while size:
        chunk = sock.recv(size)
        if not chunk:
            raise ConnectionError("closed")
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def tcp_row(k: int, seconds: float) -> h.Row:
    """The unchanged re-registration over TCP, one connection, one request in flight."""
    proc = _processor(r.RouteInfoManager())
    loop = asyncio.new_event_loop()
    host = NameServerHost(proc, port=0)
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(host.start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)
    table = _topics(k, "R")
    frames = itertools.cycle([_register_frame("broker-r", "10.9.0.1:10911", table, 1,
                                              opaque=i) for i in range(1, 101)]).__next__
    frame = frames()
    samples: list[float] = []
    with socket.create_connection(host.address) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def once() -> None:
            sock.sendall(frames())
            (length,) = _INT32.unpack(_recv_exactly(sock, 4))
            _recv_exactly(sock, length)

        for _ in range(20):
            once()
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline or len(samples) < 5:
            t0 = time.perf_counter_ns()
            for _ in range(50):
                once()
            samples.append((time.perf_counter_ns() - t0) / 50)
    asyncio.run_coroutine_threadsafe(host.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    median = statistics.median(samples)
    return {"suite": SUITE, "operation": "TCP REGISTER_BROKER, unchanged body, 1 connection",
            "size": k, "size_unit": "topics", "routing_ops_per_s": 1e9 / median,
            "routing_median_ns": median, "routing_p99_ns": max(samples),
            "routing_calls": 50 * len(samples),
            "note": f"{len(frame):,}-byte frame; client and server in one process"}


# A server that does no work: it reads each length-prefixed frame whole and answers with
# ``reply`` bytes. The floor any Python server on this machine stands on for the same
# frames (the kernel's two copies of each request and the wake-ups), measured in the run.
_FLOOR_SERVER = """
import socket, struct, sys
size = int(sys.argv[1])  # a whole frame: its length prefix, then zeros
reply = struct.pack(">i", size - 4) + bytes(size - 4)
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
print(listener.getsockname()[1], flush=True)
conn, _ = listener.accept()
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
head = bytearray(4)
body = bytearray(1 << 20)
while conn.recv_into(head, 4, socket.MSG_WAITALL) == 4:
    (length,) = struct.unpack(">i", head)
    if len(body) < length:
        body = bytearray(length)
    if conn.recv_into(memoryview(body)[:length], length, socket.MSG_WAITALL) != length:
        break
    conn.sendall(reply)
"""


def _drive(port: int, frames: list[bytes], window: int, seconds: float) -> tuple[float, float]:
    """Send ``frames`` round robin on one connection with at most ``window`` requests in
    flight (1: lock step) for about ``seconds``; (median, max) ns per request over batches
    of 200. One thread: it tops the window up, then blocks on the replies
    (length-prefixed frames, as the remoting protocol's) until one slot is free."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buffer = bytearray()
    in_flight = sent = 0

    def timed_batch(count: int) -> float:
        """Send ``count`` more requests and wait for their replies: ns per request."""
        nonlocal in_flight, sent
        t0 = time.perf_counter_ns()
        limit, done = sent + count, 0
        while done < count:
            while in_flight < window and sent < limit:
                sock.sendall(frames[sent % len(frames)])
                sent += 1
                in_flight += 1
            data = sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the server closed the connection")
            buffer.extend(data)
            while len(buffer) >= 4:
                (length,) = _INT32.unpack_from(buffer)
                if len(buffer) < 4 + length:
                    break
                del buffer[:4 + length]
                in_flight -= 1
                done += 1
        return (time.perf_counter_ns() - t0) / count

    batch, samples = 200, []
    timed_batch(batch)  # warm-up
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(samples) < 5:
        samples.append(timed_batch(batch))
    sock.close()
    return statistics.median(samples), max(samples)


def serve_rows(k: int, seconds: float, windows: tuple[int, ...] = (1, 4)) -> list[h.Row]:
    """The unchanged re-registration sent to ``routing serve`` (its own process, default
    options) on one connection, lock step and with requests in flight, beside the same
    frames sent to a server that does no work (`_FLOOR_SERVER`): the baseline."""
    from benchmarks.load_serve import Server

    table = _topics(k, "R")
    frames = [_register_frame("broker-r", "10.9.0.1:10911", table, 1, opaque=i)
              for i in range(1, 101)]
    # the floor answers with as many bytes as routing's reply (header only)
    probe = NameServerProcessor(r.RouteInfoManager(), renew_unchanged=True)
    reply = len(_pipeline(probe, frames[:1], "broker")())
    rows: list[h.Row] = []
    for window in windows:
        server = Server("default")
        try:
            routing_ns, routing_max = _drive(server.port, frames, window, seconds)
        finally:
            server.stop()
        floor = subprocess.Popen([sys.executable, "-c", _FLOOR_SERVER, str(reply)],
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert floor.stdout is not None
            port = int(floor.stdout.readline())
            floor_ns, floor_max = _drive(port, frames, window, seconds)
        finally:
            floor.kill()
            floor.wait()
        how = "lock step" if window == 1 else f"{window} requests in flight"
        rows.append({
            "suite": SUITE, "size": k, "size_unit": "topics",
            "operation": f"routing serve REGISTER_BROKER, unchanged body, 1 connection, {how}",
            "routing_ops_per_s": 1e9 / routing_ns, "routing_median_ns": routing_ns,
            "routing_p99_ns": routing_max, "baseline_ops_per_s": 1e9 / floor_ns,
            "baseline_median_ns": floor_ns, "baseline_p99_ns": floor_max,
            "ratio": floor_ns / routing_ns,
            "note": f"{len(frames[0]):,}-byte frame; server in its own process; baseline: "
                    "a Python server doing no work (reads each frame, answers "
                    f"{reply} bytes)"})
    return rows


def liveness_rows(sizes: tuple[int, ...], budget: float) -> list[h.Row]:
    """heartbeat, query_data_version, idle scan_expired vs live brokers (round robin)."""
    rows: list[h.Row] = []
    for n in sizes:
        rows += _liveness_at(n, budget)
        gc.collect()
    return rows


def _liveness_at(n: int, budget: float) -> list[h.Row]:
    _clock, mgr, jm, regs = core.build_brokers(n)
    keys = [(x.cluster, x.broker_addr) for x in regs]
    rk, jk = itertools.cycle(keys).__next__, itertools.cycle(keys).__next__
    rv = itertools.cycle([(x.cluster, x.broker_addr, x.data_version) for x in regs]).__next__
    jv = itertools.cycle([(x.cluster, x.broker_addr,
                           core.JDataVersion(0, core.START_MS, x.data_version.counter))
                          for x in regs]).__next__

    def r_hb() -> object:
        c, a = rk()
        return mgr.heartbeat(cluster=c, broker_addr=a)

    def j_hb() -> object:
        c, a = jk()
        return jm.broker_heartbeat(c, a)

    def r_q() -> object:
        c, a, v = rv()
        return mgr.query_data_version(cluster=c, broker_addr=a, data_version=v)

    def j_q() -> object:
        c, a, v = jv()
        return jm.query_data_version(c, a, v)

    rows = []
    with h.frozen_heap():
        for op, rf, jf in (("heartbeat", r_hb, j_hb), ("query_data_version", r_q, j_q),
                           ("scan_expired (none expired)", mgr.scan_expired,
                            jm.scan_not_active_broker)):
            rows.append(_row(op, n, "brokers", h.time_op(rf, budget_s=budget),
                             h.time_op(jf, budget_s=budget)))
    return rows


def run(quick: bool) -> list[h.Row]:
    """Every line of issue 13's table (toy sizes when ``quick``)."""
    budget = 0.05 if quick else 0.6
    rows = register_rows((100, 1_000) if quick else (1_000, 10_000), budget)
    rows += processor_rows((10, 1_000), budget)
    rows += liveness_rows((100, 1_000) if quick else (100, 10_000, 100_000), budget)
    rows.append(tcp_row(100 if quick else 1_000, 0.2 if quick else 2.0))
    rows += serve_rows(100 if quick else 1_000, 0.2 if quick else 2.0)
    return rows


def memory(quick: bool) -> dict[str, Any]:
    """tracemalloc bytes per broker and per row, both sides (`bench_core.measure_memory`),
    plus per row when every topic of a group has its own queue counts (nothing to share)."""
    out = core.measure_memory(core.Settings.of(quick))
    n = 1_000 if quick else 100_000

    def diverse(side: str) -> tuple[object, int]:
        clock = r.ManualClock(start_ms=core.START_MS)
        mgr: Any = (r.RouteInfoManager(clock=clock) if side == "routing"
                    else core.JavaRouteInfoManager(now_ms=clock.now_ms))
        for g in range(n // 1_000):
            reg = r.Registration(
                cluster="CX", broker_name=f"g{g}", broker_id=0, broker_addr=core.addr_of(g),
                enable_acting_master=False, data_version=r.DataVersion(counter=1),
                topics={f"t{g}-{i}": r.TopicConfig(topic_name=f"t{g}-{i}",
                                                   read_queue_nums=1 + i,
                                                   write_queue_nums=1 + i)
                        for i in range(1_000)})
            if side == "routing":
                mgr.register(reg)
            else:
                core.java_register(mgr, reg)
        return (mgr, clock), n

    for side in ("routing", "baseline"):
        size, units = core._retained_bytes(lambda side=side: diverse(side))
        out[side]["bytes_per_row_distinct_configs"] = size / units
    return out


# --------------------------------------------------------------------------- before/after


def _measure_json(quick: bool, with_memory: bool) -> dict[str, Any]:
    rows = run(quick)
    return {"rows": rows, "memory": memory(quick) if with_memory else None,
            "routing_file": r.__file__}


def compare(old_src: Path, repeat: int, quick: bool, with_memory: bool,
            new_src: Path | None = None) -> dict[str, Any]:
    """Run this module against ``old_src`` and ``new_src`` (this tree's ``src`` by default)
    alternately in fresh processes."""
    trees = {"before": old_src.resolve(), "after": (new_src or ROOT / "src").resolve()}
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for i in range(repeat):
        for side in (("before", "after") if i % 2 == 0 else ("after", "before")):
            env = {**os.environ, "PYTHONPATH": f"{trees[side]}{os.pathsep}{ROOT}"}
            args = [sys.executable, "-m", "benchmarks.bench_hotpath", "--json"]
            if quick:
                args.append("--quick")
            if with_memory and i == 0:
                args.append("--memory")
            out = subprocess.run(args, env=env, cwd=ROOT, check=True, capture_output=True,
                                 text=True).stdout
            document = json.loads(out)
            assert document["routing_file"].startswith(str(trees[side])), document
            runs[side].append(document)
    return runs


def _summarise(runs: dict[str, list[dict[str, Any]]]) -> list[str]:
    def medians(side: str, key: str) -> dict[tuple[str, int], float]:
        values: dict[tuple[str, int], list[float]] = {}
        for doc in runs[side]:
            for row in doc["rows"]:
                if row.get(key) is not None:
                    values.setdefault((row["operation"], row["size"]), []).append(row[key])
        return {k: statistics.median(v) for k, v in values.items()}

    before, after = medians("before", "routing_median_ns"), medians("after", "routing_median_ns")
    port = medians("after", "baseline_median_ns")
    lines = ["| operation | size | before | after | naive port | before/after |",
             "|---|---|---|---|---|---|"]
    for key in after:
        b, a = before.get(key), after[key]
        lines.append(f"| {key[0]} | {key[1]:,} | {h.fmt_ns(b) if b else '—'} | "
                     f"{h.fmt_ns(a)} | {h.fmt_ns(port[key]) if key in port else '—'} | "
                     f"{b / a:.1f}× |" if b else f"| {key[0]} | {key[1]:,} | — | "
                     f"{h.fmt_ns(a)} | {h.fmt_ns(port[key]) if key in port else '—'} | — |")
    for side in ("before", "after"):
        mem = runs[side][0].get("memory")
        if mem:
            for who in ("routing", "baseline"):
                lines.append(f"memory {side} ({who}): {mem[who]['bytes_per_broker']:,.0f} B per "
                             f"broker, {mem[who]['bytes_per_row']:,.0f} B per row")
            for who in ("routing", "baseline"):
                distinct = mem[who].get("bytes_per_row_distinct_configs")
                if distinct:
                    lines.append(f"memory {side} ({who}): {distinct:,.0f} B per row when "
                                 "every topic has its own queue counts")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_hotpath")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--memory", action="store_true", help="also measure memory")
    parser.add_argument("--compare", type=Path, default=None,
                        help="an older src/ tree to measure alternately with this one")
    parser.add_argument("--after", type=Path, default=None,
                        help="the src/ tree to compare with (default: this tree's)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.compare is not None:
        runs = compare(args.compare, args.repeat, args.quick, args.memory, args.after)
        print(f"machine: {h.machine_info()}; {args.repeat} runs per side, alternating")
        print("\n".join(_summarise(runs)))
        return 0
    document = _measure_json(args.quick, args.memory)
    if args.json:
        print(json.dumps(document, default=str))
    else:
        h.print_table(document["rows"], "issue 13 hot paths")
        if document["memory"]:
            print(document["memory"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

