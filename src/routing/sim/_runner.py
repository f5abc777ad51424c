"""The discrete-event simulation: name servers, brokers and clients on one `ManualClock`.

Everything that happens is an event in a heap keyed by (time ms, insertion number): a broker
poll, a message delivery, a reply, a scan, a client poll, a fault. The loop pops the next
event, sets the clock to its time and runs it; time jumps from event to event, never
millisecond by millisecond. Every random choice comes from RNGs seeded from
``SimConfig.seed`` and every collection is walked in a fixed order, so the same seed gives
byte-identical journals.
"""

from __future__ import annotations

import heapq
import io
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from .._clock import Clock, ManualClock
from .._frozen import FrozenMap
from .._manager import RouteInfoManager
from .._messages import BrokerMemberGroup, RegisterResult, RouteChange, VersionAnswer
from .._values import TopicConfig, TopicRouteData
from ..heartbeat import (
    Action,
    BrokerConfig,
    BrokerHeartbeat,
    SendHeartbeat,
    SendMemberGroupQuery,
    SendRegistration,
    SendUnregister,
    SendVersionQuery,
)
from ..journal import (
    DEFAULT_ROTATE_EVERY_MS,
    JournalRecorder,
    JournalSink,
    RotatingJournal,
    open_journal,
)
from ._faults import (
    CrashMode,
    SimConfig,
    plan_faults,
)
from ._inject import FaultInjection
from ._live import LivePacing, OffsetClock, Pacer
from ._model import FaultRecord, NsChange, SimResult, SimStats
from ._nodes import QUEUES_PER_TOPIC, Client, Group, NameServer, Proc

__all__ = ["Progress", "simulate"]

#: ``progress(now_ms, end_ms)``, called about every simulated minute.
Progress = Callable[[int, int], None]

_FAILED = object()  # a reply payload: the request failed (name server down)


