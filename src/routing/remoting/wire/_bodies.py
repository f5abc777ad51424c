"""Body codecs of the name server's requests and responses, in both of Java's JSON dialects.

Java writes bodies with fastjson (``RemotingSerializable.encode``). Its default output is
the *legacy* dialect: bean fields in alphabetical order, null fields left out, and integer map
keys written **unquoted** (``{"brokerAddrs":{0:"10.0.0.1:10911"}}``), which is not JSON.
Clients at ``V4_9_4`` or later, or asking with ``acceptStandardJsonOnly``, get the
*standard* dialect for routes (``ClientRequestProcessor``): the same document with quoted
keys, maps sorted, non-ASCII escaped. Both are written deterministically (maps sorted), and
every decoder here accepts both.

Decoders raise `routing.InvalidRequest` naming what was wrong; they never raise anything
else on bad input.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Mapping
from typing import Any

import attrs

from ... import _json as j
from ..._errors import InvalidRequest
from ..._frozen import FrozenMap, freeze_map
from ..._messages import BrokerMemberGroup, ClusterInfo, TopicList, TopicTable
from ..._values import (
    BrokerData,
    DataVersion,
    TopicConfig,
    TopicQueueMappingInfo,
    TopicRouteData,
)
from ._codes import CURRENT_VERSION, V3_0_11, V5_0_0

__all__ = [
    "MAX_INFLATED_BYTES",
    "RegisterBrokerBody",
    "body_crc32",
    "decode_broker_member_group",
    "decode_cluster_info",
    "decode_data_version",
    "decode_kv_table",
    "decode_route",
    "decode_topic_list",
    "dumps_legacy",
    "dumps_standard",
    "encode_broker_member_group",
    "encode_cluster_info",
    "encode_data_version",
    "encode_kv_table",
    "encode_route",
    "encode_topic_list",
    "loads",
]

#: Cap on a compressed registration body once inflated (bytes); a bigger one is refused.
MAX_INFLATED_BYTES = 64 * 1024 * 1024

# A JSON string (skipped whole) or a bare integer object key (quoted by the fix-up).
_BARE_KEY = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(\s*:)', re.DOTALL)
_INT32 = struct.Struct(">i")


# --------------------------------------------------------------------------- JSON dialects


def loads(data: bytes | str, what: str = "body") -> Any:
    """Parse standard JSON or fastjson's legacy dialect (bare integer keys). O(len(data)).

    Raises `InvalidRequest` for anything else.
    """
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest(f"{what}: not valid UTF-8 ({exc})", field=what) from None
    else:
        text = data
    try:
        return json.loads(text)
    except RecursionError:
        raise InvalidRequest(f"{what}: JSON nested too deeply", field=what) from None
    except ValueError:
        pass
    fixed = _BARE_KEY.sub(lambda m: m.group(0) if m.group(1) is None
                          else f'{m.group(1)}"{m.group(2)}"{m.group(3)}', text)
    try:
        return json.loads(fixed)
    except (ValueError, RecursionError) as exc:
        raise InvalidRequest(f"{what}: malformed JSON ({exc})", field=what) from None


def _key_order(item: tuple[Any, Any]) -> tuple[int, Any]:
    key = item[0]
    return (0, key) if type(key) is int else (1, str(key))


def _write_legacy(value: Any, out: list[str]) -> None:
    if isinstance(value, Mapping):
        out.append("{")
        first = True
        for key, item in sorted(value.items(), key=_key_order):
            if item is None:
                continue
            if not first:
                out.append(",")
            first = False
            out.append(str(key) if type(key) is int else json.dumps(key, ensure_ascii=False))
            out.append(":")
            _write_legacy(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write_legacy(item, out)
        out.append("]")
    else:
        out.append(json.dumps(value, ensure_ascii=False))


def dumps_legacy(doc: Any) -> bytes:
    """fastjson's default output: sorted, nulls dropped, integer keys unquoted. UTF-8.
    O(size) plus the sorts."""
    out: list[str] = []
    _write_legacy(doc, out)
    return "".join(out).encode("utf-8")


def _standard(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _standard(v)
                for k, v in sorted(value.items(), key=_key_order) if v is not None}
    if isinstance(value, list | tuple):
        return [_standard(v) for v in value]
    return value


def dumps_standard(doc: Any) -> bytes:
    """Standard JSON as Java's ``BrowserCompatible, QuoteFieldNames, MapSortField`` writes it:
    keys quoted and sorted (integer keys numerically), nulls dropped, non-ASCII escaped.
    O(size) plus the sorts."""
    return json.dumps(_standard(doc), ensure_ascii=True, separators=(",", ":")).encode("ascii")


# --------------------------------------------------------------------------- documents


def _broker_doc(data: BrokerData) -> dict[str, Any]:
    return {"brokerAddrs": dict(data.broker_addrs), "brokerName": data.broker_name,
            "cluster": data.cluster, "enableActingMaster": data.enable_acting_master,
            "zoneName": data.zone_name}


def _mapping_doc(info: TopicQueueMappingInfo) -> dict[str, Any]:
    doc = info.to_json()
    doc["currIdMap"] = dict(info.curr_id_map)
    return doc


def _route_doc(route: TopicRouteData) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "brokerDatas": [_broker_doc(b) for b in route.broker_datas],
        "filterServerTable": {k: list(v) for k, v in route.filter_server_table.items()},
        "orderTopicConf": route.order_topic_conf,
        "queueDatas": [q.to_json() for q in route.queue_datas],
    }
    if route.topic_queue_mapping_by_broker is not None:
        doc["topicQueueMappingByBroker"] = {
            k: _mapping_doc(v) for k, v in route.topic_queue_mapping_by_broker.items()}
    return doc


def encode_route(route: TopicRouteData, *, standard: bool) -> bytes:
    """GET_ROUTEINFO_BY_TOPIC's body (Java ``TopicRouteData.encode``). O(route size).

    ``standard=True`` for clients at V4_9_4+ or asking ``acceptStandardJsonOnly``.
    """
    doc = _route_doc(route)
    return dumps_standard(doc) if standard else dumps_legacy(doc)


def decode_route(body: bytes) -> TopicRouteData:
    """A TopicRouteData body in either dialect (REGISTER_TOPIC_IN_NAMESRV, client side).
    O(body); raises `InvalidRequest`."""
    return TopicRouteData.from_json(loads(body, "TopicRouteData"))


def encode_data_version(version: DataVersion) -> bytes:
    """``DataVersion.encode``: ``{"counter":..,"stateVersion":..,"timestamp":..}``. O(1)."""
    return dumps_legacy(version.to_json())


def decode_data_version(body: bytes) -> DataVersion:
    """A DataVersion body (QUERY_DATA_VERSION). O(body); raises `InvalidRequest`."""
    return DataVersion.from_json(loads(body, "DataVersion"))


def encode_cluster_info(info: ClusterInfo, *, standard: bool = False) -> bytes:
    """GET_BROKER_CLUSTER_INFO's body. Java always writes the legacy dialect here.
    O(brokers)."""
    doc = {"brokerAddrTable": {k: _broker_doc(v) for k, v in info.broker_addr_table.items()},
           "clusterAddrTable": {k: sorted(v) for k, v in info.cluster_addr_table.items()}}
    return dumps_standard(doc) if standard else dumps_legacy(doc)


def decode_cluster_info(body: bytes) -> ClusterInfo:
    """A ClusterInfo body. O(body); raises `InvalidRequest`."""
    return ClusterInfo.from_json(loads(body, "ClusterInfo"))


def encode_topic_list(topics: TopicList | tuple[str, ...] | list[str]) -> bytes:
    """``TopicList.encode``: ``{"brokerAddr":..,"topicList":[..]}`` (address only if set).
    O(topics)."""
    if not isinstance(topics, TopicList):
        topics = TopicList(topics=tuple(topics))
    return dumps_legacy({"brokerAddr": topics.broker_addr, "topicList": list(topics.topics)})


def decode_topic_list(body: bytes) -> TopicList:
    """A TopicList body. O(body); raises `InvalidRequest`."""
    return TopicList.from_json(loads(body, "TopicList"))


def encode_kv_table(table: Mapping[str, str]) -> bytes:
    """``KVTable.encode``: ``{"table":{..}}``. O(entries)."""
    return dumps_legacy({"table": dict(table)})


def decode_kv_table(body: bytes) -> dict[str, str]:
    """A KVTable body. O(body); raises `InvalidRequest` naming a value that is not a string."""
    doc = j.document(loads(body, "KVTable"), "KVTable")
    table = j.as_mapping(j.get(doc, "table"), "KVTable.table")
    out: dict[str, str] = {}
    for key, value in table.items():
        if not isinstance(value, str):
            raise InvalidRequest(f"KVTable.table[{key!r}] must be a string, got {value!r:.40}",
                                 field="KVTable.table", value=value)
        out[key] = value
    return out


def encode_broker_member_group(group: BrokerMemberGroup) -> bytes:
    """GET_BROKER_MEMBER_GROUP's body (``GetBrokerMemberGroupResponseBody``), legacy.
    O(members)."""
    return dumps_legacy({"brokerMemberGroup": {
        "brokerAddrs": dict(group.broker_addrs), "brokerName": group.broker_name,
        "cluster": group.cluster}})


def decode_broker_member_group(body: bytes) -> BrokerMemberGroup:
    """A GetBrokerMemberGroupResponseBody. O(body); raises `InvalidRequest`."""
    doc = j.document(loads(body, "GetBrokerMemberGroupResponseBody"), "body")
    return BrokerMemberGroup.from_json(j.get(doc, "brokerMemberGroup") or {})


# --------------------------------------------------------------------------- registration


def body_crc32(data: bytes) -> int:
    """Java ``UtilAll.crc32``: CRC32 masked to 31 bits, as REGISTER_BROKER's ``bodyCrc32``.
    O(len(data)), in C (GB/s)."""
    return zlib.crc32(data) & 0x7FFFFFFF


def _topics(value: Any) -> FrozenMap[str, TopicConfig]:
    return freeze_map(value)


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class RegisterBrokerBody:
    """REGISTER_BROKER's body (Java ``RegisterBrokerBody``): the broker's topic table.

    ``encode``/``decode`` speak the JSON form and the 4.x deflate form (``compressed``
    header true). The deflate form, like Java's, does not carry ``topicSysFlag`` or
    ``order``; those come back as defaults. Both cost O(topics); a processor decodes a
    broker's repeated bodies faster (``processor/_register_broker.py``).
    """

    data_version: DataVersion = attrs.field(factory=DataVersion)
    topics: FrozenMap[str, TopicConfig] = attrs.field(factory=FrozenMap, converter=_topics)
    topic_queue_mappings: FrozenMap[str, TopicQueueMappingInfo] = attrs.field(
        factory=FrozenMap, converter=freeze_map)
    filter_servers: tuple[str, ...] = attrs.field(default=(), converter=_strings)

    def _wrapper_doc(self) -> dict[str, Any]:
        return {"dataVersion": self.data_version.to_json(),
                "topicConfigTable": {k: v.to_json() for k, v in self.topics.items()},
                "topicQueueMappingInfoMap": {
                    k: _mapping_doc(v) for k, v in self.topic_queue_mappings.items()}}

    def encode(self, *, compressed: bool = False, version: int = CURRENT_VERSION) -> bytes:
        """The body bytes. O(topics). ``version`` < V3_0_11 writes the bare wrapper."""
        if compressed:
            return self._deflate(version)
        if version < V3_0_11:
            return dumps_legacy(self._wrapper_doc())
        return dumps_legacy({"filterServerList": list(self.filter_servers),
                             "topicConfigSerializeWrapper": self._wrapper_doc()})

    @classmethod
    def decode(cls, data: bytes, *, compressed: bool = False,
               version: int = CURRENT_VERSION) -> RegisterBrokerBody:
        """Parse a body. ``version`` is the request's (the broker's) version. Raises
        `InvalidRequest`. Cost: O(body) (inflated size for the deflate form)."""
        if compressed:
            return cls._inflate(data, version)
        doc = j.document(loads(data, "RegisterBrokerBody"), "RegisterBrokerBody")
        if version < V3_0_11:
            wrapper, servers = doc, None
        else:
            wrapper = j.as_mapping(j.get(doc, "topicConfigSerializeWrapper"),
                                   "topicConfigSerializeWrapper")
            servers = j.get(doc, "filterServerList")
        return cls._from_wrapper(wrapper, servers)

    @classmethod
    @j.json_loader
    def _from_wrapper(cls, wrapper: Mapping[str, Any], servers: Any,
                      topics: TopicTable | None = None) -> RegisterBrokerBody:
        """The body of a parsed wrapper; ``topics``, when given, is its table already
        decoded (the processor's REGISTER_BROKER fast path, which memoises topic configs
        per processor: ``processor/_register_broker.py``)."""
        table = j.as_mapping(j.get(wrapper, "topicConfigTable"), "topicConfigTable")
        mappings = j.as_mapping(j.get(wrapper, "topicQueueMappingInfoMap"),
                                "topicQueueMappingInfoMap")
        if topics is None:
            # Java upserts by topicName, not the key; the table is checked as it is built
            topics = TopicTable.of_configs([TopicConfig.from_json(v) for v in table.values()])
        return cls(
            data_version=DataVersion.from_json(j.get(wrapper, "dataVersion") or {}),
            topics=topics,
            topic_queue_mappings={k: TopicQueueMappingInfo.from_json(v)
                                  for k, v in mappings.items()},
            filter_servers=tuple(_address_list(servers)),
        )

    # ----------------------------------------------------------------- deflate form

    def _deflate(self, version: int) -> bytes:
        parts: list[bytes] = []

        def chunk(payload: bytes) -> None:
            parts.append(_INT32.pack(len(payload)))
            parts.append(payload)

        chunk(encode_data_version(self.data_version))
        parts.append(_INT32.pack(len(self.topics)))
        for config in self.topics.values():
            chunk(_topic_text(config).encode("utf-8"))
        chunk(json.dumps(list(self.filter_servers), separators=(",", ":")).encode("utf-8"))
        if version >= V5_0_0:
            parts.append(_INT32.pack(len(self.topic_queue_mappings)))
            for info in self.topic_queue_mappings.values():
                chunk(dumps_legacy(_mapping_doc(info)))
        compressor = zlib.compressobj(9)
        return compressor.compress(b"".join(parts)) + compressor.flush()

    @classmethod
    def _inflate(cls, data: bytes, version: int) -> RegisterBrokerBody:
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(data, MAX_INFLATED_BYTES + 1)
        except zlib.error as exc:
            raise InvalidRequest(f"compressed RegisterBrokerBody: {exc}",
                                 field="RegisterBrokerBody") from None
        if len(raw) > MAX_INFLATED_BYTES:
            raise InvalidRequest(f"compressed RegisterBrokerBody inflates past "
                                 f"{MAX_INFLATED_BYTES} bytes", field="RegisterBrokerBody")
        reader = _Reader(raw)
        data_version = decode_data_version(reader.chunk("dataVersion"))
        topics = TopicTable.of_configs([
            _parse_topic_text(reader.chunk("topic config").decode("utf-8", "replace"))
            for _ in range(reader.count("topic count"))])
        servers = loads(reader.chunk("filterServerList"), "filterServerList")
        mappings: dict[str, TopicQueueMappingInfo] = {}
        if version >= V5_0_0:
            for _ in range(reader.count("mapping count")):
                info = TopicQueueMappingInfo.from_json(loads(reader.chunk("mapping"), "mapping"))
                mappings[info.topic] = info
        return cls(data_version=data_version, topics=topics, topic_queue_mappings=mappings,
                   filter_servers=tuple(_address_list(servers)))


def _address_list(value: Any) -> list[str]:
    items = j.as_list(value, "filterServerList")
    for item in items:
        if not isinstance(item, str):
            raise InvalidRequest(f"filterServerList items must be strings, got {item!r:.40}",
                                 field="filterServerList", value=item)
    return items


class _Reader:
    """Length-prefixed parts of the inflated registration body."""

    def __init__(self, raw: bytes) -> None:
        self.raw, self.pos = raw, 0

    def count(self, what: str) -> int:
        if len(self.raw) - self.pos < 4:
            raise InvalidRequest(f"compressed RegisterBrokerBody truncated at {what}",
                                 field="RegisterBrokerBody")
        (value,) = _INT32.unpack_from(self.raw, self.pos)
        self.pos += 4
        if not isinstance(value, int) or value < 0:
            raise InvalidRequest(f"compressed RegisterBrokerBody: negative {what} {value}",
                                 field="RegisterBrokerBody", value=value)
        return int(value)

    def chunk(self, what: str) -> bytes:
        size = self.count(f"{what} length")
        if size > len(self.raw) - self.pos:
            raise InvalidRequest(f"compressed RegisterBrokerBody: {what} of {size} bytes is "
                                 "truncated", field="RegisterBrokerBody", value=size)
        out = self.raw[self.pos:self.pos + size]
        self.pos += size
        return out


def _topic_text(config: TopicConfig) -> str:
    """Java ``TopicConfig.encode``: ``name read write perm filterType attributesJson``."""
    attributes = json.dumps(dict(sorted(config.attributes.items())), ensure_ascii=False,
                            separators=(",", ":"))
    return (f"{config.topic_name} {config.read_queue_nums} {config.write_queue_nums} "
            f"{int(config.perm)} {config.topic_filter_type} {attributes}")


@j.json_loader
def _parse_topic_text(text: str) -> TopicConfig:
    """Java ``TopicConfig.decode``; sys flag and order are not carried (Java loses them)."""
    parts = text.split(" ")
    if len(parts) < 5:
        raise InvalidRequest(f"compressed topic config {text[:80]!r} has fewer than 5 fields",
                             field="TopicConfig", value=text[:80])
    attributes: Any = {}
    if len(parts) > 5 and "".join(parts[5:]):
        attributes = loads(" ".join(parts[5:]), "TopicConfig.attributes")
    return TopicConfig(
        topic_name=parts[0], read_queue_nums=j.as_int(parts[1], "TopicConfig.readQueueNums"),
        write_queue_nums=j.as_int(parts[2], "TopicConfig.writeQueueNums"),
        perm=j.as_int(parts[3], "TopicConfig.perm"), topic_filter_type=parts[4],
        attributes=j.as_mapping(attributes, "TopicConfig.attributes"))
