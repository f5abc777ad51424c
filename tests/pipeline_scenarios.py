"""Operation sequences turned into journals, for the pipeline's differential tests (test data:
imported by the tests only, ``from pipeline_scenarios import play``).

`play` applies simple operation tuples to a few name servers, each a `RouteInfoManager`
behind a `JournalRecorder` on one shared `ManualClock`, and returns the journals as lines.
The pools are deliberately small and shared (an address may serve two groups, a channel
several brokers, a ``register_topic`` several groups) so the partition planner's coupling
rules are exercised. `operations` is the hypothesis strategy that draws such sequences
(hypothesis is imported only there); `damage` adds the kinds of bad lines real journals
have. Times are ms.
"""

from __future__ import annotations

import gzip
import io
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from routing import (
    DataVersion,
    InvalidRequest,
    ManualClock,
    Perm,
    QueueData,
    Registration,
    RouteInfoManager,
    RoutingConfig,
    TopicConfig,
    TopicQueueMappingInfo,
    UnregisterRequest,
)
from routing.journal import JournalRecorder

__all__ = ["ADDRS", "CHANNELS", "GROUPS", "TOPICS", "Op", "damage", "operations", "play"]

GROUPS = ("broker-a", "broker-b", "broker-c", "broker-d")
ADDRS = ("10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911", "10.0.0.4:10911",
         "10.0.0.5:10911", "10.0.0.6:10911")
CHANNELS: tuple[str | None, ...] = (None, "conn-1", "conn-2", "conn-3")
TOPICS = ("T0", "T1", "T2", "T3", "T4")
CLUSTERS = ("C1", "C2")
TIMEOUTS = (None, 1_000, 30_000)
CONFIGS = (RoutingConfig(), RoutingConfig(delete_topic_with_broker_registration=True),
           RoutingConfig(support_acting_master=True, default_heartbeat_timeout_ms=20_000))

#: An operation: a tuple whose first item names it (see `play`).
Op = tuple[Any, ...]


def _registration(args: Sequence[Any]) -> Registration:
    (cluster, group, broker_id, addr, topics, channel, timeout, acting, mapping,
     queues, writable) = args
    # The same table gives the same data version (an unchanged re-registration).
    version = 1 + 7 * sum(1 << t for t in topics) + 3 * queues + int(writable)
    configs = {TOPICS[t]: TopicConfig(
        topic_name=TOPICS[t], read_queue_nums=queues, write_queue_nums=queues,
        perm=Perm.READ | (Perm.WRITE if writable else 0)) for t in topics}
    mappings = ({TOPICS[topics[0]]: TopicQueueMappingInfo(topic=TOPICS[topics[0]],
                                                          bname=GROUPS[group], total_queues=2)}
                if mapping and topics else {})
    return Registration(
        cluster=CLUSTERS[cluster], broker_name=GROUPS[group], broker_id=broker_id,
        broker_addr=ADDRS[addr], heartbeat_timeout_ms=TIMEOUTS[timeout],
        enable_acting_master=acting, data_version=DataVersion(timestamp=version, counter=version),
        topics=configs, topic_queue_mappings=mappings, channel=CHANNELS[channel])


