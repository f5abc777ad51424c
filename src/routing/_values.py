"""Route values: the immutable records the name server stores and returns.

All are frozen, slotted, keyword-only attrs classes, validated at construction (spec D7),
with ``to_json()``/``from_json()`` in RocketMQ's camelCase field names so a dump taken from a
real name server loads. Java counterparts live in ``remoting/.../protocol`` and ``common``.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Hashable
from typing import Any, TypeVar

import attrs

from . import _json as j
from ._errors import InvalidRequest
from ._frozen import FrozenMap, freeze_map
from ._validate import (
    attrs_optional,
    check_addr,
    check_int,
    check_name,
    non_negative,
    optional_addr,
    positive,
    queue_count,
    valid_addr,
    valid_bool,
    valid_int,
    valid_name,
    valid_topic,
)

__all__ = [
    "MASTER_ID",
    "BrokerAddr",
    "BrokerData",
    "BrokerLiveInfo",
    "DataVersion",
    "Perm",
    "QueueData",
    "TopicConfig",
    "TopicQueueMappingInfo",
    "TopicRouteData",
    "TopicSysFlag",
]

_T = TypeVar("_T")

#: ``MixAll.MASTER_ID``: the broker id of a group's master.
MASTER_ID = 0


class Perm(enum.IntFlag):
    """Topic permission bits (Java ``PermName``)."""

    INHERIT = 1
    WRITE = 2
    READ = 4
    PRIORITY = 8

    @staticmethod
    def to_string(perm: int) -> str:
        """Java ``perm2String``: ``6`` → ``"RW-"``."""
        return (
            ("R" if perm & Perm.READ else "-")
            + ("W" if perm & Perm.WRITE else "-")
            + ("X" if perm & Perm.INHERIT else "-")
        )


class TopicSysFlag(enum.IntFlag):
    """Topic system flags (Java ``TopicSysFlag``): unit and unit-sub bits."""

    UNIT = 1
    UNIT_SUB = 2


def _perm(value: Any) -> Perm:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 15:
        return Perm(value)
    raise InvalidRequest(f"perm must be an integer 0-15, got {value!r}", field="perm", value=value)


def _sys_flag(value: Any) -> TopicSysFlag:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 3:
        return TopicSysFlag(value)
    raise InvalidRequest(
        f"topic_sys_flag must be an integer 0-3, got {value!r}", field="topic_sys_flag", value=value
    )




def unchecked(cls: type[_T], **fields: Any) -> _T:
    """Build a frozen value from fields that are already valid, skipping validators and
    converters (internal hot paths only: rows derived from validated values). O(fields);
    a class without slots gets its ``__dict__`` in one step."""
    instance = object.__new__(cls)
    if "__slots__" not in cls.__dict__:
        object.__setattr__(instance, "__dict__", fields)
        return instance
    for name, value in fields.items():
        object.__setattr__(instance, name, value)
    return instance


# --------------------------------------------------------------------------- DataVersion


@attrs.frozen(kw_only=True, order=False)
class DataVersion:
    """Version of a broker's topic table (Java ``DataVersion``).

    Equality is on all three fields. Ordering is Java's ``compare``: ``state_version``, then
    ``counter``, then ``timestamp``. ``state_version`` is the master epoch in controller mode
    and 0 otherwise. ``timestamp`` is wall-clock ms.

    >>> v = DataVersion(timestamp=1_000, counter=1)
    >>> w = v.next(2_000)
    >>> (w.counter, w.timestamp, w > v)
    (2, 2000, True)
    """

    state_version: int = attrs.field(default=0, validator=valid_int)
    timestamp: int = attrs.field(default=0, validator=valid_int)
    counter: int = attrs.field(default=0, validator=valid_int)

    def next(self, now_ms: int, state_version: int = 0) -> DataVersion:
        """Java ``nextVersion(stateVersion)``: counter + 1, timestamp = now, given epoch.

        Like Java, the plain form resets ``state_version`` to 0.
        """
        return DataVersion(state_version=state_version, timestamp=now_ms, counter=self.counter + 1)

    def compare(self, other: DataVersion) -> int:
        """Java ``compare``: -1, 0 or 1 by (state_version, counter, timestamp)."""
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    def _key(self) -> tuple[int, int, int]:
        return (self.state_version, self.counter, self.timestamp)

    def __lt__(self, other: DataVersion) -> bool:
        return self._key() < other._key()

    def __le__(self, other: DataVersion) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: DataVersion) -> bool:
        return self._key() > other._key()

    def __ge__(self, other: DataVersion) -> bool:
        return self._key() >= other._key()

    def to_json(self) -> j.JsonDoc:
        return {"stateVersion": self.state_version, "timestamp": self.timestamp,
                "counter": self.counter}

    @classmethod
    @j.json_loader
    def from_json(cls, data: object) -> DataVersion:
        """Reads 5.x JSON and 4.x's (``timestatmp`` spelling, no ``stateVersion``)."""
        doc = j.document(data, "DataVersion")
        return cls(
            state_version=j.as_int(j.get(doc, "stateVersion", 0), "DataVersion.stateVersion"),
            timestamp=j.as_int(j.get(doc, "timestamp", 0, "timestatmp"), "DataVersion.timestamp"),
            counter=j.as_int(j.get(doc, "counter", 0), "DataVersion.counter"),
        )


