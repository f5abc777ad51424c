"""The spec §5 operations: `routing.RouteInfoManager` against the naive Java port.

Each measurement builds the same state on both sides through their registration APIs,
checks that both hold the same topics and live brokers, then times the operation with
`benchmarks._harness`. Worlds:

* **brokers world** (size = live brokers): N masters, each its own group, no topics, in
  10 clusters. Used for `scan_expired` with nothing expired, round-robin `heartbeat` and
  `query_data_version` (every call targets the next broker, the worst case for a deadline
  index: the refreshed key is always the oldest).
* **register world** (size = topics of the broker): one master with k topics; the periodic
  full re-registration with an unchanged `DataVersion` (Java's default heartbeat). Timed
  twice: re-sending the *same* `Registration` object, and alternating two equal but
  distinct objects (what a host that decodes every request hands over).
* **topic world** (size = total topics T): a ``victim`` group with 10 exclusive topics
  (cluster ``CV``), a ``perm`` group with 10 topics alone in cluster ``CF``, a ``hot`` topic
  on 4 groups (each with one more exclusive topic), and filler groups of up to 1 000 topics
  in cluster ``CX`` making up the total. Victim, perm and hot stay fixed while T grows.
  Filler brokers never expire (huge timeout); the victim has a 1 ms timeout so one clock
  step expires it alone.
"""

from __future__ import annotations

import cProfile
import functools
import gc
import io
import itertools
import pstats
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import routing as r

from . import _harness as h
from .baseline_java_port import (
    JavaRouteInfoManager,
    JDataVersion,
    JTopicConfig,
    JTopicConfigSerializeWrapper,
)

__all__ = ["CoreReport", "TopicWorld", "java_register", "run", "run_core", "to_java_wrapper"]

SUITE = "core"
FULL_SIZES = (100, 1_000, 10_000, 100_000)
QUICK_SIZES = (100, 1_000)
VICTIM_TOPICS = 10
PERM_TOPICS = 10
HOT_GROUPS = 4
FILLER_TOPICS_PER_GROUP = 1_000
NEVER_MS = 10**12  # a heartbeat timeout no benchmark outlives
START_MS = 1_700_000_000_000


# --------------------------------------------------------------------------- both sides


def to_java_wrapper(reg: r.Registration) -> JTopicConfigSerializeWrapper:
    """The Java-side request body for a `routing.Registration` (new objects, as decoding)."""
    dv = reg.data_version
    table = {
        name: JTopicConfig(tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, int(tc.perm),
                           int(tc.topic_sys_flag), tc.order)
        for name, tc in reg.topics.items()
    }
    return JTopicConfigSerializeWrapper(
        JDataVersion(dv.state_version, dv.timestamp, dv.counter), table,
        dict(reg.topic_queue_mappings))


def java_register(jm: JavaRouteInfoManager, reg: r.Registration,
                  wrapper: JTopicConfigSerializeWrapper | None = None) -> Any:
    """``registerBroker`` on the port with the same header and body as ``reg``."""
    return jm.register_broker(
        reg.cluster, reg.broker_addr, reg.broker_name, reg.broker_id, reg.ha_server_addr,
        reg.zone_name, reg.heartbeat_timeout_ms, reg.enable_acting_master,
        wrapper if wrapper is not None else to_java_wrapper(reg),
        None if reg.filter_servers is None else list(reg.filter_servers), reg.channel)


def registration(cluster: str, name: str, addr: str, topics: list[str], *, broker_id: int = 0,
                 timeout_ms: int | None = None, counter: int = 1) -> r.Registration:
    """A master's registration with 8/8 queues per topic."""
    return r.Registration(
        cluster=cluster, broker_name=name, broker_id=broker_id, broker_addr=addr,
        heartbeat_timeout_ms=timeout_ms, enable_acting_master=False,
        data_version=r.DataVersion(state_version=0, timestamp=START_MS, counter=counter),
        topics={t: r.TopicConfig(topic_name=t, read_queue_nums=8, write_queue_nums=8)
                for t in topics})


def new_pair(start_ms: int = START_MS) -> tuple[r.ManualClock, r.RouteInfoManager,
                                                JavaRouteInfoManager]:
    """A routing manager and a Java port sharing one manual clock."""
    clock = r.ManualClock(start_ms=start_ms)
    return clock, r.RouteInfoManager(clock=clock), JavaRouteInfoManager(now_ms=clock.now_ms)