def play(ops: Sequence[Op], *, nameservers: int = 2, config: int = 0,
         prefix: str = "ns") -> dict[str, list[str]]:
    """Apply ``ops`` and return ``{"<prefix>-<i>.jsonl": lines}``. Operations:

    ``("advance", ms)`` (then every server scans, as hosts do periodically);
    ``("register", targets, cluster, group, id, addr, topics, channel,
    timeout, acting, mapping, queues, writable)`` (indexes into the pools, ``targets`` a
    bit mask of name servers); ``("heartbeat", targets, cluster, addr)``; ``("query",
    targets, cluster, addr, version)``; ``("unregister", targets, cluster, group, id, addr,
    generation)``; ``("unregister_many", targets, [(cluster, group, id, addr), ...])``;
    ``("scan", targets)``; ``("close", targets, channel)``; ``("delete", targets, topic,
    cluster or None)``; ``("register_topic", targets, topic, groups, queues)``; ``("wipe",
    targets, group)``; ``("add_perm", targets, group)``; ``("restart", ns)``.
    Calls the manager refuses (`InvalidRequest`) are not written, as in a live journal.
    """
    clock = ManualClock(start_ms=1_000)
    sinks = [io.StringIO() for _ in range(nameservers)]
    cfg = CONFIGS[config % len(CONFIGS)]
    names = [f"{prefix}-{i}" for i in range(nameservers)]
    servers = [JournalRecorder(RouteInfoManager(clock=clock, config=cfg), sinks[i],
                               nameserver_id=names[i]) for i in range(nameservers)]
    for op in ops:
        kind = op[0]
        if kind == "advance":  # time passes; the hosts' periodic scan runs on every server
            clock.advance(op[1])
            for server in servers:
                server.scan_expired()
            continue
        if kind == "restart":
            i = op[1] % nameservers
            servers[i].restart(RouteInfoManager(clock=clock, config=cfg))
            continue
        targets = [s for i, s in enumerate(servers) if op[1] >> i & 1] or servers[:1]
        for server in targets:
            try:
                if kind == "register":
                    server.register(_registration(op[2:]))
                elif kind == "heartbeat":
                    server.heartbeat(cluster=CLUSTERS[op[2]], broker_addr=ADDRS[op[3]])
                elif kind == "query":
                    server.query_data_version(cluster=CLUSTERS[op[2]], broker_addr=ADDRS[op[3]],
                                              data_version=DataVersion(timestamp=op[4],
                                                                       counter=op[4]))
                elif kind == "unregister":
                    server.unregister(cluster=CLUSTERS[op[2]], broker_name=GROUPS[op[3]],
                                      broker_id=op[4], broker_addr=ADDRS[op[5]],
                                      generation=op[6])
                elif kind == "unregister_many":
                    server.unregister_many([UnregisterRequest(
                        cluster=CLUSTERS[c], broker_name=GROUPS[g], broker_id=b,
                        broker_addr=ADDRS[a]) for c, g, b, a in op[2]])
                elif kind == "scan":
                    server.scan_expired()
                elif kind == "close":
                    server.on_channel_closed(CHANNELS[op[2]])
                elif kind == "delete":
                    server.delete_topic(TOPICS[op[2]],
                                        None if op[3] is None else CLUSTERS[op[3]])
                elif kind == "register_topic":
                    server.register_topic(TOPICS[op[2]], [QueueData(
                        broker_name=GROUPS[g], read_queue_nums=op[4], write_queue_nums=op[4],
                        perm=Perm.READ | Perm.WRITE) for g in op[3]])
                elif kind == "wipe":
                    server.wipe_write_perm(GROUPS[op[2]])
                elif kind == "add_perm":
                    server.add_write_perm(GROUPS[op[2]])
                else:
                    raise ValueError(f"unknown operation {op!r}")
            except InvalidRequest:
                pass  # refused, so not written (the recorder writes completed calls only)
    return {f"{names[i]}.jsonl": sinks[i].getvalue().splitlines() for i in range(nameservers)}


def operations(*, min_size: int = 10, max_size: int = 60) -> Any:
    """A hypothesis strategy of operation lists for `play` (imports hypothesis)."""
    from hypothesis import strategies as st

    mask = st.integers(1, 3)
    cluster = st.sampled_from((0, 0, 0, 1))
    group = st.integers(0, len(GROUPS) - 1)
    addr = st.integers(0, len(ADDRS) - 1)
    bid = st.sampled_from((0, 0, 1, 2))
    register = st.tuples(
        st.just("register"), mask, cluster, group, bid, addr,
        st.lists(st.integers(0, len(TOPICS) - 1), min_size=0, max_size=4, unique=True),
        st.integers(0, len(CHANNELS) - 1), st.integers(0, len(TIMEOUTS) - 1),
        st.sampled_from((None, True, False)), st.sampled_from((False,) * 9 + (True,)),
        st.sampled_from((0, 1, 4)), st.booleans())
    op = st.one_of(
        register, register, register,
        st.tuples(st.just("advance"), st.sampled_from((1, 500, 5_000, 25_000, 130_000))),
        st.tuples(st.just("advance"), st.integers(0, 200_000)),
        st.tuples(st.just("heartbeat"), mask, cluster, addr),
        st.tuples(st.just("query"), mask, cluster, addr, st.integers(0, 5)),
        st.tuples(st.just("unregister"), mask, cluster, group, bid, addr,
                  st.sampled_from((None, None, 1, 2, 3))),
        st.tuples(st.just("unregister_many"), mask, st.lists(
            st.tuples(cluster, group, bid, addr), min_size=1, max_size=3)),
        st.tuples(st.just("scan"), mask), st.tuples(st.just("scan"), mask),
        st.tuples(st.just("close"), mask, st.integers(1, len(CHANNELS) - 1)),
        st.tuples(st.just("delete"), mask, st.integers(0, len(TOPICS) - 1),
                  st.sampled_from((None, 0, 1))),
        st.tuples(st.just("register_topic"), mask, st.integers(0, len(TOPICS) - 1),
                  st.lists(group, min_size=1, max_size=3, unique=True), st.sampled_from((0, 2))),
        st.tuples(st.just("wipe"), mask, group),
        st.tuples(st.just("add_perm"), mask, group),
        st.tuples(st.just("restart"), st.integers(0, 2)),
    )
    return st.lists(op, min_size=min_size, max_size=max_size)