# --------------------------------------------------------------------------- topics and queues


@attrs.frozen(kw_only=True)
class TopicConfig:
    """A topic as a broker hosts it (Java ``TopicConfig``). Defaults follow Java: 16/16, RW."""

    topic_name: str = attrs.field(validator=valid_topic)
    read_queue_nums: int = attrs.field(default=16, validator=queue_count)
    write_queue_nums: int = attrs.field(default=16, validator=queue_count)
    perm: Perm = attrs.field(default=Perm.READ | Perm.WRITE, converter=_perm)
    topic_filter_type: str = attrs.field(default="SINGLE_TAG")
    topic_sys_flag: TopicSysFlag = attrs.field(default=TopicSysFlag(0), converter=_sys_flag)
    order: bool = attrs.field(default=False, validator=valid_bool)
    attributes: FrozenMap[str, str] = attrs.field(factory=FrozenMap, converter=freeze_map)

    @topic_filter_type.validator
    def _check_filter_type(self, attribute: Any, value: Any) -> None:
        if value not in ("SINGLE_TAG", "MULTI_TAG"):
            raise InvalidRequest(
                f"TopicConfig.topic_filter_type must be 'SINGLE_TAG' or 'MULTI_TAG', got {value!r}",
                field="TopicConfig.topic_filter_type", value=value,
            )

    def to_queue_data(self, broker_name: str) -> QueueData:
        """Java ``createAndUpdateQueueData``'s conversion. ``broker_name`` must be valid."""
        return queue_row(self, check_name("broker_name", broker_name), self.perm)

    def to_json(self) -> j.JsonDoc:
        return {
            "topicName": self.topic_name, "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums, "perm": int(self.perm),
            "topicFilterType": self.topic_filter_type, "topicSysFlag": int(self.topic_sys_flag),
            "order": self.order, "attributes": dict(self.attributes),
        }

    @classmethod
    @j.json_loader
    def from_json(cls, data: object) -> TopicConfig:
        doc = j.document(data, "TopicConfig")
        attributes = j.as_mapping(j.get(doc, "attributes"), "TopicConfig.attributes")
        return cls(
            topic_name=j.need(doc, "topicName", "TopicConfig"),
            read_queue_nums=j.as_int(j.get(doc, "readQueueNums", 16), "TopicConfig.readQueueNums"),
            write_queue_nums=j.as_int(
                j.get(doc, "writeQueueNums", 16), "TopicConfig.writeQueueNums"),
            perm=j.as_int(j.get(doc, "perm", 6), "TopicConfig.perm"),
            topic_filter_type=j.get(doc, "topicFilterType", "SINGLE_TAG"),
            topic_sys_flag=j.as_int(j.get(doc, "topicSysFlag", 0), "TopicConfig.topicSysFlag"),
            order=j.get(doc, "order", False),
            attributes={_str(k, "attributes"): _str(v, "attributes")
                        for k, v in attributes.items()},
        )


def _check_str(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"{field} must be a string, got {value!r}", field=field, value=value)
    return value


def _str(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"{field} must hold strings, got {value!r}", field=field, value=value)
    return str(value)