def register_both(mgr: r.RouteInfoManager, jm: JavaRouteInfoManager, reg: r.Registration) -> None:
    """Register on both sides; both must accept."""
    res = mgr.register(reg)
    assert res.accepted, res.rejection
    assert java_register(jm, reg) is not None
    assert not jm.errors, jm.errors


def assert_same_state(mgr: r.RouteInfoManager, jm: JavaRouteInfoManager,
                      expect_topics: int | None = None) -> None:
    """Same topic names and same live keys on both sides (checked before any timing)."""
    topics = set(mgr.all_topics())
    assert topics == set(jm.get_all_topic_list()), "topic sets differ"
    if expect_topics is not None:
        assert len(topics) == expect_topics, (len(topics), expect_topics)
    live = {(k.cluster, k.addr) for k in mgr.live_brokers()}
    assert live == set(jm.broker_live_table), "live tables differ"


def addr_of(i: int) -> str:
    """A distinct ``host:port`` for broker number ``i``."""
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}:10911"


# --------------------------------------------------------------------------- worlds


def build_brokers(n: int) -> tuple[r.ManualClock, r.RouteInfoManager, JavaRouteInfoManager,
                                   list[r.Registration]]:
    """N masters, each its own group with no topics, in 10 clusters."""
    clock, mgr, jm = new_pair()
    regs = [registration(f"C{i % 10}", f"b{i}", addr_of(i), []) for i in range(n)]
    for reg in regs:
        register_both(mgr, jm, reg)
    assert_same_state(mgr, jm, expect_topics=0)
    assert len(jm.broker_live_table) == n
    return clock, mgr, jm, regs


@dataclass
class TopicWorld:
    """The topic world of the module docstring, built on both sides."""

    total: int
    clock: r.ManualClock
    mgr: r.RouteInfoManager
    jm: JavaRouteInfoManager
    victim: r.Registration
    perm: r.Registration
    hot: list[r.Registration] = field(default_factory=list)
    fillers: list[r.Registration] = field(default_factory=list)

    @classmethod
    def build(cls, total: int) -> TopicWorld:
        """Register every group on both sides and check the totals."""
        fixed = VICTIM_TOPICS + PERM_TOPICS + 1 + HOT_GROUPS
        assert total >= fixed + 2, total
        clock, mgr, jm = new_pair()
        victim = registration("CV", "victim", addr_of(1), [f"victim-{i}" for i in
                                                             range(VICTIM_TOPICS)], timeout_ms=1)
        perm = registration("CF", "perm", addr_of(2), [f"perm-{i}" for i in range(PERM_TOPICS)],
                            timeout_ms=NEVER_MS)
        hot = [registration("CH", f"hot-{g}", addr_of(10 + g), ["hot", f"hot-aux-{g}"],
                            timeout_ms=NEVER_MS) for g in range(HOT_GROUPS)]
        fillers = []
        remaining = total - fixed
        j = 0
        while remaining > 0:
            k = min(FILLER_TOPICS_PER_GROUP, remaining)
            if remaining - k == 1:  # never leave a one-topic registration (Java's guard)
                k -= 1
            fillers.append(registration(
                "CX", f"filler-{j}", addr_of(1000 + j),
                [f"t{j}-{i}" for i in range(k)], timeout_ms=NEVER_MS))
            remaining -= k
            j += 1
        world = cls(total, clock, mgr, jm, victim, perm, hot, fillers)
        for reg in [victim, perm, *hot, *fillers]:
            register_both(mgr, jm, reg)
        assert_same_state(mgr, jm, expect_topics=total)
        return world


# --------------------------------------------------------------------------- measuring


@dataclass
class CoreReport:
    """Everything the core suite measured."""

    rows: list[h.Row] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    concurrency: dict[str, Any] = field(default_factory=dict)
    profiles: dict[str, str] = field(default_factory=dict)
    targets: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Settings:
    """Sizes and time budgets of one run."""

    quick: bool
    sizes: tuple[int, ...]
    budget_s: float
    min_samples: int
    profile_s: float

    @classmethod
    def of(cls, quick: bool) -> Settings:
        if quick:
            return cls(quick, QUICK_SIZES, 0.01, 3, 0.0)
        return cls(quick, FULL_SIZES, 0.8, 5, 0.5)


def _profile(fn: Callable[[], object], seconds: float, setup: Callable[[], object] | None = None
             ) -> str:
    """cProfile ``fn`` for about ``seconds``; the top functions by own time, as text."""
    prof = cProfile.Profile()
    deadline = time.perf_counter() + seconds
    calls = 0
    while time.perf_counter() < deadline or calls < 3:
        if setup is not None:
            setup()
        prof.enable()
        fn()
        prof.disable()
        calls += 1
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(14)
    text = out.getvalue()
    start = text.find("   ncalls")
    return f"{calls} calls profiled\n" + (text[start:] if start >= 0 else text).rstrip()