def damage(journals: dict[str, list[str]], seed: int) -> dict[str, list[str]]:
    """Copies of ``journals`` with bad lines mixed in (deterministic for ``seed``): blank and
    malformed lines, duplicates (a repeated sequence number), unknown operations and fields,
    a record of a name server without a header, a reference to an undefined table, and, at
    the end, a call the manager refuses (a topic on an unknown group: a *replay*
    rejection). The original lines keep their order."""
    rng = random.Random(seed)
    out: dict[str, list[str]] = {}
    for name, lines in journals.items():
        damaged = list(lines)
        if not damaged:
            out[name] = damaged
            continue
        header = json.loads(damaged[0])
        ns = header["nameserver"]
        last = json.loads(damaged[-1])
        seq, ts = last.get("seq", 0), last.get("ts", header["start_ms"])
        bad = [
            "", "not json", "[1, 2, 3]", '{"ns": 5, "seq": 1}',
            json.dumps({"ns": ns, "seq": 10**9, "ts": ts, "op": "fly", "cluster": None,
                        "broker_name": None, "broker_addr": None, "args": {}}),
            json.dumps({"ns": "ghost", "seq": 1, "ts": 0, "op": "scan", "cluster": None,
                        "broker_name": None, "broker_addr": None, "args": {}}),
            json.dumps({"ns": ns, "seq": 10**9 + 1, "ts": ts, "op": "register",
                        "cluster": "C1", "broker_name": "broker-a",
                        "broker_addr": "10.0.0.1:10911", "args": {"table_id": 99_999}}),
            json.dumps({"ns": ns, "seq": 1, "ts": 0, "op": "scan", "extra": 1}),
        ]
        if len(damaged) > 2:
            bad.append(damaged[rng.randrange(1, len(damaged))])  # a duplicate
        for text in bad:
            damaged.insert(rng.randrange(1, len(damaged) + 1), text)
        damaged.append(json.dumps({
            "ns": ns, "seq": seq + 1, "ts": ts, "op": "register_topic", "cluster": None,
            "broker_name": "nobody", "broker_addr": None,
            "args": {"topic": "T9", "queue_datas": [{
                "brokerName": "nobody", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
                "topicSysFlag": 0}]}}))
        out[name] = damaged
    return out


def bad_folder(root: Path) -> Path:
    """A folder ``root/journals`` with every kind of bad input of issue 12 beside two good
    journals (``s1-0.jsonl``, ``s1-1.jsonl``): ``summary.json``, ``timeline.png`` and
    ``NOTES.txt`` (not journals), ``empty.jsonl``, ``utf8.jsonl`` (name server ``u-0``, a
    byte that is not UTF-8 on line 2) and ``cut.jsonl.gz`` (``z-0``, cut short)."""
    folder = root / "journals"
    folder.mkdir()
    journals = play([("register", 3, 0, 0, 0, 0, [0, 1], 0, 0, None, False, 4, True),
                     ("advance", 40_000), ("heartbeat", 3, 0, 0), ("advance", 200_000)],
                    nameservers=2, prefix="s1")
    for name, lines in journals.items():
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "summary.json").write_text('{"not": "a journal"}\n')
    (folder / "timeline.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    (folder / "NOTES.txt").write_text("hello\n")
    (folder / "empty.jsonl").write_bytes(b"")
    # a journal with a byte that is not UTF-8 inside a string value (it would parse)
    one = journals["s1-0.jsonl"]
    bad = [line.replace('"s1-0"', '"u-0"') for line in one]
    raw = [b.encode() for b in bad]
    raw[1] = raw[1].replace(b"broker-a", b"broker\xff-a", 1)
    (folder / "utf8.jsonl").write_bytes(b"\n".join(raw) + b"\n")
    # a gzip journal cut short: the readable lines stay
    long = play([("register", 1, 0, 0, 0, 0, [0, 1], 0, 0, None, False, 4, True)]
                + [("heartbeat", 1, 0, 0), ("advance", 1_000)] * 300, nameservers=1,
                prefix="z")["z-0.jsonl"]
    zipped = gzip.compress(("\n".join(long) + "\n").encode())
    (folder / "cut.jsonl.gz").write_bytes(zipped[:len(zipped) * 2 // 3])
    return folder