@attrs.frozen(kw_only=True)
class QueueData:
    """One broker group's queues for one topic (Java ``QueueData``)."""

    broker_name: str = attrs.field(validator=valid_name)
    read_queue_nums: int = attrs.field(default=16, validator=queue_count)
    write_queue_nums: int = attrs.field(default=16, validator=queue_count)
    perm: Perm = attrs.field(default=Perm.READ | Perm.WRITE, converter=_perm)
    topic_sys_flag: TopicSysFlag = attrs.field(default=TopicSysFlag(0), converter=_sys_flag)

    @property
    def writable(self) -> bool:
        """True when the write bit is set."""
        return bool(self.perm & Perm.WRITE)

    def to_json(self) -> j.JsonDoc:
        return {
            "brokerName": self.broker_name, "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums, "perm": int(self.perm),
            "topicSysFlag": int(self.topic_sys_flag),
        }

    @classmethod
    @j.json_loader
    def from_json(cls, data: object) -> QueueData:
        doc = j.document(data, "QueueData")
        return cls(
            broker_name=j.need(doc, "brokerName", "QueueData"),
            read_queue_nums=j.as_int(j.get(doc, "readQueueNums", 16), "QueueData.readQueueNums"),
            write_queue_nums=j.as_int(j.get(doc, "writeQueueNums", 16), "QueueData.writeQueueNums"),
            perm=j.as_int(j.get(doc, "perm", 6), "QueueData.perm"),
            topic_sys_flag=j.as_int(j.get(doc, "topicSysFlag", 0), "QueueData.topicSysFlag"),
        )


def queue_row(config: TopicConfig, broker_name: str, perm: Perm) -> QueueData:
    """The row a group writes for ``config``, with ``perm`` (which may differ from the
    config's, e.g. without the write bit). Trusted: arguments must already be valid."""
    return unchecked(
        QueueData, broker_name=broker_name, read_queue_nums=config.read_queue_nums,
        write_queue_nums=config.write_queue_nums, perm=perm,
        topic_sys_flag=config.topic_sys_flag)


# --------------------------------------------------------------------------- brokers


def _broker_addrs(value: Any) -> FrozenMap[int, str]:
    addrs = freeze_map(value)
    for broker_id, addr in addrs.items():
        check_int("broker_addrs key (broker id)", broker_id, low=0)
        check_addr(f"broker_addrs[{broker_id}]", addr)
    return addrs


def _load_addrs(value: Any, field: str) -> dict[int, str]:
    return {j.as_int(k, f"{field} key"): v for k, v in j.as_mapping(value, field).items()}


@attrs.frozen(kw_only=True)
class BrokerData:
    """A broker group: master (id 0) and slaves (Java ``BrokerData``).

    Unlike Java's, it is immutable; `TopicRouteData.changed_from` reproduces Java's
    equality (name and addresses only) where clients need it.
    """

    cluster: str = attrs.field(validator=valid_name)
    broker_name: str = attrs.field(validator=valid_name)
    broker_addrs: FrozenMap[int, str] = attrs.field(factory=FrozenMap, converter=_broker_addrs)
    zone_name: str | None = attrs.field(default=None)
    enable_acting_master: bool = attrs.field(default=False, validator=valid_bool)

    @zone_name.validator
    def _check_zone(self, attribute: Any, value: Any) -> None:
        if value is not None and not isinstance(value, str):
            raise InvalidRequest(
                f"BrokerData.zone_name must be a string or None, got {value!r}",
                field="BrokerData.zone_name", value=value)

    def select_broker_addr(self, rng: random.Random | None = None) -> str:
        """The master's address, else a random member's (Java ``selectBrokerAddr``).

        Raises `InvalidRequest` for a group with no address (Java throws from ``nextInt(0)``).
        """
        master: str | None = self.broker_addrs.get(MASTER_ID)
        if master is not None:
            return master
        if not self.broker_addrs:
            raise InvalidRequest(
                f"BrokerData {self.broker_name!r} has no broker address to select",
                field="BrokerData.broker_addrs", value={})
        members = [self.broker_addrs[i] for i in sorted(self.broker_addrs)]
        return (rng or random).choice(members)

    def to_json(self) -> j.JsonDoc:
        return {
            "cluster": self.cluster, "brokerName": self.broker_name,
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
            "zoneName": self.zone_name, "enableActingMaster": self.enable_acting_master,
        }

    @classmethod
    @j.json_loader
    def from_json(cls, data: object) -> BrokerData:
        doc = j.document(data, "BrokerData")
        return cls(
            cluster=j.need(doc, "cluster", "BrokerData"),
            broker_name=j.need(doc, "brokerName", "BrokerData"),
            broker_addrs=_load_addrs(j.get(doc, "brokerAddrs"), "BrokerData.brokerAddrs"),
            zone_name=j.get(doc, "zoneName"),
            enable_acting_master=j.get(doc, "enableActingMaster", False),
        )


@attrs.frozen(kw_only=True)
class BrokerAddr:
    """The live-table key ``(cluster, addr)`` (Java ``BrokerAddrInfo``)."""

    cluster: str = attrs.field(validator=valid_name)
    addr: str = attrs.field(validator=valid_addr)

    def to_json(self) -> j.JsonDoc:
        return {"clusterName": self.cluster, "brokerAddr": self.addr}

    @classmethod
    @j.json_loader
    def from_json(cls, data: object) -> BrokerAddr:
        doc = j.document(data, "BrokerAddr")
        return cls(cluster=j.need(doc, "clusterName", "BrokerAddr"),
                   addr=j.need(doc, "brokerAddr", "BrokerAddr"))


