"""`WireManager`: the route manager a served fake's remoting processor calls.

It is the fake's own `RouteInfoManager` (the current one: `FakeNameServer.start` replaces
it), seen through two additions: every write that arrives over TCP is written to the
fake's event log the way a `FakeBroker`'s is (``register``, ``rejected``, ``heartbeat``,
``unregister``, ``channel_closed``, ``admin``), and while the endpoint is frozen the
client-facing reads (routes, cluster info, topic lists) answer from a snapshot taken at
`freeze`, as a name server that stopped seeing changes would, while the brokers' writes
still land underneath. Called with the fake's lock held (the endpoint's processor takes
it).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

from .._errors import NotReady
from .._messages import (
    BrokerMemberGroup,
    ClusterInfo,
    ExpiredBroker,
    RegisterResult,
    Registration,
    RoutingConfig,
    TopicList,
    VersionAnswer,
)
from .._values import DataVersion, QueueData, TopicRouteData

if TYPE_CHECKING:
    from ._fake import FakeNameServer

__all__ = ["FrozenView", "WireManager"]


class FrozenView:
    """What clients saw when a name server was frozen: every route, the cluster info and
    the topic lists. O(topics) to take."""

    def __init__(self, fake: FakeNameServer) -> None:
        manager = fake.manager
        self.at_ms = fake.clock.now_ms()
        self.routes: dict[str, TopicRouteData | None] = {}
        for topic in manager.all_topics():
            try:
                self.routes[topic] = manager.pickup_route(topic)
            except NotReady:
                self.routes[topic] = None
        self.cluster = manager.cluster_info()
        self.topics = manager.all_topics()
        self.by_cluster = {c: manager.topics_by_cluster(c)
                           for c in self.cluster.cluster_addr_table}
        self.system = manager.system_topics()
        self.unit = manager.unit_topics()
        self.unit_sub = manager.has_unit_sub_topics()
        self.unit_sub_non_unit = manager.has_unit_sub_non_unit_topics()


class WireManager:
    """See the module docstring. ``describe`` names a channel for the log lines."""

    def __init__(self, fake: FakeNameServer, describe: Callable[[Hashable | None], str]) -> None:
        self._fake = fake
        self._describe = describe
        #: The snapshot clients read while frozen, else None.
        self.frozen: FrozenView | None = None

    @property
    def config(self) -> RoutingConfig:
        return self._fake.manager.config

    def reconfigure(self, config: RoutingConfig) -> None:
        """UPDATE_NAMESRV_CONFIG's routing settings; the fake keeps them across restarts."""
        self._fake.manager.reconfigure(config)
        self._fake.config = config
        self._fake._log("admin", "settings updated over the wire")

    # ------------------------------------------------------------------ broker writes

    def register(self, registration: Registration) -> RegisterResult:
        fake, reg = self._fake, registration
        result = fake._call(lambda m: m.register(reg))
        how = "tcp increment" if reg.partial else "tcp"
        fake._log_registration(how, reg, result, addr=reg.broker_addr,
                               who=f"{reg.cluster}/{reg.broker_name} id={reg.broker_id} "
                                   f"from {self._describe(reg.channel)}")
        return result

    def unregister(self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                   generation: int | None = None) -> bool:
        removed = self._fake._call(lambda m: m.unregister(
            cluster=cluster, broker_addr=broker_addr, broker_name=broker_name,
            broker_id=broker_id, generation=generation))
        self._fake._log("unregister", "tcp: " + ("removed" if removed else "nothing to remove"),
                        broker_addr)
        return removed

    def query_data_version(self, *, cluster: str, broker_addr: str,
                           data_version: DataVersion) -> VersionAnswer:
        answer = self._fake._call(lambda m: m.query_data_version(
            cluster=cluster, broker_addr=broker_addr, data_version=data_version))
        self._fake._log("heartbeat", "tcp query data version: "
                        + ("changed" if answer.changed else "unchanged"), broker_addr)
        return answer

    def heartbeat(self, *, cluster: str, broker_addr: str) -> bool:
        known = self._fake._call(lambda m: m.heartbeat(cluster=cluster, broker_addr=broker_addr))
        self._fake._log("heartbeat", "tcp: " + ("known" if known else "unknown broker: ignored"),
                        broker_addr)
        return known

    def scan_expired(self) -> tuple[ExpiredBroker, ...]:
        return self._fake._scan()

    def on_channel_closed(self, channel: Hashable | None) -> tuple[ExpiredBroker, ...]:
        fake = self._fake
        if not fake.running:
            return ()
        gone = fake._call(lambda m: m.on_channel_closed(channel))
        if gone:
            fake._log("channel_closed", f"{self._describe(channel)}: removed "
                      + ", ".join(e.broker_addr for e in gone), gone[0].broker_addr)
        return gone

    # ------------------------------------------------------------------ admin writes

    def wipe_write_perm(self, broker_name: str) -> int:
        count = self._fake._call(lambda m: m.wipe_write_perm(broker_name))
        self._fake._log("admin", f"tcp: wipe write perm of {broker_name}: {count} topic(s)")
        return count

    def add_write_perm(self, broker_name: str) -> int:
        count = self._fake._call(lambda m: m.add_write_perm(broker_name))
        self._fake._log("admin", f"tcp: add write perm of {broker_name}: {count} topic(s)")
        return count

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        removed = self._fake._call(lambda m: m.delete_topic(topic, cluster))
        self._fake._log("admin", f"tcp: delete topic {topic}"
                        + (f" in {cluster}" if cluster else "")
                        + ("" if removed else " (nothing to delete)"))
        return removed

    def register_topic(self, topic: str, queue_datas: Sequence[QueueData]) -> None:
        self._fake._call(lambda m: m.register_topic(topic, queue_datas))
        self._fake._log("admin", f"tcp: register topic {topic} on "
                        + ", ".join(q.broker_name for q in queue_datas))

    # ------------------------------------------------------------------ client reads

    def pickup_route(self, topic: str) -> TopicRouteData | None:
        if self.frozen is not None:
            return self.frozen.routes.get(topic)
        return self._fake.manager.pickup_route(topic)

    def cluster_info(self) -> ClusterInfo:
        view = self.frozen
        return view.cluster if view is not None else self._fake.manager.cluster_info()

    def all_topics(self) -> tuple[str, ...]:
        view = self.frozen
        return view.topics if view is not None else self._fake.manager.all_topics()

    def topics_by_cluster(self, cluster: str) -> tuple[str, ...]:
        if self.frozen is not None:
            return self.frozen.by_cluster.get(cluster, ())
        return self._fake.manager.topics_by_cluster(cluster)

    def system_topics(self) -> TopicList:
        view = self.frozen
        return view.system if view is not None else self._fake.manager.system_topics()

    def unit_topics(self) -> tuple[str, ...]:
        view = self.frozen
        return view.unit if view is not None else self._fake.manager.unit_topics()

    def has_unit_sub_topics(self) -> tuple[str, ...]:
        view = self.frozen
        return view.unit_sub if view is not None else self._fake.manager.has_unit_sub_topics()

    def has_unit_sub_non_unit_topics(self) -> tuple[str, ...]:
        view = self.frozen
        return (view.unit_sub_non_unit if view is not None
                else self._fake.manager.has_unit_sub_non_unit_topics())

    def broker_member_group(self, cluster: str, broker_name: str) -> BrokerMemberGroup:
        return self._fake.manager.broker_member_group(cluster, broker_name)