class Simulation(FaultInjection):
    """One run. Build it, then call `run` once. Use `simulate` unless you need the parts."""

    def __init__(self, config: SimConfig, *, out_dir: Path | None = None,
                 gzip: bool = False, progress: Progress | None = None,
                 sink_factory: Callable[[str], JournalSink] | None = None,
                 rotate_every_ms: int | None = None, rotate_bytes: int | None = None,
                 live: LivePacing | None = None) -> None:
        self.config = config
        self._pacer = Pacer(live) if live is not None else None
        rotating = out_dir is not None and (live is not None or bool(rotate_every_ms)
                                            or bool(rotate_bytes))
        if live is not None:  # wall ms → simulated ms
            rotate_every_ms = live.sim_ms(DEFAULT_ROTATE_EVERY_MS if rotate_every_ms is None
                                          else rotate_every_ms)
        self._files: dict[str, list[Path]] = {}
        self.clock = ManualClock(start_ms=0)
        #: The name servers' clock: `clock`, or with live ``wall_times`` the same read
        #: ``ts_offset_ms`` later (set when the run starts); journal ``ts`` come from it.
        self.ns_clock: Clock = self.clock
        self.ts_offset_ms = 0
        self._heap: list[tuple[int, int, Callable[[Any], None], Any]] = []
        self._seq = 0
        self._net = random.Random(f"{config.seed}:net")
        self._chaos = random.Random(f"{config.seed}:fault-exec")
        self._lat_min = config.latency_min_ms
        self._lat_rate = 1.0 / config.latency_mean_ms if config.latency_mean_ms > 0 else 0.0
        self._progress = progress
        self._events = self._messages = self._lost = 0
        self._channels = 0
        self._partitions: dict[tuple[str, int], int] = {}
        self._changes: list[NsChange] = []
        self._timeline: dict[str, list[list[tuple[int, TopicRouteData | None]]]] = {}
        self._serving: list[list[tuple[int, bool]]] = [[] for _ in range(config.nameservers)]
        self._faults: list[FaultRecord] = []
        self._new_topics = 0
        self._paths: dict[str, Path] = {}
        self._ns: list[NameServer] = []
        for i in range(config.nameservers):
            if sink_factory is not None:
                self._ns.append(NameServer(i, sink_factory(f"ns-{i}")))
            elif out_dir is not None and rotating:
                files = self._files[f"ns-{i}"] = []
                self._ns.append(NameServer(i, RotatingJournal(
                    out_dir, f"ns-{i}", clock=self.clock, rotate_every_ms=rotate_every_ms,
                    rotate_bytes=rotate_bytes, gzip=gzip, on_close=files.append)))
            elif out_dir is not None:
                path = out_dir / f"ns-{i}.jsonl{'.gz' if gzip else ''}"
                self._paths[f"ns-{i}"] = path
                self._ns.append(NameServer(i, open_journal(path, "w")))
            else:
                self._ns.append(NameServer(i, io.StringIO()))
        self._ns_by_addr = {ns.addr: ns for ns in self._ns}
        self._groups: list[Group] = []
        self._clients: list[Client] = []
        self._build(random.Random(f"{config.seed}:setup"))

    # ------------------------------------------------------------------ set-up

    def _build(self, rng: random.Random) -> None:
        cfg = self.config
        width = max(3, len(str(cfg.groups - 1)))
        for g in range(cfg.groups):
            group = Group(g, f"broker-{g:0{width}d}")
            for name in (cfg.cluster, group.name):
                group.topics[name] = TopicConfig(topic_name=name, read_queue_nums=QUEUES_PER_TOPIC,
                                                 write_queue_nums=QUEUES_PER_TOPIC)
            for i in range(cfg.slaves + 1):
                host = f"10.{1 + g // 250}.{g % 250}.{i + 1}"
                group.procs.append(Proc(group, i, f"{host}:10911", f"{host}:10912"))
            self._groups.append(group)
        business = cfg.groups * cfg.topics_per_group // cfg.groups_per_topic
        per = min(cfg.groups_per_topic, cfg.groups)
        names = [f"Topic-{i:04d}" for i in range(business)]
        for name in names:
            for g in sorted(rng.sample(range(cfg.groups), per)):
                self._groups[g].topics[name] = TopicConfig(
                    topic_name=name, read_queue_nums=QUEUES_PER_TOPIC,
                    write_queue_nums=QUEUES_PER_TOPIC)
        for ns in self._ns:
            ns.scan_phase = rng.randint(1, cfg.scan_interval_ms)
            self._push(0, self._ns_start, ns)
        for group in self._groups:
            for proc in group.procs:
                self._push(rng.randrange(0, 5_000), self._proc_start, proc)
        pool = names or [g.name for g in self._groups]
        for c in range(cfg.clients):
            topics = tuple(sorted(rng.sample(pool, min(cfg.client_topics, len(pool)))))
            client = Client(c, c % cfg.nameservers, topics)
            self._clients.append(client)
            self._push(rng.randrange(0, cfg.client_poll_ms), self._client_poll, client)
        for fault in plan_faults(cfg):
            self._push(fault.at_ms, self._fault, fault)

    def _push(self, at: int, fn: Callable[[Any], None], arg: Any) -> None:
        heapq.heappush(self._heap, (at, self._seq, fn, arg))
        self._seq += 1

    # ------------------------------------------------------------------ the loop

    def run(self) -> SimResult:
        """Process every event up to ``duration_ms``; return the result. Cost: O(events ·
        log(queue)) plus the managers' work."""
        started = time.perf_counter()
        end = self.config.duration_ms
        heap, pop, clock, pacer = self._heap, heapq.heappop, self.clock, self._pacer
        step = 60_000
        next_report = step
        events = 0
        if pacer is not None:
            pacer.start(clock.now_ms())
            if pacer.pacing.wall_times:
                self.ts_offset_ms = pacer.anchor_ms
                self.ns_clock = OffsetClock(clock, pacer.anchor_ms)
        try:
            while heap and heap[0][0] <= end:
                at, _, fn, arg = pop(heap)
                if at > clock.now_ms():
                    if pacer is not None:
                        pacer.wait_for(at)
                    clock.set(at)
                fn(arg)
                events += 1
                if self._progress is not None and at >= next_report:
                    self._progress(at, end)
                    next_report = at - at % step + step
            if pacer is not None:
                pacer.wait_for(end)
        except BaseException:  # interrupted (Ctrl-C on a live run): files closed whole
            self.close()
            raise
        if clock.now_ms() < end:
            clock.set(end)
        self._events = events
        if self._progress is not None:
            self._progress(end, end)
        return self._result(time.perf_counter() - started)

    # ------------------------------------------------------------------ name servers

    def _ns_start(self, ns: NameServer) -> None:
        now = self.clock.now_ms()
        cfg = self.config
        manager = RouteInfoManager(clock=self.ns_clock, config=cfg.routing,
                                   listener=lambda change: self._on_change(ns, change))
        if ns.recorder is None:
            ns.recorder = JournalRecorder(manager, ns.sink, nameserver_id=ns.id,
                                          snapshot_every_ms=cfg.snapshot_every_ms)
        else:
            ns.recorder.restart(manager)
        ns.manager = manager
        ns.up = True
        ns.incarnation += 1
        ns.ready_at = now + (cfg.routing.wait_for_service_ms or 0)
        self._push(now + ns.scan_phase, self._scan, (ns, ns.incarnation))
        self._push(ns.ready_at, self._ns_ready, (ns, ns.incarnation))

    def _ns_ready(self, arg: tuple[NameServer, int]) -> None:
        ns, incarnation = arg
        if ns.incarnation != incarnation or not ns.up or ns.manager is None:
            return
        now = self.clock.now_ms()
        self._serving[ns.index].append((now, True))
        for topic in sorted(self._timeline):
            self._note_route(ns, topic, now)

    def _ns_stop(self, ns: NameServer) -> None:
        ns.up = False
        ns.incarnation += 1
        self._serving[ns.index].append((self.clock.now_ms(), False))

    def _scan(self, arg: tuple[NameServer, int]) -> None:
        ns, incarnation = arg
        if ns.incarnation != incarnation or ns.recorder is None:
            return
        ns.recorder.scan_expired()
        self._push(self.clock.now_ms() + self.config.scan_interval_ms, self._scan, arg)

    def _on_change(self, ns: NameServer, change: RouteChange) -> None:
        if not change.changed_topics and not change.removed:
            return
        self._changes.append(NsChange(nameserver_id=ns.id, change=change))
        if not change.changed_topics:
            return
        at = change.at_ms - self.ts_offset_ms  # simulated time
        if at >= ns.ready_at:
            for topic in sorted(change.changed_topics):
                self._note_route(ns, topic, at)
        else:  # not serving yet: `_ns_ready` reads every known topic when the gate opens
            for topic in change.changed_topics:
                if topic not in self._timeline:
                    self._timeline[topic] = [[] for _ in self._ns]

    def _note_route(self, ns: NameServer, topic: str, at: int) -> None:
        assert ns.manager is not None
        route = ns.manager.pickup_route(topic)
        lines = self._timeline.get(topic)
        if lines is None:
            lines = self._timeline[topic] = [[] for _ in self._ns]
        line = lines[ns.index]
        if not line or line[-1][1] != route:
            line.append((at, route))

    # ------------------------------------------------------------------ network

    def _transmit(self, proc: Proc, ns_index: int) -> int | None:
        """Latency (ms) of one message between a broker and a name server; None if lost."""
        self._messages += 1
        if self._partitions and (proc.addr, ns_index) in self._partitions:
            self._lost += 1
            return None
        loss, extra = self.config.loss_rate, 0
        if proc.degraded is not None:
            loss = 1.0 - (1.0 - loss) * (1.0 - proc.degraded[0])
            extra = proc.degraded[1]
        net = self._net
        if loss and net.random() < loss:
            self._lost += 1
            return None
        jitter = int(net.expovariate(self._lat_rate)) if self._lat_rate else 0
        return self._lat_min + jitter + extra

    def _send(self, proc: Proc, action: Action) -> None:
        if isinstance(action, SendRegistration | SendVersionQuery | SendHeartbeat |
                      SendUnregister | SendMemberGroupQuery):
            ns = self._ns_by_addr[action.name_server]
            latency = self._transmit(proc, ns.index)
            if latency is None:
                return
            at = self.clock.now_ms() + latency
            if not ns.up:
                if _expects_reply(action):
                    assert isinstance(action, SendRegistration | SendVersionQuery |
                                      SendMemberGroupQuery)
                    self._push(at, self._on_reply,
                               (proc, proc.hb, ns.addr, action.request_id, _FAILED))
                return
            self._push(at, self._deliver, (proc, proc.hb, proc.channel, ns, ns.incarnation,
                                           action))
        # UpdateMasterAddress: the slave's master address; nothing to simulate.

    def _perform(self, proc: Proc, actions: tuple[Action, ...]) -> None:
        for action in actions:
            self._send(proc, action)
        self._schedule_poll(proc)

    def _deliver(self, msg: tuple[Proc, BrokerHeartbeat | None, int, NameServer, int, Action]
                 ) -> None:
        proc, hb, channel, ns, incarnation, action = msg
        rec = ns.recorder
        expects = _expects_reply(action)
        if ns.incarnation != incarnation or not ns.up or rec is None:
            if expects:  # the connection died with the name server
                assert isinstance(action, SendRegistration | SendVersionQuery |
                                  SendMemberGroupQuery)
                self._reply(proc, hb, ns, action.request_id, _FAILED)
            return
        if self._partitions and (proc.addr, ns.index) in self._partitions:
            return  # cut while in flight
        if isinstance(action, SendRegistration):
            reg = action.registration
            if proc.reg_src is not reg or proc.reg_out is None or \
                    proc.reg_out.channel != channel:
                proc.reg_src, proc.reg_out = reg, attrs.evolve(reg, channel=channel)
            result: RegisterResult | VersionAnswer | BrokerMemberGroup = rec.register(
                proc.reg_out)
        elif isinstance(action, SendVersionQuery):
            result = rec.query_data_version(cluster=action.cluster,
                                            broker_addr=action.broker_addr,
                                            data_version=action.data_version)
        elif isinstance(action, SendHeartbeat):
            rec.heartbeat(cluster=action.cluster, broker_addr=action.broker_addr)
            return
        elif isinstance(action, SendMemberGroupQuery):  # GET_BROKER_MEMBER_GROUP (a read),
            # for either form: the sim's tables do not hold rmq_sys_SYNC_BROKER_MEMBER_*
            result = rec.broker_member_group(action.cluster, action.broker_name)
        else:
            assert isinstance(action, SendUnregister)
            rec.unregister(cluster=action.cluster, broker_addr=action.broker_addr,
                           broker_name=action.broker_name, broker_id=action.broker_id)
            return
        if expects:
            self._reply(proc, hb, ns, action.request_id, result)

    def _reply(self, proc: Proc, hb: BrokerHeartbeat | None, ns: NameServer, request_id: int,
               payload: object) -> None:
        latency = self._transmit(proc, ns.index)
        if latency is not None:
            self._push(self.clock.now_ms() + latency, self._on_reply,
                       (proc, hb, ns.addr, request_id, payload))

    def _on_reply(self, msg: tuple[Proc, BrokerHeartbeat | None, str, int, object]) -> None:
        proc, hb, ns_addr, request_id, payload = msg
        if hb is None or proc.hb is not hb or not proc.alive:
            return
        now = self.clock.now_ms()
        if isinstance(payload, RegisterResult):
            actions = hb.on_register_reply(ns_addr, request_id, payload, now_ms=now)
        elif isinstance(payload, VersionAnswer):
            actions = hb.on_version_reply(ns_addr, request_id, payload, now_ms=now)
        elif isinstance(payload, BrokerMemberGroup):
            actions = hb.on_member_group(ns_addr, request_id, payload, now_ms=now)
        else:
            actions = hb.on_failure(ns_addr, request_id, now_ms=now)
        self._perform(proc, actions)

    def _close(self, arg: tuple[NameServer, int, int]) -> None:
        ns, incarnation, channel = arg
        if ns.incarnation == incarnation and ns.up and ns.recorder is not None:
            ns.recorder.on_channel_closed(channel)

    # ------------------------------------------------------------------ brokers

    def _proc_start(self, proc: Proc) -> None:
        now = self.clock.now_ms()
        cfg = self.config
        self._channels += 1
        proc.channel = self._channels
        proc.alive = True
        proc.poll_at = None
        proc.hb = BrokerHeartbeat(
            BrokerConfig(cluster=cfg.cluster, broker_name=proc.group.name,
                         broker_id=proc.broker_id, broker_addr=proc.addr,
                         ha_server_addr=proc.ha_addr,
                         name_servers=tuple(ns.addr for ns in self._ns),
                         register_period_ms=cfg.register_period_ms,
                         enable_slave_acting_master=cfg.acting_master),
            clock=self.clock, topics=proc.group.topics.values(), data_version=proc.version)
        self._perform(proc, proc.hb.start(now))

    def _proc_stop(self, proc: Proc, mode: CrashMode) -> None:
        hb = proc.hb
        assert hb is not None
        now = self.clock.now_ms()
        if mode == "clean":
            for action in hb.shutdown(now):
                self._send(proc, action)
        proc.version = hb.data_version
        if mode != "halt":
            for ns in self._ns:  # the connections close after any unregister
                latency = self._transmit(proc, ns.index)
                if latency is not None and ns.up:
                    self._push(now + latency + 1, self._close,
                               (ns, ns.incarnation, proc.channel))
        proc.alive = False
        proc.hb = None
        proc.poll_at = None

    def _schedule_poll(self, proc: Proc) -> None:
        hb = proc.hb
        if hb is None:
            return
        due = hb.next_deadline_ms()
        if due is None or (proc.poll_at is not None and proc.poll_at <= due):
            return
        due = max(due, self.clock.now_ms())
        proc.poll_at = due
        self._push(due, self._poll, (proc, hb))

    def _poll(self, arg: tuple[Proc, BrokerHeartbeat]) -> None:
        proc, hb = arg
        now = self.clock.now_ms()
        if proc.hb is not hb or proc.poll_at != now:
            return
        proc.poll_at = None
        self._perform(proc, hb.poll(now))

    # ------------------------------------------------------------------ clients

    def _client_poll(self, client: Client) -> None:
        now = self.clock.now_ms()
        count = len(self._ns)
        for k in range(count):  # the preferred name server, else the next that answers
            ns = self._ns[(client.ns + k) % count]
            if ns.up and ns.manager is not None and now >= ns.ready_at:
                client.ns = ns.index
                addrs: set[str] = set()
                for topic in client.topics:
                    route = ns.manager.pickup_route(topic)
                    if route is not None:
                        for data in route.broker_datas:
                            addrs.update(data.broker_addrs.values())
                view = frozenset(addrs)
                if not client.view or client.view[-1][1] != view:
                    client.view.append((now, view))
                break
        self._push(now + self.config.client_poll_ms, self._client_poll, client)

    # ------------------------------------------------------------------ result

    def close(self) -> None:
        """Close the journal files this run opened (a rotating journal's last file is
        renamed into place). Idempotent."""
        for ns in self._ns:
            if ns.id in self._paths or ns.id in self._files:
                close = getattr(ns.sink, "close", None)
                if close is not None:
                    close()

    @property
    def pacer(self) -> Pacer | None:
        """The live pacing's counters (None: not live)."""
        return self._pacer

    def _result(self, wall_s: float) -> SimResult:
        texts: dict[str, str] = {}
        for ns in self._ns:
            if isinstance(ns.sink, io.StringIO):
                texts[ns.id] = ns.sink.getvalue()
        self.close()
        for index, line in enumerate(self._serving):
            if not line or line[0][0] > 0:
                line.insert(0, (0, False))
            self._serving[index] = line
        return SimResult(
            config=self.config, end_ms=self.config.duration_ms,
            nameserver_ids=tuple(ns.id for ns in self._ns),
            group_names=tuple(g.name for g in self._groups), faults=tuple(self._faults),
            managers=FrozenMap({ns.id: ns.manager for ns in self._ns if ns.manager}),
            changes=tuple(self._changes),
            route_timeline=FrozenMap({
                topic: FrozenMap({ns.id: tuple(lines[ns.index]) for ns in self._ns})
                for topic, lines in sorted(self._timeline.items())}),
            serving=FrozenMap({ns.id: tuple(self._serving[ns.index]) for ns in self._ns}),
            client_views=tuple(tuple(c.view) for c in self._clients),
            stats=SimStats(events=self._events, messages=self._messages, lost=self._lost,
                           journal_lines=FrozenMap({
                               ns.id: ns.recorder.seq + 1 if ns.recorder else 0
                               for ns in self._ns}),
                           wall_s=wall_s),
            journal_texts=FrozenMap(texts), journal_paths=FrozenMap(self._paths),
            journal_files=FrozenMap({k: tuple(v) for k, v in self._files.items()}))