def _cycle(items: list[Any]) -> Callable[[], Any]:
    return itertools.cycle(items).__next__


def measure_brokers(s: Settings, report: CoreReport) -> None:
    """scan_expired (none expired), heartbeat and query_data_version vs live brokers."""
    for n in s.sizes:
        _brokers_at(n, s, report)
        gc.collect()


def _brokers_at(n: int, s: Settings, report: CoreReport) -> None:
    _clock, mgr, jm, regs = build_brokers(n)
    keys = [(reg.cluster, reg.broker_addr) for reg in regs]
    r_next = _cycle(keys)
    j_next = _cycle(keys)
    r_versions = _cycle([(reg.cluster, reg.broker_addr, reg.data_version) for reg in regs])
    j_versions = _cycle([(reg.cluster, reg.broker_addr,
                          JDataVersion(0, START_MS, reg.data_version.counter))
                         for reg in regs])

    def r_hb() -> Any:
        c, a = r_next()
        return mgr.heartbeat(cluster=c, broker_addr=a)

    def j_hb() -> Any:
        c, a = j_next()
        return jm.broker_heartbeat(c, a)

    def r_qdv() -> Any:
        c, a, v = r_versions()
        return mgr.query_data_version(cluster=c, broker_addr=a, data_version=v)

    def j_qdv() -> Any:
        c, a, v = j_versions()
        return jm.query_data_version(c, a, v)

    assert mgr.scan_expired() == ()
    assert jm.scan_not_active_broker() == []
    assert r_hb() is True
    answer = r_qdv()
    assert answer.changed is False
    assert j_qdv()[0] is False
    with h.frozen_heap():
        for op, rf, jf in (("scan_expired (none expired)", mgr.scan_expired,
                            jm.scan_not_active_broker),
                           ("heartbeat", r_hb, j_hb),
                           ("query_data_version", r_qdv, j_qdv)):
            rt = h.time_op(rf, budget_s=s.budget_s, min_samples=s.min_samples)
            jt = h.time_op(jf, budget_s=s.budget_s, min_samples=s.min_samples)
            report.rows.append(h.row_from_timings(SUITE, op, n, "brokers", rt, jt))
    assert len(mgr.live_brokers()) == n == len(jm.broker_live_table)
    if s.profile_s and n == 10_000:
        report.profiles["scan_expired (none expired) @ 10000 brokers"] = _profile(
            mgr.scan_expired, s.profile_s)
        report.profiles["heartbeat @ 10000 brokers"] = _profile(r_hb, s.profile_s)


def measure_register(s: Settings, report: CoreReport) -> None:
    """Full re-registration with an unchanged DataVersion, vs topics of the broker."""
    for k in s.sizes:
        _register_at(k, s, report)
        gc.collect()


def _register_at(k: int, s: Settings, report: CoreReport) -> None:
    _clock, mgr, jm = new_pair()
    topics = [f"reg-{i}" for i in range(k)]
    reg_a = registration("C", "reg", addr_of(7), topics)
    reg_b = registration("C", "reg", addr_of(7), topics)  # equal, distinct objects
    assert reg_a == reg_b
    assert reg_a.topics is not reg_b.topics
    register_both(mgr, jm, reg_a)
    assert_same_state(mgr, jm, expect_topics=k)
    wrapper_a, wrapper_b = to_java_wrapper(reg_a), to_java_wrapper(reg_b)
    r_alt = _cycle([reg_a, reg_b])
    j_alt = _cycle([wrapper_a, wrapper_b])

    def r_same() -> object:
        return mgr.register(reg_a)

    def j_same() -> object:
        return java_register(jm, reg_a, wrapper_a)

    def r_fresh() -> object:
        return mgr.register(r_alt())

    def j_fresh() -> object:
        return java_register(jm, reg_a, j_alt())

    with h.frozen_heap():
        for op, rf, jf in (("register unchanged (same object)", r_same, j_same),
                           ("register unchanged (equal copy)", r_fresh, j_fresh)):
            rt = h.time_op(rf, budget_s=s.budget_s, min_samples=s.min_samples)
            jt = h.time_op(jf, budget_s=s.budget_s, min_samples=s.min_samples)
            report.rows.append(h.row_from_timings(SUITE, op, k, "topics of the broker",
                                                  rt, jt))
    assert not jm.errors
    assert_same_state(mgr, jm, expect_topics=k)
    if s.profile_s and k == 1_000:
        report.profiles["register unchanged (same object) @ 1000 topics"] = _profile(
            r_same, s.profile_s)
        report.profiles["register unchanged (equal copy) @ 1000 topics"] = _profile(
            r_fresh, s.profile_s)