@attrs.frozen(kw_only=True)
class BrokerLiveInfo:
    """Liveness of one broker address (Java ``BrokerLiveInfo``), plus our ``generation``.

    A broker expires when ``last_update_timestamp + heartbeat_timeout_ms < now`` (D1).
    ``channel`` is the host's connection handle and is not part of the JSON form.
    """

    last_update_timestamp: int = attrs.field(validator=non_negative)
    heartbeat_timeout_ms: int = attrs.field(
        default=120_000, validator=positive)
    data_version: DataVersion = attrs.field(factory=DataVersion)
    channel: Hashable | None = attrs.field(default=None, eq=False)
    ha_server_addr: str | None = attrs.field(default=None, validator=optional_addr)
    generation: int = attrs.field(default=0, validator=non_negative)

    @property
    def deadline_ms(self) -> int:
        """The last instant at which the broker is still alive (``last + timeout``)."""
        return self.last_update_timestamp + self.heartbeat_timeout_ms

    def is_expired(self, now_ms: int) -> bool:
        """D1: ``last + timeout < now`` (strict, as Java)."""
        return self.last_update_timestamp + self.heartbeat_timeout_ms < now_ms

    def to_json(self) -> j.JsonDoc:
        return {
            "lastUpdateTimestamp": self.last_update_timestamp,
            "heartbeatTimeoutMillis": self.heartbeat_timeout_ms,
            "dataVersion": self.data_version.to_json(), "haServerAddr": self.ha_server_addr,
            "generation": self.generation,
        }

    @classmethod
    @j.json_loader
    def from_json(cls, data: object) -> BrokerLiveInfo:
        doc = j.document(data, "BrokerLiveInfo")
        return cls(
            last_update_timestamp=j.as_int(
                j.need(doc, "lastUpdateTimestamp", "BrokerLiveInfo"),
                "BrokerLiveInfo.lastUpdateTimestamp"),
            heartbeat_timeout_ms=j.as_int(j.get(doc, "heartbeatTimeoutMillis", 120_000),
                                          "BrokerLiveInfo.heartbeatTimeoutMillis"),
            data_version=DataVersion.from_json(j.get(doc, "dataVersion") or {}),
            ha_server_addr=j.get(doc, "haServerAddr"),
            generation=j.as_int(j.get(doc, "generation", 0), "BrokerLiveInfo.generation"),
        )


# --------------------------------------------------------------------------- static topics


@attrs.frozen(kw_only=True)
class TopicQueueMappingInfo:
    """Static-topic mapping of one broker (Java ``TopicQueueMappingInfo``). Stored as given."""

    topic: str = attrs.field(validator=valid_topic)
    bname: str = attrs.field(validator=valid_name)
    scope: str = attrs.field(default="__global__")
    total_queues: int = attrs.field(default=0, validator=non_negative)
    epoch: int = attrs.field(default=0, validator=valid_int)
    dirty: bool = attrs.field(default=False, validator=valid_bool)
    curr_id_map: FrozenMap[int, int] = attrs.field(factory=FrozenMap, converter=freeze_map)

    def to_json(self) -> j.JsonDoc:
        return {
            "topic": self.topic, "scope": self.scope, "totalQueues": self.total_queues,
            "bname": self.bname, "epoch": self.epoch, "dirty": self.dirty,
            "currIdMap": {str(k): v for k, v in sorted(self.curr_id_map.items())},
        }

    @classmethod
    @j.json_loader
    def from_json(cls, data: object) -> TopicQueueMappingInfo:
        doc = j.document(data, "TopicQueueMappingInfo")
        ids = j.as_mapping(j.get(doc, "currIdMap"), "TopicQueueMappingInfo.currIdMap")
        return cls(
            topic=j.need(doc, "topic", "TopicQueueMappingInfo"),
            bname=j.need(doc, "bname", "TopicQueueMappingInfo"),
            scope=j.get(doc, "scope", "__global__"),
            total_queues=j.as_int(j.get(doc, "totalQueues", 0),
                                  "TopicQueueMappingInfo.totalQueues"),
            epoch=j.as_int(j.get(doc, "epoch", 0), "TopicQueueMappingInfo.epoch"),
            dirty=j.get(doc, "dirty", False),
            curr_id_map={j.as_int(k, "currIdMap key"): j.as_int(v, "currIdMap value")
                         for k, v in ids.items()},
        )


