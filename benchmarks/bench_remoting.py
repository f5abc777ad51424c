"""Remoting throughput on one core: decode + process + encode, per request.

Each operation feeds pre-encoded request frames to a `FrameDecoder`, hands the command to
`NameServerProcessor.process` and encodes the response, i.e. everything ``routing serve``
does per request except the socket. Run ``python benchmarks/bench_remoting.py [--quick]``
for a printout, or through ``python -m benchmarks`` (this module's `run`).

Rows carry ``name`` and ``ops_per_s`` plus the harness keys (``suite``, ``operation``,
``size``, ``size_unit``, ``routing_ops_per_s``, ``routing_median_ns``, ``routing_p99_ns``,
``routing_calls``, ``note``).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the src layout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import routing as r
from routing.remoting import (
    CURRENT_VERSION,
    FrameDecoder,
    NameServerProcessor,
    RegisterBrokerBody,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    body_crc32,
    encode,
)

__all__ = ["run"]

SUITE = "remoting"


def _measure(step: Callable[[], object], budget_s: float) -> tuple[int, float, float, float]:
    """(calls, ops/s, median ns, p99 ns) over batches lasting >= 2 ms each."""
    step()
    t0 = time.perf_counter_ns()
    step()
    one = max(1, time.perf_counter_ns() - t0)
    inner = max(1, min(5_000, 2_000_000 // one))
    samples: list[float] = []
    calls = total = 0
    deadline = time.perf_counter_ns() + int(budget_s * 1e9)
    gc.collect()
    gc.freeze()
    try:
        while len(samples) < 5 or time.perf_counter_ns() < deadline:
            t0 = time.perf_counter_ns()
            for _ in range(inner):
                step()
            elapsed = time.perf_counter_ns() - t0
            samples.append(elapsed / inner)
            calls += inner
            total += elapsed
    finally:
        gc.unfreeze()
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return calls, calls * 1e9 / total, statistics.median(samples), p99


def _pipeline(proc: NameServerProcessor, frames: list[bytes], channel: object
              ) -> Callable[[], object]:
    """One call = one frame through decoder, processor and encoder (frames cycled)."""
    decoder = FrameDecoder()
    state = {"i": 0}
    count = len(frames)

    def step() -> object:
        i = state["i"]
        state["i"] = i + 1 if i + 1 < count else 0
        [command] = decoder.feed(frames[i])
        out = proc.process(command, channel)
        assert out.response is not None and out.response.code == ResponseCode.SUCCESS
        return encode(out.response)

    return step


def _topics(n: int, prefix: str = "Topic") -> dict[str, r.TopicConfig]:
    return {f"{prefix}{i}": r.TopicConfig(topic_name=f"{prefix}{i}", read_queue_nums=8,
                                          write_queue_nums=8) for i in range(n)}


def _register_frame(name: str, addr: str, topics: dict[str, r.TopicConfig], counter: int,
                    kind: SerializeType = SerializeType.JSON, opaque: int | None = None
                    ) -> bytes:
    """A REGISTER_BROKER frame; ``opaque`` (the request number) defaults to ``counter``."""
    body = RegisterBrokerBody(data_version=r.DataVersion(timestamp=1_700_000_000_000,
                                                         counter=counter),
                              topics=topics).encode()
    return encode(RemotingCommand(
        code=RequestCode.REGISTER_BROKER, version=CURRENT_VERSION,
        opaque=counter if opaque is None else opaque,
        serialize_type=kind, body=body,
        ext_fields={"brokerName": name, "brokerAddr": addr, "clusterName": "DefaultCluster",
                    "haServerAddr": addr, "brokerId": "0", "enableActingMaster": "false",
                    "bodyCrc32": str(body_crc32(body))}))


def _cluster(groups: int, topics_per_group: int) -> NameServerProcessor:
    proc = NameServerProcessor(r.RouteInfoManager())
    hot = _topics(1, "Hot")
    for g in range(groups):
        table = {**hot, **_topics(topics_per_group, f"G{g}-T")}
        proc.manager.register(r.Registration(
            cluster="DefaultCluster", broker_name=f"broker-{g}", broker_id=0,
            broker_addr=f"10.0.{g // 250}.{g % 250}:10911", enable_acting_master=False,
            data_version=r.DataVersion(counter=1), topics=table, channel=f"ch-{g}"))
    return proc


def _route_frames(topics: list[str], version: int, kind: SerializeType) -> list[bytes]:
    return [encode(RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, version=version,
                                   opaque=i, serialize_type=kind, ext_fields={"topic": t}))
            for i, t in enumerate(topics)]


def _row(operation: str, size: int, size_unit: str, result: tuple[int, float, float, float],
         note: str) -> dict[str, Any]:
    calls, ops, median, p99 = result
    return {"name": f"{operation} [{size} {size_unit}]", "ops_per_s": ops, "suite": SUITE,
            "operation": operation, "size": size, "size_unit": size_unit,
            "routing_ops_per_s": ops, "routing_median_ns": median, "routing_p99_ns": p99,
            "routing_calls": calls, "note": note}


def run(quick: bool) -> list[dict[str, Any]]:
    """Measure every operation; ``quick`` uses small sizes and ~0.1 s per operation."""
    budget = 0.1 if quick else 1.0
    rows: list[dict[str, Any]] = []
    groups = 2 if quick else 4
    proc = _cluster(groups, 10 if quick else 250)

    for label, version, kind in (("GET_ROUTEINFO legacy JSON", 0, SerializeType.JSON),
                                 ("GET_ROUTEINFO standard JSON", CURRENT_VERSION,
                                  SerializeType.JSON),
                                 ("GET_ROUTEINFO binary header", CURRENT_VERSION,
                                  SerializeType.ROCKETMQ)):
        step = _pipeline(proc, _route_frames(["Hot0"], version, kind), "client")
        rows.append(_row(label + ", hot topic", groups, "groups", _measure(step, budget),
                         "decode+process+encode; body cached per route snapshot"))
    spread = [f"G{g}-T{i}" for i in range(10) for g in range(groups)]
    step = _pipeline(proc, _route_frames(spread, CURRENT_VERSION, SerializeType.JSON), "client")
    rows.append(_row("GET_ROUTEINFO, topics round-robin", len(spread), "topics",
                     _measure(step, budget), "one group per topic"))

    for size in ((10,) if quick else (10, 100, 1_000)):
        topics = _topics(size, "R")
        reg = NameServerProcessor(r.RouteInfoManager())
        frames = [_register_frame("broker-r", "10.9.0.1:10911", topics, 1)]
        rows.append(_row("REGISTER_BROKER, unchanged version", size, "topics",
                         _measure(_pipeline(reg, frames, "broker"), budget),
                         "the 30 s re-registration: body bytes seen before, tables untouched"))
        fresh = NameServerProcessor(reg.manager, body_cache_entries=0)
        frames = [_register_frame("broker-r", "10.9.0.1:10911", topics, c) for c in range(2, 40)]
        rows.append(_row("REGISTER_BROKER, changed version", size, "topics",
                         _measure(_pipeline(fresh, frames, "broker"), budget),
                         "a new body: JSON parsed (unchanged topics memoised), rows rewritten"))

    heartbeat = [encode(RemotingCommand(
        code=RequestCode.BROKER_HEARTBEAT, version=CURRENT_VERSION,
        ext_fields={"brokerName": "broker-0", "brokerAddr": "10.0.0.0:10911",
                    "clusterName": "DefaultCluster"}))]
    rows.append(_row("BROKER_HEARTBEAT", groups, "groups",
                     _measure(_pipeline(proc, heartbeat, "ch-0"), budget), "liveness refresh"))
    return rows


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    rows = run(quick)
    width = max(len(row["name"]) for row in rows)
    print(f"{'operation':<{width}}  {'ops/s':>12}  {'median':>10}  {'p99':>10}")
    for row in rows:
        print(f"{row['name']:<{width}}  {row['ops_per_s']:>12,.0f}  "
              f"{row['routing_median_ns'] / 1000:>8.2f}µs  {row['routing_p99_ns'] / 1000:>8.2f}µs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
