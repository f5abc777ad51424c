"""routing.sim — a deterministic, in-process simulation of a RocketMQ-style cluster.

M name servers (each a `RouteInfoManager` behind a `JournalRecorder`, on one shared
`ManualClock`, scanned every 5 000 ms) and N broker groups (a master and slaves, each driven
by a `routing.heartbeat.BrokerHeartbeat`) exchange messages through a simulated network with
latency and loss; clients poll routes every 30 s; faults (crashes, partitions, name-server
restarts, failovers, topic changes, degraded links) come from a seeded RNG. It is a
discrete-event simulation: an event heap keyed by (time, insertion order), no sockets, no
threads, no sleeping. The same seed gives byte-identical journals.

>>> from routing.sim import Crash, SimConfig, simulate
>>> result = simulate(SimConfig(groups=2, slaves=0, nameservers=2, duration_ms=400_000,
...     clients=1, faults=[Crash(at_ms=100_000, group=0, mode="kill")]))
>>> sorted((c.nameserver_id, c.change.removed[0].reason) for c in result.changes
...        if c.change.removed)
[('ns-0', 'channel_closed'), ('ns-1', 'channel_closed')]
>>> row = result.summary().rows[0]
>>> row.kind, all(ms is not None and ms < 100 for ms in row.stopped_routing_ms.values())
('crash', True)
"""

from ._faults import (
    FAULT_KINDS,
    PROFILES,
    Crash,
    CrashMode,
    DegradedLink,
    Failover,
    Fault,
    NameServerRestart,
    Partition,
    SimConfig,
    TopicCreate,
    TopicDelete,
    plan_faults,
)
from ._live import LivePacing, Pacer
from ._model import FaultRecord, NsChange, SimResult, SimStats
from ._runner import Progress, Simulation, simulate
from ._summary import FaultSummary, SimSummary, summarize

__all__ = (
    "FAULT_KINDS",
    "PROFILES",
    "Crash",
    "CrashMode",
    "DegradedLink",
    "Failover",
    "Fault",
    "FaultRecord",
    "FaultSummary",
    "LivePacing",
    "NameServerRestart",
    "NsChange",
    "Pacer",
    "Partition",
    "Progress",
    "SimConfig",
    "SimResult",
    "SimStats",
    "SimSummary",
    "Simulation",
    "TopicCreate",
    "TopicDelete",
    "plan_faults",
    "simulate",
    "summarize",
)