def measure_topics(s: Settings, report: CoreReport) -> None:
    """Group removal, expiry, hot pickup, topics_by_cluster and write perm vs total topics."""
    for total in s.sizes:
        _topics_at(total, s, report)
        gc.collect()


def _topics_at(total: int, s: Settings, report: CoreReport) -> None:
    w = TopicWorld.build(total)
    mgr, jm, clock, victim = w.mgr, w.jm, w.clock, w.victim
    victim_wrapper = to_java_wrapper(victim)

    def r_setup() -> None:
        assert mgr.register(victim).accepted

    def j_setup() -> None:
        java_register(jm, victim, victim_wrapper)

    def r_unreg() -> None:
        assert mgr.unregister(cluster=victim.cluster, broker_addr=victim.broker_addr,
                              broker_name=victim.broker_name, broker_id=victim.broker_id)

    def j_unreg() -> None:
        jm.unregister_broker(victim.cluster, victim.broker_addr, victim.broker_name,
                             victim.broker_id)

    def r_setup_expire() -> None:
        r_setup()
        clock.advance(2)

    def j_setup_expire() -> None:
        j_setup()
        clock.advance(2)

    def r_expire() -> None:
        assert len(mgr.scan_expired()) == 1

    def j_expire() -> None:
        assert len(jm.scan_not_active_broker()) == 1

    # sanity: both remove exactly the victim's topics
    r_unreg()
    j_unreg()
    assert_same_state(mgr, jm, expect_topics=total - VICTIM_TOPICS)
    r_setup()
    j_setup()
    assert_same_state(mgr, jm, expect_topics=total)
    route = mgr.pickup_route("hot")
    j_route = jm.pickup_topic_route_data("hot")
    assert route is not None
    assert j_route is not None
    assert len(route.queue_datas) == len(j_route.queue_datas) == HOT_GROUPS
    r_tbc = mgr.topics_by_cluster("CF")
    assert sorted(r_tbc) == sorted(jm.get_topics_by_cluster("CF"))
    assert len(r_tbc) == PERM_TOPICS
    assert mgr.wipe_write_perm("perm") == jm.wipe_write_perm_of_broker_by_lock("perm")
    assert mgr.add_write_perm("perm") == jm.add_write_perm_of_broker_by_lock("perm")

    def r_wipe_add() -> None:
        mgr.wipe_write_perm("perm")
        mgr.add_write_perm("perm")

    budget, ms = s.budget_s, s.min_samples
    with h.frozen_heap():
        for op, timings in (
            ("remove group: unregister its only member",
             (h.time_with_setup(r_setup, r_unreg, budget_s=budget, min_samples=ms),
              h.time_with_setup(j_setup, j_unreg, budget_s=budget, min_samples=ms))),
            ("remove group: scan_expired with it expired",
             (h.time_with_setup(r_setup_expire, r_expire, budget_s=budget, min_samples=ms),
              h.time_with_setup(j_setup_expire, j_expire, budget_s=budget,
                                min_samples=ms))),
            ("pickup_route (hot topic, 4 groups)",
             (h.time_op(mgr.pickup_route, ("hot",), budget_s=budget, min_samples=ms),
              h.time_op(jm.pickup_topic_route_data, ("hot",), budget_s=budget,
                        min_samples=ms))),
            ("topics_by_cluster (10 topics)",
             (h.time_op(mgr.topics_by_cluster, ("CF",), budget_s=budget, min_samples=ms),
              h.time_op(jm.get_topics_by_cluster, ("CF",), budget_s=budget,
                        min_samples=ms))),
        ):
            report.rows.append(h.row_from_timings(SUITE, op, total, "topics in total",
                                                  *timings))
        r_setup()  # the removals above leave the victim unregistered
        j_setup()
        assert_same_state(mgr, jm, expect_topics=total)
        # wipe and add alternate so every call changes the 10 rows
        r_w, r_a, j_w, j_a = _alternating(
            (lambda: mgr.wipe_write_perm("perm"), lambda: mgr.add_write_perm("perm")),
            (lambda: jm.wipe_write_perm_of_broker_by_lock("perm"),
             lambda: jm.add_write_perm_of_broker_by_lock("perm")), s)
        report.rows.append(h.row_from_timings(SUITE, "wipe_write_perm (10 topics)", total,
                                              "topics in total", r_w, j_w))
        report.rows.append(h.row_from_timings(SUITE, "add_write_perm (10 topics)", total,
                                              "topics in total", r_a, j_a))
    assert not jm.errors
    assert_same_state(mgr, jm, expect_topics=total)
    if s.profile_s and total == s.sizes[-1]:
        report.profiles[f"remove group: unregister @ {total} topics"] = _profile(
            r_unreg, s.profile_s, setup=r_setup)
        r_setup()  # the profile ends with the victim unregistered on the routing side
        report.profiles[f"pickup_route @ {total} topics"] = _profile(
            lambda: mgr.pickup_route("hot"), s.profile_s)
        report.profiles[f"topics_by_cluster @ {total} topics"] = _profile(
            lambda: mgr.topics_by_cluster("CF"), s.profile_s)
        report.profiles[f"wipe_write_perm + add_write_perm @ {total} topics"] = _profile(
            r_wipe_add, s.profile_s)
    if total == 10_000 or (s.quick and total == s.sizes[-1]):
        report.concurrency = measure_concurrency(w, s)
    if total == s.sizes[-1]:
        measure_group_sizes(w, s, report)


