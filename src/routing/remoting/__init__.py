"""RocketMQ's remoting protocol for `routing`: codec, body codecs, processor, asyncio host.

The codec and the processor are sans-I/O: feed bytes to a `FrameDecoder`, hand each
`RemotingCommand` to `NameServerProcessor.process` with a channel handle, and write
``encode(outcome.response)`` back. `serve`/`run_server` (``routing serve``) do exactly that
with asyncio. The broker side is `BrokerHost` (``routing broker``): a `routing.heartbeat`
``BrokerHeartbeat`` driven over TCP. See ``docs/remoting.md`` and ``docs/heartbeat.md``.

>>> import routing as r
>>> from routing import remoting as rm
>>> proc = rm.NameServerProcessor(r.RouteInfoManager(clock=r.ManualClock(start_ms=0)))
>>> request = rm.RemotingCommand(code=rm.RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=1,
...                              ext_fields={"topic": "TopicTest"})
>>> frame = rm.encode(request)
>>> [cmd] = rm.FrameDecoder().feed(frame)
>>> out = proc.process(cmd, channel="conn-1")
>>> rm.ResponseCode(out.response.code).name, out.response.opaque
('TOPIC_NOT_EXIST', 1)
"""

from ._bodies import (
    RegisterBrokerBody,
    body_crc32,
    decode_broker_member_group,
    decode_cluster_info,
    decode_data_version,
    decode_kv_table,
    decode_route,
    decode_topic_list,
    dumps_legacy,
    dumps_standard,
    encode_broker_member_group,
    encode_cluster_info,
    encode_data_version,
    encode_kv_table,
    encode_route,
    encode_topic_list,
    loads,
)
from ._broker_host import BrokerHost
from ._broker_run import run_broker, serve_broker
from ._client import RouteQueryError, query_route, query_route_async
from ._codec import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    FrameDecoder,
    ProtocolError,
    RemotingCommand,
    decode,
    encode,
)
from ._codes import (
    CURRENT_VERSION,
    MAX_FRAME_BYTES,
    NAMESPACE_ORDER_TOPIC_CONFIG,
    V3_0_11,
    V4_9_4,
    V5_0_0,
    ZONE_MODE,
    ZONE_NAME,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from ._config import ConfigError, NamesrvConfig, load_properties_file, parse_properties
from ._kv import KVConfigError, KVStore
from ._processor import NameServerProcessor, Notification, Outcome
from ._run import run_server, serve
from ._server import Channel, NameServerHost

__all__ = [
    "CURRENT_VERSION",
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "MAX_FRAME_BYTES",
    "NAMESPACE_ORDER_TOPIC_CONFIG",
    "V3_0_11",
    "V4_9_4",
    "V5_0_0",
    "ZONE_MODE",
    "ZONE_NAME",
    "BrokerHost",
    "Channel",
    "ConfigError",
    "FrameDecoder",
    "KVConfigError",
    "KVStore",
    "LanguageCode",
    "NameServerHost",
    "NameServerProcessor",
    "NamesrvConfig",
    "Notification",
    "Outcome",
    "ProtocolError",
    "RegisterBrokerBody",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "RouteQueryError",
    "SerializeType",
    "body_crc32",
    "decode",
    "decode_broker_member_group",
    "decode_cluster_info",
    "decode_data_version",
    "decode_kv_table",
    "decode_route",
    "decode_topic_list",
    "dumps_legacy",
    "dumps_standard",
    "encode",
    "encode_broker_member_group",
    "encode_cluster_info",
    "encode_data_version",
    "encode_kv_table",
    "encode_route",
    "encode_topic_list",
    "load_properties_file",
    "loads",
    "parse_properties",
    "query_route",
    "query_route_async",
    "run_broker",
    "run_server",
    "serve",
    "serve_broker",
]