# --------------------------------------------------------------------------- routes


def _tuple_of(kind: type, value: Any) -> tuple[Any, ...]:
    items = tuple(value)
    for item in items:
        if not isinstance(item, kind):
            raise InvalidRequest(f"expected {kind.__name__} items, got {item!r:.80}", value=item)
    return items


def _queue_datas(value: Any) -> tuple[QueueData, ...]:
    return _tuple_of(QueueData, value)


def _broker_datas(value: Any) -> tuple[BrokerData, ...]:
    return _tuple_of(BrokerData, value)


def _filter_table(value: Any) -> FrozenMap[str, tuple[str, ...]]:
    table = freeze_map(value)
    if any(not isinstance(v, tuple) for v in table.values()):
        table = FrozenMap({k: tuple(v) for k, v in table.items()})
    return table


def _optional_map(value: Any) -> FrozenMap[Any, Any] | None:
    return None if value is None else freeze_map(value)


@attrs.frozen(kw_only=True)
class TopicRouteData:
    """Where a topic lives (Java ``TopicRouteData``): queue rows and their broker groups.

    Returned by `RouteInfoManager.pickup_route` sorted by broker name (D4), immutable, and
    shared between callers.
    """

    queue_datas: tuple[QueueData, ...] = attrs.field(default=(), converter=_queue_datas)
    broker_datas: tuple[BrokerData, ...] = attrs.field(
        default=(), converter=_broker_datas)
    filter_server_table: FrozenMap[str, tuple[str, ...]] = attrs.field(
        factory=FrozenMap, converter=_filter_table)
    order_topic_conf: str | None = attrs.field(default=None, validator=attrs_optional(_check_str))
    topic_queue_mapping_by_broker: FrozenMap[str, TopicQueueMappingInfo] | None = attrs.field(
        default=None, converter=_optional_map)

    @property
    def writable_queue_count(self) -> int:
        """Total write queues over the rows that carry the write bit."""
        return sum(q.write_queue_nums for q in self.queue_datas if q.perm & Perm.WRITE)

    def changed_from(self, old: TopicRouteData | None) -> bool:
        """Java ``topicRouteDataChanged``: compare sorted rows and groups with Java equality.

        Java's ``BrokerData.equals`` looks only at the name and the address map, so a change
        of zone or acting-master flag alone does not count as a change.
        """
        if old is None:
            return True

        def groups(route: TopicRouteData) -> list[tuple[str, FrozenMap[int, str]]]:
            return sorted(((b.broker_name, b.broker_addrs) for b in route.broker_datas),
                          key=lambda g: g[0])

        def rows(route: TopicRouteData) -> list[QueueData]:
            return sorted(route.queue_datas, key=lambda q: q.broker_name)

        return rows(self) != rows(old) or groups(self) != groups(old)

    def to_json(self) -> j.JsonDoc:
        doc: j.JsonDoc = {
            "orderTopicConf": self.order_topic_conf,
            "queueDatas": [q.to_json() for q in self.queue_datas],
            "brokerDatas": [b.to_json() for b in self.broker_datas],
            "filterServerTable": {k: list(v) for k, v in sorted(self.filter_server_table.items())},
        }
        if self.topic_queue_mapping_by_broker is not None:
            doc["topicQueueMappingByBroker"] = {
                k: v.to_json() for k, v in sorted(self.topic_queue_mapping_by_broker.items())}
        return doc

    @classmethod
    @j.json_loader
    def from_json(cls, data: object) -> TopicRouteData:
        doc = j.document(data, "TopicRouteData")
        mapping = j.get(doc, "topicQueueMappingByBroker")
        filters = j.as_mapping(j.get(doc, "filterServerTable"), "TopicRouteData.filterServerTable")
        return cls(
            order_topic_conf=j.get(doc, "orderTopicConf"),
            queue_datas=[QueueData.from_json(q) for q in
                         j.as_list(j.get(doc, "queueDatas"), "TopicRouteData.queueDatas")],
            broker_datas=[BrokerData.from_json(b) for b in
                          j.as_list(j.get(doc, "brokerDatas"), "TopicRouteData.brokerDatas")],
            filter_server_table={
                _str(k, "filterServerTable"): tuple(
                    _str(a, "filterServerTable") for a in j.as_list(v, "filterServerTable"))
                for k, v in filters.items()},
            topic_queue_mapping_by_broker=None if mapping is None else {
                k: TopicQueueMappingInfo.from_json(v)
                for k, v in j.as_mapping(mapping, "topicQueueMappingByBroker").items()},
        )