#: Sizes of the removed group in `measure_group_sizes` (the main series uses 10 topics).
GROUP_SIZES = (2, 10, 100, 1_000)


def measure_group_sizes(w: TopicWorld, s: Settings, report: CoreReport) -> None:
    """Removing a group of k topics from the largest topic world: routing's cost grows with
    k, the port's stays one full scan. Shows where the fixed cost sits."""
    for k in GROUP_SIZES if not s.quick else GROUP_SIZES[:2]:
        victim = registration("CK", f"k{k}", addr_of(5_000 + k), [f"k{k}-{i}" for i in range(k)])
        wrapper = to_java_wrapper(victim)

        def r_setup(victim: r.Registration = victim) -> None:
            assert w.mgr.register(victim).accepted

        def j_setup(victim: r.Registration = victim,
                    wrapper: JTopicConfigSerializeWrapper = wrapper) -> None:
            java_register(w.jm, victim, wrapper)

        def r_op(victim: r.Registration = victim) -> None:
            assert w.mgr.unregister(cluster="CK", broker_addr=victim.broker_addr,
                                    broker_name=victim.broker_name, broker_id=0)

        def j_op(victim: r.Registration = victim) -> None:
            w.jm.unregister_broker("CK", victim.broker_addr, victim.broker_name, 0)

        with h.frozen_heap():
            rt = h.time_with_setup(r_setup, r_op, budget_s=s.budget_s, min_samples=s.min_samples)
            jt = h.time_with_setup(j_setup, j_op, budget_s=s.budget_s, min_samples=s.min_samples)
        report.rows.append(h.row_from_timings(
            SUITE, f"remove group of k topics ({w.total:,} other topics)", k,
            "topics of the removed group", rt, jt))
    assert not w.jm.errors
    assert_same_state(w.mgr, w.jm, expect_topics=w.total)


def _alternating(r_ops: tuple[Callable[[], object], Callable[[], object]],
                 j_ops: tuple[Callable[[], object], Callable[[], object]],
                 s: Settings) -> tuple[h.Timing, h.Timing, h.Timing, h.Timing]:
    """Time two operations that undo each other, alternately, one call per sample."""
    out = []
    for first, second in (r_ops, j_ops):
        state = {"n": 0}

        def setup(second: Callable[[], object] = second, state: dict[str, int] = state
                  ) -> None:
            if state["n"]:
                second()
            state["n"] += 1

        t_first = h.time_with_setup(setup, first, budget_s=s.budget_s, min_samples=s.min_samples)
        t_second = h.time_with_setup(first, second, budget_s=s.budget_s,
                                     min_samples=s.min_samples)
        out.append((t_first, t_second))
    (rw, ra), (jw, ja) = out
    return rw, ra, jw, ja


# --------------------------------------------------------------------------- concurrency


def _threads_run(read: Callable[[], object], write: Callable[[], object], readers: int,
                 seconds: float) -> dict[str, float]:
    stop = threading.Event()
    counts = [0] * readers
    writes = [0]
    errors: list[BaseException] = []

    def reader(i: int) -> None:
        n = 0
        try:
            while not stop.is_set():
                for _ in range(100):
                    if read() is None:
                        raise AssertionError("hot topic vanished")
                n += 100
        except BaseException as exc:  # reported below
            errors.append(exc)
        counts[i] = n

    def writer() -> None:
        try:
            while not stop.is_set():
                write()
                writes[0] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(readers)]
    threads.append(threading.Thread(target=writer))
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return {"reader_pickups_per_s": sum(counts) / elapsed, "writer_registers_per_s":
            writes[0] / elapsed, "seconds": elapsed}


