"""The mutable state of the simulated processes: brokers, groups, name servers, clients.

Plain slotted classes owned by `routing.sim._runner.Simulation`; nothing here is shared with
callers (the run's results are the frozen values of `routing.sim._model`).
"""

from __future__ import annotations

from .._manager import RouteInfoManager
from .._messages import Registration
from .._values import DataVersion, TopicConfig
from ..heartbeat import BrokerHeartbeat
from ..journal import JournalRecorder, JournalSink

__all__ = ["QUEUES_PER_TOPIC", "Client", "Group", "NameServer", "Proc"]

#: Read and write queues of every topic the simulator creates.
QUEUES_PER_TOPIC = 8


class Proc:
    """One broker process (a machine with a fixed address); its role may change."""

    __slots__ = ("addr", "alive", "broker_id", "channel", "degraded", "group", "ha_addr", "hb",
                 "poll_at", "reg_out", "reg_src", "version")

    def __init__(self, group: Group, broker_id: int, addr: str, ha_addr: str) -> None:
        self.group, self.broker_id, self.addr, self.ha_addr = group, broker_id, addr, ha_addr
        self.hb: BrokerHeartbeat | None = None
        self.alive = False
        self.channel = 0
        self.poll_at: int | None = None
        self.degraded: tuple[float, int] | None = None
        self.version: DataVersion | None = None
        self.reg_src: Registration | None = None
        self.reg_out: Registration | None = None


class Group:
    """A broker group: its processes (master and slaves) and the topic table they share."""

    __slots__ = ("index", "name", "procs", "topics")

    def __init__(self, index: int, name: str) -> None:
        self.index, self.name = index, name
        self.procs: list[Proc] = []
        self.topics: dict[str, TopicConfig] = {}

    def member(self, broker_id: int) -> Proc | None:
        for p in self.procs:
            if p.alive and p.broker_id == broker_id:
                return p
        return None


class NameServer:
    """A name server: its current manager and recorder, whether it is up, its incarnation
    (bumped at every stop and start, so stale events are ignored), its readiness time."""

    __slots__ = ("addr", "id", "incarnation", "index", "manager", "ready_at", "recorder",
                 "scan_phase", "sink", "up")

    def __init__(self, index: int, sink: JournalSink) -> None:
        self.index, self.id, self.addr = index, f"ns-{index}", f"10.0.0.{index + 1}:9876"
        self.sink = sink
        self.scan_phase = 1  # ms from start to the first scan: processes are not in step
        self.up = False
        self.incarnation = 0
        self.ready_at = 0
        self.manager: RouteInfoManager | None = None
        self.recorder: JournalRecorder | None = None


class Client:
    """A client: its preferred name server, its topics, and the broker addresses its routes
    listed after each poll that changed them."""

    __slots__ = ("index", "ns", "topics", "view")

    def __init__(self, index: int, ns: int, topics: tuple[str, ...]) -> None:
        self.index, self.ns, self.topics = index, ns, topics
        self.view: list[tuple[int, frozenset[str]]] = []