def _expects_reply(action: Action) -> bool:
    if isinstance(action, SendRegistration | SendVersionQuery):
        return not action.oneway
    return isinstance(action, SendMemberGroupQuery)


def simulate(config: SimConfig | None = None, *, out_dir: str | Path | None = None,
             gzip: bool = False, progress: Progress | None = None,
             sink_factory: Callable[[str], JournalSink] | None = None,
             rotate_every_ms: int | None = None, rotate_bytes: int | None = None,
             live: LivePacing | None = None) -> SimResult:
    """Run one deterministic simulation (`SimConfig` defaults when None).

    Journals go to ``out_dir/ns-<i>.jsonl`` (``.jsonl.gz`` with ``gzip``) when ``out_dir``
    is given, else they are kept in memory (`SimResult.journal_texts`), unless
    ``sink_factory(ns_id)`` supplies the sinks (then the caller owns them). With
    ``rotate_every_ms`` (simulated ms) or ``rotate_bytes``, each name server's journal is
    a series of complete files ``out_dir/ns-<i>.<first seq>.jsonl``
    (`routing.journal.RotatingJournal`; `SimResult.journal_files`), the same lines as the
    unrotated journal. ``live`` paces the run on the wall clock (`LivePacing`: ``speed``
    simulated ms per real ms) and rotates every ``rotate_every_ms`` of *wall* time
    (default 10 000), i.e. every ``rotate_every_ms · speed`` simulated ms: a live run
    writes the same files as the run without ``live`` rotated that often. ``progress(now_ms,
    end_ms)`` is called about once per simulated minute. The same config always gives
    byte-identical journals. Cost: proportional to the number of events, about
    ``brokers · (1 + 2 · nameservers) · duration / register_period`` plus scans and polls.
    """
    directory = None
    if out_dir is not None:
        directory = Path(out_dir)
        directory.mkdir(parents=True, exist_ok=True)
    return Simulation(config or SimConfig(), out_dir=directory, gzip=gzip,
                      progress=progress, sink_factory=sink_factory,
                      rotate_every_ms=rotate_every_ms, rotate_bytes=rotate_bytes,
                      live=live).run()
