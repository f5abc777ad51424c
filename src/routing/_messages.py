"""Requests, results, events and configuration of `RouteInfoManager`.

Like the route values they are frozen, slotted, keyword-only attrs classes validated at
construction, with RocketMQ-style camelCase JSON where Java has a counterpart.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any, Literal

import attrs

from . import _json as j
from ._errors import InvalidRequest
from ._frozen import FrozenMap, freeze_map
from ._validate import (
    MAX_QUEUE_NUMS,
    check_addr,
    check_name,
    check_topic,
    non_negative,
    optional_addr,
    optional_bool,
    optional_name,
    optional_non_negative,
    optional_positive,
    positive,
    queue_count,
    valid_addr,
    valid_bool,
    valid_name,
)
from ._values import BrokerAddr, BrokerData, DataVersion, TopicConfig, TopicQueueMappingInfo

__all__ = [
    "BrokerIdentity",
    "BrokerMemberGroup",
    "BrokerRegistered",
    "BrokerRemoved",
    "ClusterInfo",
    "ExpiredBroker",
    "MinBrokerIdChanged",
    "RegisterResult",
    "Registration",
    "RemovalReason",
    "RouteChange",
    "RoutingConfig",
    "TopicList",
    "TopicTable",
    "UnregisterRequest",
    "VersionAnswer",
]



class TopicTable(FrozenMap[str, TopicConfig]):
    """A registration's topic table, checked once: every value is a `TopicConfig` filed
    under its own ``topic_name``. `Registration` converts any mapping to one (O(T)) and
    takes one as it is (O(1)), so re-building a registration around a table it already
    checked (``attrs.evolve``, a decoder handing out a table it built) costs nothing per
    topic. Immutable and hashable like `FrozenMap`.

    `names_key` is the table's topic names in order, as one string made on first use: two
    tables with equal keys hold the same names, so a re-registration that decodes an equal
    copy of the last table is recognised by one string comparison (``memcmp``) instead of
    a dictionary probe per topic."""

    __slots__ = ("_names",)

    _names: str | None

    def __init__(self, data: Mapping[str, TopicConfig] | None = None) -> None:
        super().__init__(data)
        object.__setattr__(self, "_names", None)
        for key, config in self._data.items():
            if not isinstance(config, TopicConfig):
                raise InvalidRequest(
                    f"Registration.topics[{key!r}] must be a TopicConfig, got {config!r:.80}",
                    field=f"Registration.topics[{key!r}]", value=config)
            if key != config.topic_name:
                # Java keys deletion by the map key but upserts by topicName; we refuse
                # the mismatch.
                raise InvalidRequest(
                    f"Registration.topics key {key!r} differs from its topic_name "
                    f"{config.topic_name!r}", field="Registration.topics", value=key)

    @classmethod
    def of_configs(cls, configs: Iterable[TopicConfig]) -> TopicTable:
        """The table of ``configs`` by their names (a later name wins, as Java's upsert by
        ``topicName``), without a second pass: the keys are the names by construction.
        O(T). Raises `InvalidRequest` for a value that is not a `TopicConfig`."""
        table = cls.__new__(cls)
        data: dict[str, TopicConfig] = {}
        for config in configs:
            if type(config) is not TopicConfig and not isinstance(config, TopicConfig):
                raise InvalidRequest(f"expected a TopicConfig, got {config!r:.80}",
                                     field="Registration.topics", value=config)
            data[config.topic_name] = config
        if not data:
            return EMPTY_TOPICS
        object.__setattr__(table, "_data", data)
        object.__setattr__(table, "_hash", None)
        object.__setattr__(table, "_names", None)
        return table

    def names_key(self) -> str:
        """The topic names in table order joined by single spaces: equal keys mean the
        same names in the same order, exactly (a topic name has no whitespace: D7, checked
        by every `TopicConfig`, and each key is its config's ``topic_name``). O(T) on the
        first call (about 7 ns per topic here), O(1) after; the string is about the
        size of the names."""
        names = self._names
        if names is None:
            names = " ".join(self._data)
            object.__setattr__(self, "_names", names)
        return names

    def __reduce__(self) -> tuple[Any, ...]:
        return (TopicTable, (self._data,))


EMPTY_TOPICS = TopicTable()


def _topics(value: Any) -> TopicTable:
    if type(value) is TopicTable:
        return value
    if value is None or (not value and isinstance(value, Mapping)):
        return EMPTY_TOPICS  # one shared empty table
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"expected a mapping, got {value!r:.80}", value=value)
    return TopicTable(value)


def _mappings(value: Any) -> FrozenMap[str, TopicQueueMappingInfo]:
    table = freeze_map(value)
    for key, info in table.items():
        check_topic("Registration.topic_queue_mappings key", key)
        if not isinstance(info, TopicQueueMappingInfo):
            raise InvalidRequest(
                f"Registration.topic_queue_mappings[{key!r}] must be a TopicQueueMappingInfo",
                field="Registration.topic_queue_mappings", value=info)
    return table


def _filter_servers(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise InvalidRequest("Registration.filter_servers must be a list of addresses, not a str",
                             field="Registration.filter_servers", value=value)
    servers = tuple(value)
    for addr in servers:
        check_addr("Registration.filter_servers[]", addr)
    return servers


@attrs.frozen(kw_only=True)
class BrokerIdentity:
    """Who a broker is and where it listens, as it tells the name servers: the first fields
    of a `Registration` and of the broker side's ``BrokerConfig`` (Java ``BrokerIdentity``
    plus ``brokerIP1:listenPort`` and ``brokerIP2:haListenPort``). Each field is validated,
    an error naming ``<Class>.<field>``."""

    cluster: str = attrs.field(validator=valid_name)
    broker_name: str = attrs.field(validator=valid_name)
    broker_id: int = attrs.field(validator=non_negative)
    broker_addr: str = attrs.field(validator=valid_addr)
    ha_server_addr: str | None = attrs.field(default=None, validator=optional_addr)
    zone_name: str | None = attrs.field(default=None, validator=optional_name)


@attrs.frozen(kw_only=True)
class Registration(BrokerIdentity):
    """One REGISTER_BROKER request: header fields plus the topic table (Java §2.1).

    ``enable_acting_master=None`` means a pre-5.0 broker. ``heartbeat_timeout_ms=None`` means
    the configured default (120 000 ms). ``channel`` is any hashable connection handle.
    ``partial=True`` marks a split chunk or an incremental registration (D12): it never
    deletes topics by omission.
    """

    heartbeat_timeout_ms: int | None = attrs.field(default=None, validator=optional_positive)
    enable_acting_master: bool | None = attrs.field(
        default=None, validator=optional_bool)
    data_version: DataVersion = attrs.field(factory=DataVersion)
    topics: TopicTable = attrs.field(default=EMPTY_TOPICS, converter=_topics)
    topic_queue_mappings: FrozenMap[str, TopicQueueMappingInfo] = attrs.field(
        factory=FrozenMap, converter=_mappings)
    filter_servers: tuple[str, ...] | None = attrs.field(default=None, converter=_filter_servers)
    channel: Hashable | None = attrs.field(default=None, eq=False)
    partial: bool = attrs.field(default=False, validator=valid_bool)

    @data_version.validator
    def _check_version(self, attribute: Any, value: Any) -> None:
        if not isinstance(value, DataVersion):
            raise InvalidRequest(f"Registration.data_version must be a DataVersion, got {value!r}",
                                 field="Registration.data_version", value=value)

    @property
    def key(self) -> BrokerAddr:
        return BrokerAddr(cluster=self.cluster, addr=self.broker_addr)

    def to_json(self) -> j.JsonDoc:
        """Header fields plus ``topicConfigSerializeWrapper`` and ``filterServerList``."""
        return {
            "clusterName": self.cluster, "brokerName": self.broker_name,
            "brokerId": self.broker_id, "brokerAddr": self.broker_addr,
            "haServerAddr": self.ha_server_addr, "zoneName": self.zone_name,
            "heartbeatTimeoutMillis": self.heartbeat_timeout_ms,
            "enableActingMaster": self.enable_acting_master,
            "topicConfigSerializeWrapper": {
                "dataVersion": self.data_version.to_json(),
                "topicConfigTable": {k: v.to_json() for k, v in self.topics.items()},
                "topicQueueMappingInfoMap": {
                    k: v.to_json() for k, v in self.topic_queue_mappings.items()},
            },
            "filterServerList": None if self.filter_servers is None else list(self.filter_servers),
            "partial": self.partial,
        }

    @classmethod
    @j.json_loader
    def from_json(cls, data: object) -> Registration:
        doc = j.document(data, "Registration")
        wrapper = j.as_mapping(j.get(doc, "topicConfigSerializeWrapper"),
                               "Registration.topicConfigSerializeWrapper")
        table = j.as_mapping(j.get(wrapper, "topicConfigTable"), "topicConfigTable")
        mappings = j.as_mapping(j.get(wrapper, "topicQueueMappingInfoMap"),
                                "topicQueueMappingInfoMap")
        servers = j.get(doc, "filterServerList")
        return cls(
            cluster=j.need(doc, "clusterName", "Registration"),
            broker_name=j.need(doc, "brokerName", "Registration"),
            broker_id=j.as_int(j.need(doc, "brokerId", "Registration"), "Registration.brokerId"),
            broker_addr=j.need(doc, "brokerAddr", "Registration"),
            ha_server_addr=j.get(doc, "haServerAddr"),
            zone_name=j.get(doc, "zoneName"),
            heartbeat_timeout_ms=j.get(doc, "heartbeatTimeoutMillis"),
            enable_acting_master=j.get(doc, "enableActingMaster"),
            data_version=DataVersion.from_json(j.get(wrapper, "dataVersion") or {}),
            topics={k: TopicConfig.from_json(v) for k, v in table.items()},
            topic_queue_mappings={k: TopicQueueMappingInfo.from_json(v)
                                  for k, v in mappings.items()},
            filter_servers=None if servers is None else j.as_list(servers, "filterServerList"),
            partial=j.get(doc, "partial", False),
        )


@attrs.frozen(kw_only=True)
class MinBrokerIdChanged:
    """A NOTIFY_MIN_BROKER_ID_CHANGE (905) the host should send oneway (Java §2.13)."""

    cluster: str
    broker_name: str
    min_broker_id: int
    min_broker_addr: str
    offline_broker_addr: str | None
    ha_broker_addr: str | None
    #: The addresses to notify: all members if an address went offline or the group has
    #: one member, else every member except the one with the smallest id.
    recipients: tuple[str, ...]

    def to_json(self) -> j.JsonDoc:
        return {"brokerName": self.broker_name, "minBrokerId": self.min_broker_id,
                "minBrokerAddr": self.min_broker_addr,
                "offlineBrokerAddr": self.offline_broker_addr, "haBrokerAddr": self.ha_broker_addr}


@attrs.frozen(kw_only=True)
class RegisterResult:
    """What `RouteInfoManager.register` did (Java ``RegisterBrokerResult`` plus D3's fields).

    ``accepted`` is False for the two rejections of D3, with ``rejection`` saying why; then
    nothing changed. A slave's result carries its master's address and HA address.
    """

    accepted: bool
    rejection: str | None = None
    master_addr: str | None = None
    ha_server_addr: str | None = None
    #: The generation of the live entry this registration wrote (D2); None when rejected.
    generation: int | None = None
    notifications: tuple[MinBrokerIdChanged, ...] = ()

    def to_json(self) -> j.JsonDoc:
        return {"masterAddr": self.master_addr, "haServerAddr": self.ha_server_addr}


@attrs.frozen(kw_only=True)
class UnregisterRequest:
    """One UNREGISTER_BROKER request for `RouteInfoManager.unregister_many` (D2 fencing)."""

    cluster: str = attrs.field(validator=valid_name)
    broker_addr: str = attrs.field(validator=valid_addr)
    broker_name: str = attrs.field(validator=valid_name)
    broker_id: int = attrs.field(validator=non_negative)
    generation: int | None = attrs.field(default=None, validator=optional_non_negative)


@attrs.frozen(kw_only=True, slots=False)
class ExpiredBroker:
    """A broker `scan_expired`/`on_channel_closed` removed (D1). ``channel`` is for the host
    to close.

    Not slotted: one is built per removed broker on the expiry path, and a dict-backed
    value is built in one step by the manager's trusted constructor (`unchecked`); the
    values are short-lived, so the larger instance does not matter.
    """

    cluster: str
    broker_addr: str
    broker_name: str
    broker_id: int
    channel: Hashable | None = attrs.field(eq=False)
    last_update_ms: int
    timeout_ms: int
    generation: int


_new_object = object.__new__


def expired_broker(cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                   channel: Hashable | None, last_update_ms: int, timeout_ms: int,
                   generation: int) -> ExpiredBroker:
    """An `ExpiredBroker` from fields the manager already holds (validated when the broker
    registered), built as `_values.unchecked` builds values but without its keyword
    packing: about 0.3 µs against 0.5 µs for the keyword call, on the path of every
    expiry. Internal; positional in the class's field order."""
    broker = _new_object(ExpiredBroker)
    broker.__dict__.update(cluster=cluster, broker_addr=broker_addr, broker_name=broker_name,
                           broker_id=broker_id, channel=channel,
                           last_update_ms=last_update_ms, timeout_ms=timeout_ms,
                           generation=generation)
    return broker


@attrs.frozen(kw_only=True)
class VersionAnswer:
    """QUERY_DATA_VERSION's answer: ``changed`` and the stored version (None if unknown)."""

    changed: bool
    stored: DataVersion | None


@attrs.frozen(kw_only=True)
class ClusterInfo:
    """Snapshot of groups and clusters (Java ``ClusterInfo``; Java hands out live maps)."""

    broker_addr_table: FrozenMap[str, BrokerData] = attrs.field(converter=freeze_map)
    cluster_addr_table: FrozenMap[str, frozenset[str]] = attrs.field(converter=freeze_map)

    def to_json(self) -> j.JsonDoc:
        return {
            "brokerAddrTable": {k: v.to_json() for k, v in sorted(self.broker_addr_table.items())},
            "clusterAddrTable": {k: sorted(v) for k, v in sorted(self.cluster_addr_table.items())},
        }

    @classmethod
    @j.json_loader
    def from_json(cls, data: object) -> ClusterInfo:
        doc = j.document(data, "ClusterInfo")
        groups = j.as_mapping(j.get(doc, "brokerAddrTable"), "ClusterInfo.brokerAddrTable")
        clusters = j.as_mapping(j.get(doc, "clusterAddrTable"), "ClusterInfo.clusterAddrTable")
        return cls(
            broker_addr_table={k: BrokerData.from_json(v) for k, v in groups.items()},
            cluster_addr_table={
                check_name("ClusterInfo.clusterAddrTable key", k): frozenset(
                    check_name("ClusterInfo.clusterAddrTable value", n)
                    for n in j.as_list(v, "clusterAddrTable"))
                for k, v in clusters.items()},
        )


@attrs.frozen(kw_only=True)
class BrokerMemberGroup:
    """The members of one group (Java ``BrokerMemberGroup``, request 901)."""

    cluster: str
    broker_name: str
    broker_addrs: FrozenMap[int, str] = attrs.field(factory=FrozenMap, converter=freeze_map)

    def minimum_broker_id(self) -> int:
        """Smallest id, or 0 for an empty group (Java)."""
        return min(self.broker_addrs, default=0)

    def to_json(self) -> j.JsonDoc:
        return {"cluster": self.cluster, "brokerName": self.broker_name,
                "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())}}

    @classmethod
    @j.json_loader
    def from_json(cls, data: object) -> BrokerMemberGroup:
        doc = j.document(data, "BrokerMemberGroup")
        addrs = j.as_mapping(j.get(doc, "brokerAddrs"), "BrokerMemberGroup.brokerAddrs")
        return cls(cluster=check_name("BrokerMemberGroup.cluster", j.get(doc, "cluster")),
                   broker_name=check_name("BrokerMemberGroup.brokerName",
                                          j.get(doc, "brokerName")),
                   broker_addrs={j.as_int(k, "brokerAddrs key"): check_addr("brokerAddrs", v)
                                 for k, v in addrs.items()})


def _str_tuple(value: Any) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class TopicList:
    """A topic listing with an optional broker address (Java ``TopicList``)."""

    topics: tuple[str, ...] = attrs.field(converter=_str_tuple)
    broker_addr: str | None = None

    def to_json(self) -> j.JsonDoc:
        doc: j.JsonDoc = {"topicList": list(self.topics)}
        if self.broker_addr is not None:
            doc["brokerAddr"] = self.broker_addr
        return doc

    @classmethod
    @j.json_loader
    def from_json(cls, data: object) -> TopicList:
        doc = j.document(data, "TopicList")
        topics = j.as_list(j.get(doc, "topicList"), "TopicList.topicList")
        addr = j.get(doc, "brokerAddr")
        return cls(topics=tuple(sorted(check_name("TopicList.topicList[]", t) for t in topics)),
                   broker_addr=None if addr is None else check_addr("TopicList.brokerAddr", addr))


@attrs.frozen(kw_only=True)
class RoutingConfig:
    """Name-server settings that change routing (Java ``NamesrvConfig``, §1.12).

    ``scan_interval_ms`` is advice for hosts (the core never schedules anything): Java scans
    every 5 000 ms. ``wait_for_service_ms=None`` disables the readiness gate (D10); Java's
    ``needWaitForService`` uses 45 000 ms.
    """

    default_heartbeat_timeout_ms: int = attrs.field(
        default=120_000, validator=positive)
    support_acting_master: bool = attrs.field(default=False, validator=valid_bool)
    delete_topic_with_broker_registration: bool = attrs.field(
        default=False, validator=valid_bool)
    notify_min_broker_id_changed: bool = attrs.field(
        default=False, validator=valid_bool)
    wait_for_service_ms: int | None = attrs.field(
        default=None, validator=optional_non_negative)
    order_message_enable: bool = attrs.field(default=False, validator=valid_bool)
    max_queue_nums: int = attrs.field(
        default=MAX_QUEUE_NUMS, validator=queue_count)
    scan_interval_ms: int = attrs.field(default=5_000, validator=positive)


# --------------------------------------------------------------------------- events

RemovalReason = Literal["expired", "unregistered", "channel_closed"]


@attrs.frozen(kw_only=True)
class BrokerRegistered:
    """A registration was accepted. ``first`` is True when the address had no live entry."""

    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str
    generation: int
    first: bool


@attrs.frozen(kw_only=True)
class BrokerRemoved:
    """A live entry was removed, and with it the address's group memberships."""

    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str
    generation: int
    reason: RemovalReason
    last_update_ms: int


@attrs.frozen(kw_only=True)
class RouteChange:
    """What one write changed, handed to the listener after the write, outside the lock.

    ``changed_topics`` are the topics whose `pickup_route` answer changed.
    """

    at_ms: int
    operation: str
    changed_topics: frozenset[str] = frozenset()
    registered: tuple[BrokerRegistered, ...] = ()
    removed: tuple[BrokerRemoved, ...] = ()
    #: Min-broker-id notifications the host should send (also in `RegisterResult`).
    notifications: tuple[MinBrokerIdChanged, ...] = ()