def measure_concurrency(w: TopicWorld, s: Settings) -> dict[str, Any]:
    """pickup_route with 4 reader threads while one writer keeps re-registering ``hot-0``
    with a new DataVersion each time (so the hot route really changes and is rebuilt)."""
    seconds = 0.3 if s.quick else 3.0
    base = w.hot[0]
    counter = itertools.count(100)

    def r_write() -> None:
        c = next(counter)
        reg = r.Registration(
            cluster=base.cluster, broker_name=base.broker_name, broker_id=0,
            broker_addr=base.broker_addr, heartbeat_timeout_ms=NEVER_MS,
            enable_acting_master=False, topics=base.topics,
            data_version=r.DataVersion(timestamp=START_MS, counter=c))
        assert w.mgr.register(reg).accepted

    def j_write() -> None:
        wrapper = to_java_wrapper(base)
        wrapper.data_version.counter = next(counter)
        java_register(w.jm, base, wrapper)

    out: dict[str, Any] = {"topics_in_total": w.total, "readers": 4, "writers": 1}
    for side, read, write in (
        ("routing", lambda: w.mgr.pickup_route("hot"), r_write),
        ("baseline", lambda: w.jm.pickup_topic_route_data("hot"), j_write),
    ):
        single = h.time_op(read, budget_s=min(0.5, seconds), min_samples=3)
        mixed = _threads_run(read, write, 4, seconds)
        out[side] = {"single_thread_pickups_per_s": single.ops_per_s, **mixed}
    assert not w.jm.errors
    return out


# --------------------------------------------------------------------------- memory


