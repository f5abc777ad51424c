"""RocketMQ's remoting protocol for `routing`: codec, body codecs, processor, asyncio hosts.

Four parts, and a small client, each a folder of private modules behind this one face:

* **wire** (``wire/``): `RemotingCommand`, `FrameDecoder`, `encode`/`decode`, the codes
  and the JSON bodies, sans-I/O; errors `ProtocolError` (`RemoteProtocolError` for the
  peer's bytes, `LocalProtocolError` for this side's commands);
* **processor** (``processor/``): `NameServerProcessor` maps each request onto the manager
  and answers an `Outcome`, no I/O; with its state `KVStore` and `NamesrvConfig`;
* **name-server host** (``nameserver/``): `NameServerHost` and `serve`/`run_server`
  (``routing serve``) run the processor over asyncio (`ListenError` when the address
  cannot be bound);
* **broker host** (``broker/``): `BrokerHost` and `serve_broker`/`run_broker`
  (``routing broker``) drive a `routing.heartbeat` ``BrokerHeartbeat`` over TCP; imported
  on first use of one of those names, so a name server never loads the broker side;
* **client** (``client/``): `query_route`/`query_route_async` ask a name server for a
  topic's route (``routing route``), `RouteQueryError` when no answer is usable.

The codec and the processor are sans-I/O: feed bytes to a `FrameDecoder`, hand each
`RemotingCommand` to `NameServerProcessor.process` with a channel handle, and write
``encode(outcome.response)`` back. See ``docs/remoting.md`` and ``docs/heartbeat.md``.

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

from typing import TYPE_CHECKING, Any

from .client._route_query import RouteQueryError, query_route, query_route_async
from .nameserver._connection import Channel
from .nameserver._host import NameServerHost
from .nameserver._serve import ListenError, run_server, serve
from .nameserver._shadow import SHADOW_REMARK, ShadowProcessor
from .processor._kv import KVConfigError, KVStore
from .processor._namesrv_config import (
    ConfigError,
    NamesrvConfig,
    help_text,
    load_properties_file,
    parse_properties,
)
from .processor._processor import NameServerProcessor
from .processor._request import Notification, Outcome
from .wire._bodies import (
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
from .wire._codec import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    RemotingCommand,
    encode,
)
from .wire._codes import (
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
from .wire._frame_decoder import FrameDecoder, decode

if TYPE_CHECKING:
    from .broker._host import BrokerHost
    from .broker._serve import run_broker, serve_broker

__all__ = [
    # wire: frames and codes
    "FLAG_ONEWAY", "FLAG_RESPONSE", "FrameDecoder", "RemotingCommand", "decode", "encode",
    "LocalProtocolError", "ProtocolError", "RemoteProtocolError",
    "CURRENT_VERSION", "MAX_FRAME_BYTES", "NAMESPACE_ORDER_TOPIC_CONFIG", "V3_0_11",
    "V4_9_4", "V5_0_0", "ZONE_MODE", "ZONE_NAME", "LanguageCode", "RequestCode",
    "ResponseCode", "SerializeType",
    # wire: bodies
    "RegisterBrokerBody", "body_crc32", "dumps_legacy", "dumps_standard", "loads",
    "decode_broker_member_group", "decode_cluster_info", "decode_data_version",
    "decode_kv_table", "decode_route", "decode_topic_list",
    "encode_broker_member_group", "encode_cluster_info", "encode_data_version",
    "encode_kv_table", "encode_route", "encode_topic_list",
    # processor and its state
    "NameServerProcessor", "Notification", "Outcome", "KVConfigError", "KVStore",
    "ConfigError", "NamesrvConfig", "help_text", "load_properties_file", "parse_properties",
    # name-server host
    "Channel", "ListenError", "NameServerHost", "run_server", "serve", "SHADOW_REMARK",
    "ShadowProcessor",
    # broker host
    "BrokerHost", "run_broker", "serve_broker",
    # client
    "RouteQueryError", "query_route", "query_route_async",
]

#: The broker host's names, imported on first use: a name server (``routing serve``,
#: ``routing fake``, the test kit's wire) never loads ``routing.heartbeat`` or the broker
#: host (about 15 ms of a process's start).
_BROKER = {"BrokerHost": "_host", "run_broker": "_serve", "serve_broker": "_serve"}


def __getattr__(name: str) -> Any:
    """`BrokerHost`, `run_broker` and `serve_broker`, loaded on first use. O(1) after it."""
    if name in _BROKER:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.broker.{_BROKER[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
