"""routing — the routing brain of a RocketMQ-style name server, as a pure Python library.

It holds which brokers serve which topics, keeps broker liveness from heartbeats, expires
silent brokers, and answers "where does topic T live?". The core does no I/O: the host
supplies networking, threads and timers, and time comes from an injected `Clock`.

>>> import routing as r
>>> clock = r.ManualClock(start_ms=0)
>>> mgr = r.RouteInfoManager(clock=clock)
>>> res = mgr.register(r.Registration(
...     cluster="DefaultCluster", broker_name="broker-a", broker_id=0,
...     broker_addr="10.0.0.1:10911",
...     topics={t: r.TopicConfig(topic_name=t) for t in ("TopicTest", "broker-a")}))
>>> res.accepted
True
>>> [q.broker_name for q in mgr.pickup_route("TopicTest").queue_datas]
['broker-a']
"""

from ._clock import Clock, ManualClock, SystemClock
from ._errors import InvalidRequest, InvalidType, InvariantViolation, NotReady, RoutingError
from ._frozen import FrozenMap
from ._manager import RouteInfoManager, RouteListener
from ._messages import (
    BrokerMemberGroup,
    BrokerRegistered,
    BrokerRemoved,
    ClusterInfo,
    ExpiredBroker,
    MinBrokerIdChanged,
    RegisterResult,
    Registration,
    RemovalReason,
    RouteChange,
    RoutingConfig,
    TopicList,
    UnregisterRequest,
    VersionAnswer,
)
from ._restore import restore_manager, snapshot_manager
from ._snapshot import SNAPSHOT_FORMAT, LiveSnapshot, ManagerSnapshot, TopicSnapshot
from ._values import (
    MASTER_ID,
    BrokerAddr,
    BrokerData,
    BrokerLiveInfo,
    DataVersion,
    Perm,
    QueueData,
    TopicConfig,
    TopicQueueMappingInfo,
    TopicRouteData,
    TopicSysFlag,
)
from ._version import __version__

__all__ = (
    "MASTER_ID",
    "SNAPSHOT_FORMAT",
    "BrokerAddr",
    "BrokerData",
    "BrokerLiveInfo",
    "BrokerMemberGroup",
    "BrokerRegistered",
    "BrokerRemoved",
    "Clock",
    "ClusterInfo",
    "DataVersion",
    "ExpiredBroker",
    "FrozenMap",
    "InvalidRequest",
    "InvalidType",
    "InvariantViolation",
    "LiveSnapshot",
    "ManagerSnapshot",
    "ManualClock",
    "MinBrokerIdChanged",
    "NotReady",
    "Perm",
    "QueueData",
    "RegisterResult",
    "Registration",
    "RemovalReason",
    "RouteChange",
    "RouteInfoManager",
    "RouteListener",
    "RoutingConfig",
    "RoutingError",
    "SystemClock",
    "TopicConfig",
    "TopicList",
    "TopicSnapshot",
    "TopicQueueMappingInfo",
    "TopicRouteData",
    "TopicSysFlag",
    "UnregisterRequest",
    "VersionAnswer",
    "__version__",
    "restore_manager",
    "snapshot_manager",
)
