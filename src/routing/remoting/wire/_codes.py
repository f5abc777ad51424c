"""Numeric constants of RocketMQ's remoting protocol, as the Java name server uses them.

Java counterparts: ``RequestCode``, ``ResponseCode``/``RemotingSysResponseCode``,
``LanguageCode`` and ``SerializeType`` in ``remoting/.../protocol``, and the ordinals of
``MQVersion.Version`` in ``common``. Only the codes a name server answers (or sends) are
listed; any other request code is answered with `ResponseCode.REQUEST_CODE_NOT_SUPPORTED`.
"""

from __future__ import annotations

import enum

__all__ = [
    "CURRENT_VERSION",
    "MAX_FRAME_BYTES",
    "NAMESPACE_ORDER_TOPIC_CONFIG",
    "V3_0_11",
    "V4_9_4",
    "V5_0_0",
    "ZONE_MODE",
    "ZONE_NAME",
    "LanguageCode",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
]


class RequestCode(enum.IntEnum):
    """Request codes the name server handles, plus the one it sends (905). An
    ``IntEnum``: O(1) by value or name."""

    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_TOPIC_IN_NAMESRV = 216
    REGISTER_TOPIC_IN_NAMESRV = 217
    GET_KVLIST_BY_NAMESPACE = 219
    GET_TOPICS_BY_CLUSTER = 224
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    QUERY_DATA_VERSION = 322
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_BROKER_MEMBER_GROUP = 901
    BROKER_HEARTBEAT = 904
    NOTIFY_MIN_BROKER_ID_CHANGE = 905


class ResponseCode(enum.IntEnum):
    """Response codes a name server answers with (Java ``ResponseCode``). An ``IntEnum``:
    O(1) by value or name."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    QUERY_NOT_FOUND = 22
    INVALID_PARAMETER = 29


class LanguageCode(enum.IntEnum):
    """The client language byte of a command header (Java ``LanguageCode``).

    The binary header carries the number; the JSON header carries the name. An
    ``IntEnum``: O(1) by value or name.
    """

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


class SerializeType(enum.IntEnum):
    """How the header is written: the high byte of the header-length word. An
    ``IntEnum``: O(1)."""

    JSON = 0
    ROCKETMQ = 1


#: ``MQVersion.Version.V3_0_11.ordinal()``: from here on REGISTER_BROKER's body is a
#: RegisterBrokerBody; before it, a bare TopicConfigSerializeWrapper.
V3_0_11 = 37
#: ``MQVersion.Version.V4_9_4.ordinal()``: clients at or above it get standard JSON routes.
V4_9_4 = 401
#: ``MQVersion.Version.V5_0_0.ordinal()``: compressed registrations carry static-topic mappings.
V5_0_0 = 413
#: ``MQVersion.Version.V5_3_3.ordinal()``: the version this name server reports in responses.
CURRENT_VERSION = 479

#: Netty's ``com.rocketmq.remoting.frameMaxLength`` default: 16 MiB, length prefix included.
MAX_FRAME_BYTES = 16 * 1024 * 1024

#: ``MixAll.ZONE_NAME``: the ext field carrying a broker's or client's zone.
ZONE_NAME = "__ZONE_NAME"
#: ``MixAll.ZONE_MODE``: the ext field asking for zone-filtered routes.
ZONE_MODE = "__ZONE_MODE"
#: ``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``: the KV namespace of order-topic settings.
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