def _retained_bytes(build: Callable[[], tuple[object, int]]) -> tuple[int, int]:
    """Bytes still allocated once ``build``'s inputs are gone: (bytes, units) of its result."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept, units = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    gc.collect()
    return after - before, units


def measure_memory(s: Settings) -> dict[str, Any]:
    """tracemalloc: bytes per live broker and per (topic, group) row, routing vs baseline.

    The managers are built inside the traced region and their inputs dropped before the
    second reading, so the figure is what the manager keeps (including any input it holds).
    """
    n = 1_000 if s.quick else 100_000

    def brokers(side: str) -> tuple[object, int]:
        clock = r.ManualClock(start_ms=START_MS)
        if side == "routing":
            mgr: Any = r.RouteInfoManager(clock=clock)
            for i in range(n):
                assert mgr.register(registration(f"C{i % 10}", f"b{i}", addr_of(i), [])).accepted
        else:
            mgr = JavaRouteInfoManager(now_ms=clock.now_ms)
            for i in range(n):
                java_register(mgr, registration(f"C{i % 10}", f"b{i}", addr_of(i), []))
        return (mgr, clock), n

    def rows(side: str) -> tuple[object, int]:
        clock = r.ManualClock(start_ms=START_MS)
        groups = n // FILLER_TOPICS_PER_GROUP
        mgr: Any = (r.RouteInfoManager(clock=clock) if side == "routing"
                    else JavaRouteInfoManager(now_ms=clock.now_ms))
        for g in range(groups):
            reg = registration("CX", f"g{g}", addr_of(g),
                               [f"t{g}-{i}" for i in range(FILLER_TOPICS_PER_GROUP)])
            if side == "routing":
                assert mgr.register(reg).accepted
            else:
                java_register(mgr, reg)
            del reg
        return (mgr, clock), groups * FILLER_TOPICS_PER_GROUP

    out: dict[str, Any] = {"brokers": n, "rows": n}
    for side in ("routing", "baseline"):
        b_bytes, b_units = _retained_bytes(functools.partial(brokers, side))
        r_bytes, r_units = _retained_bytes(functools.partial(rows, side))
        out[side] = {"bytes_per_broker": b_bytes / b_units, "bytes_per_row": r_bytes / r_units,
                     "total_bytes_brokers": b_bytes, "total_bytes_rows": r_bytes}
    return out


# --------------------------------------------------------------------------- targets


def _rows_of(rows: list[h.Row], op: str) -> list[h.Row]:
    return sorted((x for x in rows if x.get("suite") == SUITE and x.get("operation") == op),
                  key=lambda x: x["size"])


def _at(rows: list[h.Row], op: str, size: int) -> h.Row | None:
    found = [x for x in _rows_of(rows, op) if x["size"] == size]
    if found:
        return found[0]
    series = _rows_of(rows, op)
    return series[-1] if series else None


def _flatness(rows: list[h.Row], op: str) -> float:
    medians = [x["routing_median_ns"] for x in _rows_of(rows, op)]
    return max(medians) / min(medians) if medians else float("nan")


FLAT_LIMIT = 2.0  # "flat": the slowest size's median within 2× of the fastest's


def evaluate_targets(rows: list[h.Row]) -> list[dict[str, Any]]:
    """The spec §5 targets, each with the measured value and met/missed."""
    out: list[dict[str, Any]] = []

    def add(name: str, target: str, measured: str, met: bool) -> None:
        out.append({"target": name, "requirement": target, "measured": measured, "met": met})

    row = _at(rows, "register unchanged (same object)", 1_000)
    if row:
        v = row["routing_ops_per_s"]
        add("heartbeat = register unchanged (same object), 1000 topics", "≥ 200 000/s",
            f"{v:,.0f}/s at {row['size']} topics", v >= 200_000)
    row = _at(rows, "register unchanged (equal copy)", 1_000)
    if row:  # not a §5 target: what a host pays if it hands over equal, distinct tables
        v = row["routing_ops_per_s"]
        out.append({"target": "(information) register unchanged (equal copy), 1000 topics",
                    "requirement": "none; the same-object path is the target's",
                    "measured": f"{v:,.0f}/s at {row['size']} topics", "met": None})
    op = "scan_expired (none expired)"
    row = _at(rows, op, 10_000)
    if row:
        v = row["routing_ops_per_s"]
        flat = _flatness(rows, op)
        add("scan_expired, 10 000 live brokers, none expired", "≥ 1 000 000/s",
            f"{v:,.0f}/s at {row['size']} brokers", v >= 1_000_000)
        add("scan_expired flat from 100 to 100 000 brokers", f"max/min median ≤ {FLAT_LIMIT}",
            f"{flat:.2f}", flat <= FLAT_LIMIT)
    for op in ("remove group: unregister its only member",
               "remove group: scan_expired with it expired"):
        row = _at(rows, op, 100_000)
        if row:
            ratio = row["ratio"]
            add(f"{op}, 100 000 topics in total", "≥ 1 000× the naive port",
                f"{ratio:,.0f}× at {row['size']} topics", ratio >= 1_000)
    op = "pickup_route (hot topic, 4 groups)"
    row = _at(rows, op, 100_000)
    if row:
        v = row["routing_ops_per_s"]
        add("pickup_route of a hot topic", "≥ 1 000 000/s", f"{v:,.0f}/s", v >= 1_000_000)
    for op in ("topics_by_cluster (10 topics)", "wipe_write_perm (10 topics)",
               "add_write_perm (10 topics)"):
        flat = _flatness(rows, op)
        if flat == flat:
            add(f"{op} flat in total topics", f"max/min median ≤ {FLAT_LIMIT}", f"{flat:.2f}",
                flat <= FLAT_LIMIT)
    return out


# --------------------------------------------------------------------------- entry points


def run_core(quick: bool, log: Callable[[str], None] = print) -> CoreReport:
    """Run every core measurement; ``log`` receives progress lines."""
    s = Settings.of(quick)
    report = CoreReport()
    for name, step in (("register", measure_register), ("brokers", measure_brokers),
                       ("topics", measure_topics)):
        t0 = time.perf_counter()
        step(s, report)
        log(f"core/{name}: {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    report.memory = measure_memory(s)
    log(f"core/memory: {time.perf_counter() - t0:.1f} s")
    report.targets = evaluate_targets(report.rows)
    return report


def run(quick: bool) -> list[h.Row]:
    """The harness protocol of optional modules: rows only."""
    return run_core(quick, log=lambda _line: None).rows


def iter_sizes(quick: bool) -> Iterator[int]:
    """The sizes a run uses."""
    return iter(Settings.of(quick).sizes)


# --------------------------------------------------------------------------- Markdown

#: (operation, Java cost, routing cost) — T topics, T_b of the group, B_t groups of the
#: topic, B_c groups of the cluster, L live brokers, I members per group, k expired.
COMPLEXITY = (
    ("register unchanged (same object)", "O(T_payload): a version and row check per topic",
     "O(I): the applied table is the same object and no row changed since"),
    ("register unchanged (equal copy)", "O(T_payload)",
     "O(T_payload) in C: one comparison of the tables' names keys (memcmp), made once per "
     "table; the names against the group's row index when they differ"),
    ("heartbeat", "O(1)", "O(1): one store of the refresh time; the deadline heap re-files "
     "the broker when its filed deadline comes due, O(log L) at most once per timeout"),
    ("query_data_version", "O(1)", "O(1), as heartbeat"),
    ("scan_expired (none expired)", "O(L): every live entry, clock read per entry",
     "O(1): the earliest deadline"),
    ("remove group: unregister its only member", "O(T): cleanTopicByUnRegisterRequests",
     "O(T_b · B_t): drop the group's topic entries, rebuild the shared ones' routes"),
    ("remove group: scan_expired with it expired", "O(L) walk + O(B·I) search + O(T)",
     "O(k · (I + T_b · B_t))"),
    ("pickup_route (hot topic, 4 groups)", "O(B_t · I), new route, lists and BrokerData copies",
     "O(1): the stored immutable snapshot"),
    ("topics_by_cluster (10 topics)", "O(B_c · T)", "O(Σ T_b log Σ T_b) over the cluster's "
     "groups (sorted)"),
    ("wipe_write_perm (10 topics)", "O(T)", "O(T_b · B_t): new row and route per topic"),
    ("add_write_perm (10 topics)", "O(T)", "O(T_b · B_t)"),
)


def render_markdown(document: dict[str, Any]) -> str:
    """The generated part of ``docs/performance.md`` from a report document."""
    rows = list(document["rows"])
    m = document["machine"]
    out = [f"Run: `{document['command']}` on {m['nproc']} cores, {m['implementation']} "
           f"{m['python']}, {m['platform']}; {document['elapsed_s']} s in total; 1-minute "
           f"load average {m.get('loadavg_1m')} at the start and {m.get('loadavg_1m_end')} at "
           "the end (other processes share the machine).", "",
           "### Results", "", h.markdown_table(rows), "",
           "![cost per call against size, log-log](benchmarks.png)", "",
           "### Spec §5 targets", "", "| target | requirement | measured | |", "|---|---|---|---|"]
    for t in document["targets"]:
        verdict = "info" if t["met"] is None else "met" if t["met"] else "**missed**"
        out.append(f"| {t['target']} | {t['requirement']} | {t['measured']} | {verdict} |")
    out += ["", "### Complexity and measured ratio per operation", "",
            "Ratio = routing ops/s ÷ baseline ops/s at the largest size measured.", "",
            "| operation | Java 5.x | routing | ratio (size) |", "|---|---|---|---|"]
    core = [x for x in rows if x.get("suite") == SUITE]
    for op, java, ours in COMPLEXITY:
        series = sorted((x for x in core if x["operation"] == op), key=lambda x: x["size"])
        ratio = (f"{h.fmt_ratio(series[-1].get('ratio'))} ({series[-1]['size']:,} "
                 f"{series[-1]['size_unit']})") if series else "—"
        out.append(f"| {op} | {java} | {ours} | {ratio} |")
    mem = document.get("memory") or {}
    if mem:
        out += ["", "### Memory", "",
                f"tracemalloc, bytes the manager keeps once its inputs are dropped: "
                f"{mem['brokers']:,} brokers (one group each, no topics) and "
                f"{mem['rows']:,} (topic, group) rows (groups of 1 000 topics).", "",
                "| | bytes per broker | bytes per (topic, group) row |", "|---|---|---|"]
        for side in ("routing", "baseline"):
            out.append(f"| {side} | {mem[side]['bytes_per_broker']:,.0f} | "
                       f"{mem[side]['bytes_per_row']:,.0f} |")
    conc = document.get("concurrency") or {}
    if conc:
        out += ["", "### Readers and a writer", "",
                f"`pickup_route` of the hot topic from {conc['readers']} threads while one "
                f"thread re-registers one of its groups with a new DataVersion each time "
                f"({conc['topics_in_total']:,} topics in total).", "",
                "| | pickups/s, 1 thread alone | pickups/s, 4 readers in total | "
                "registers/s by the writer meanwhile |", "|---|---|---|---|"]
        for side in ("routing", "baseline"):
            c = conc[side]
            out.append(f"| {side} | {h.fmt_rate(c['single_thread_pickups_per_s'])} | "
                       f"{h.fmt_rate(c['reader_pickups_per_s'])} | "
                       f"{h.fmt_rate(c['writer_registers_per_s'])} |")
    return "\n".join(out)
