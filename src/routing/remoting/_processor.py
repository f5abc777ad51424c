"""`NameServerProcessor`: remoting requests in, responses and effects out, no I/O.

Java counterparts: ``DefaultRequestProcessor`` and ``ClientRequestProcessor`` (namesrv
``processor``), ``KVConfigManager`` (`KVStore`, optionally on disk), ``Configuration``
(`NamesrvConfig`, requests 318/319) and ``ZoneRouteRPCHook``. The
processor maps each request code onto a `routing.RouteInfoManager` call and answers with
Java's response codes and remarks. It never touches a socket: `Outcome` tells the host
what to write, which channels to close and which oneway notifications to send.

Differences from Java, all deliberate: UNREGISTER_BROKER is applied at once (Java queues
it); a rejected registration (spec D3) answers as Java does for each case but changes
nothing; REGISTER_TOPIC_IN_NAMESRV naming an unknown group answers SYSTEM_ERROR (Java
answers SUCCESS and may keep part of the rows); the zone filter keeps the client's JSON
dialect. Malformed headers and bodies answer SYSTEM_ERROR with a remark naming the field.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Protocol

import attrs

from .._errors import InvalidRequest, NotReady
from .._messages import (
    BrokerMemberGroup,
    ClusterInfo,
    ExpiredBroker,
    MinBrokerIdChanged,
    RegisterResult,
    Registration,
    RouteChange,
    RoutingConfig,
    TopicList,
    VersionAnswer,
)
from .._values import MASTER_ID, BrokerData, DataVersion, QueueData, TopicRouteData
from . import _admin as admin
from ._bodies import (
    decode_data_version,
    decode_route,
    encode_broker_member_group,
    encode_cluster_info,
    encode_data_version,
    encode_route,
    encode_topic_list,
)
from ._codec import FLAG_ONEWAY, RemotingCommand
from ._codes import (
    CURRENT_VERSION,
    NAMESPACE_ORDER_TOPIC_CONFIG,
    V4_9_4,
    ZONE_MODE,
    ZONE_NAME,
    RequestCode,
    ResponseCode,
)
from ._config import ConfigError, NamesrvConfig, from_routing
from ._kv import KVStore
from ._memo import RegistrationMemo
from ._outcome import Notification, Outcome
from ._register import Renew, register_broker

__all__ = ["KVStore", "NameServerProcessor", "Notification", "Outcome", "RouteManager"]

#: ``RemotingCommand.createResponseCommand(null)``'s remark, left on one SUCCESS answer.
_NO_CODE_REMARK = "not set any response code"
_FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_ROUTE_CACHE_LIMIT = 65_536
#: Registration bodies kept decoded, by count and by total bytes.
_BODY_CACHE_ENTRIES = 1_024
_BODY_CACHE_BYTES = 64 * 1024 * 1024
#: A version no broker sends, standing in for QUERY_DATA_VERSION's missing body.
_NO_VERSION = DataVersion(state_version=-1, timestamp=-1, counter=-1)


class RouteManager(Protocol):
    """What the processor needs: `routing.RouteInfoManager`, or anything with its methods
    (a ``routing.journal.JournalRecorder`` wrapping one, for example)."""

    @property
    def config(self) -> RoutingConfig: ...
    def register(self, registration: Registration) -> RegisterResult: ...
    def unregister(self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                   generation: int | None = None) -> bool: ...
    def query_data_version(self, *, cluster: str, broker_addr: str,
                           data_version: DataVersion) -> VersionAnswer: ...
    def heartbeat(self, *, cluster: str, broker_addr: str) -> bool: ...
    def scan_expired(self) -> tuple[ExpiredBroker, ...]: ...
    def on_channel_closed(self, channel: Hashable | None) -> tuple[ExpiredBroker, ...]: ...
    def pickup_route(self, topic: str) -> TopicRouteData | None: ...
    def wipe_write_perm(self, broker_name: str) -> int: ...
    def add_write_perm(self, broker_name: str) -> int: ...
    def delete_topic(self, topic: str, cluster: str | None = None) -> bool: ...
    def register_topic(self, topic: str, queue_datas: Sequence[QueueData]) -> None: ...
    def cluster_info(self) -> ClusterInfo: ...
    def all_topics(self) -> tuple[str, ...]: ...
    def topics_by_cluster(self, cluster: str) -> tuple[str, ...]: ...
    def system_topics(self) -> TopicList: ...
    def unit_topics(self) -> tuple[str, ...]: ...
    def has_unit_sub_topics(self) -> tuple[str, ...]: ...
    def has_unit_sub_non_unit_topics(self) -> tuple[str, ...]: ...
    def broker_member_group(self, cluster: str, broker_name: str) -> BrokerMemberGroup: ...


class _Fields:
    """Typed reads of a request's ext fields with Java's parsing (``decodeCommandCustomHeader``)."""

    __slots__ = ("ext",)

    def __init__(self, request: RemotingCommand) -> None:
        self.ext = request.ext_fields

    def text(self, name: str) -> str:
        value = self.ext.get(name)
        if value is None:
            raise InvalidRequest(f"the custom field <{name}> is null", field=name)
        return str(value)

    def optional_text(self, name: str) -> str | None:
        value = self.ext.get(name)
        return value if value else None

    def long(self, name: str) -> int:
        value = self.optional_long(name)
        if value is None:
            raise InvalidRequest(f"the custom field <{name}> is null", field=name)
        return value

    def optional_long(self, name: str) -> int | None:
        raw = self.ext.get(name)
        if raw is None:
            return None
        digits = raw[1:] if raw[:1] in ("-", "+") else raw
        if not digits.isascii() or not digits.isdigit():
            raise InvalidRequest(f"the custom field <{name}> is not an integer: {raw!r:.40}",
                                 field=name, value=raw)
        value = int(raw)
        if not _LONG_MIN <= value <= _LONG_MAX:
            raise InvalidRequest(f"the custom field <{name}> overflows a long: {raw!r:.40}",
                                 field=name, value=raw)
        return value

    def optional_bool(self, name: str) -> bool | None:
        raw = self.ext.get(name)
        return None if raw is None else raw.lower() == "true"  # Boolean.parseBoolean


_Handler = Callable[["NameServerProcessor", RemotingCommand, _Fields, "Hashable | None"], Outcome]


class NameServerProcessor:
    """Answers every routing request code from a `RouteInfoManager` (no I/O).

    ``manager`` may be any `RouteManager`, e.g. a journal recorder wrapping the manager.

    ``enable_all_topic_list``/``enable_topic_list``/``return_order_topic_config_to_broker``
    are ``NamesrvConfig``'s switches (all true by default). ``body_cache_entries`` bounds the
    number of brokers whose last registration is remembered, decoded (0 turns it off).

    ``renew_unchanged=True`` lets a master's unchanged re-registration go through the
    manager's ``renew`` (O(1), `routing.remoting._register`) when the manager has one; the
    reply is the same bytes. ``renew`` tells the manager's listener nothing, where
    ``register`` would hand it a `RouteChange` holding only ``BrokerRegistered(first=False)``
    (no changed topic, no notification): leave it off (the default) when a listener must
    see every re-registration. ``routing serve`` turns it on: its listener,
    `on_route_change`, reads removal notices only.
    Thread-safe as far as the manager is; a host may call `process` from several threads.
    Cost per call: the manager's cost plus O(body size) to decode and encode; route bodies
    are cached per route snapshot, so a hot GET_ROUTEINFO_BY_TOPIC costs one dictionary
    lookup to build.
    """

    def __init__(self, manager: RouteManager, *, kv: KVStore | None = None,
                 enable_all_topic_list: bool = True, enable_topic_list: bool = True,
                 return_order_topic_config_to_broker: bool = True,
                 body_cache_entries: int = _BODY_CACHE_ENTRIES,
                 settings: NamesrvConfig | None = None,
                 renew_unchanged: bool = False) -> None:
        self.manager = manager
        #: The manager's ``renew`` when ``renew_unchanged`` (see the class docstring).
        self._renew: Renew | None = (getattr(manager, "renew", None) if renew_unchanged
                                     else None)
        self.kv = kv if kv is not None else KVStore()
        if settings is None:
            settings = from_routing(manager.config, enable_all_topic_list=enable_all_topic_list,
                                    enable_topic_list=enable_topic_list,
                                    return_order_topic_config_to_broker=(
                                        return_order_topic_config_to_broker))
        self._settings = settings
        self.enable_all_topic_list = settings.enable_all_topic_list
        self.enable_topic_list = settings.enable_topic_list
        self.return_order_topic_config_to_broker = settings.return_order_topic_config_to_broker
        self._config_lock = threading.Lock()
        self._removal_notices = threading.local()
        self._opaques = itertools.count(1)
        self._route_cache: dict[tuple[str, bool], tuple[TopicRouteData, bytes]] = {}
        self._memo = RegistrationMemo(body_cache_entries, _BODY_CACHE_BYTES)

    # ------------------------------------------------------------------ entry points

    def process(self, request: RemotingCommand, channel: Hashable | None = None) -> Outcome:
        """Handle one decoded command from ``channel`` (any hashable connection handle).

        Never raises for bad input: unknown codes answer REQUEST_CODE_NOT_SUPPORTED, bad
        header fields or bodies SYSTEM_ERROR with a remark. Oneway requests are applied
        but get no response; incoming responses are ignored.
        """
        if request.is_response:
            return Outcome()
        handler = _HANDLERS.get(request.code)
        if handler is None:
            outcome = Outcome(response=request.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f" request type {request.code} not supported"))
        else:
            try:
                outcome = handler(self, request, _Fields(request), channel)
            except InvalidRequest as exc:
                outcome = Outcome(response=request.make_response(ResponseCode.SYSTEM_ERROR,
                                                                 str(exc)))
            except Exception as exc:  # Java's processor answers any throwable this way
                outcome = Outcome(response=request.make_response(
                    ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"), error=exc)
        if request.is_oneway and outcome.response is not None:
            outcome = attrs.evolve(outcome, response=None)
        return outcome

    def channel_closed(self, channel: Hashable | None) -> Outcome:
        """The host lost ``channel``: remove every broker registered on it (spec D6)."""
        self._take_removal_notices()
        removed = self.manager.on_channel_closed(channel)
        return Outcome(removed=removed, notifications=self._take_removal_notices())

    def scan(self) -> Outcome:
        """Expire silent brokers (Java ``scanNotActiveBroker``); close their channels."""
        self._take_removal_notices()
        expired = self.manager.scan_expired()
        close = tuple(dict.fromkeys(e.channel for e in expired if e.channel is not None))
        return Outcome(close=close, removed=expired,
                       notifications=self._take_removal_notices())

    def on_route_change(self, event: RouteChange) -> None:
        """A `routing.RouteInfoManager` listener: pass it as the manager's ``listener`` so
        that the min-broker-id notices of removals (unregister, scan, channel close; one
        per group per batch) reach `Outcome.notifications`. Registrations' notices come
        back in their result and need no listener."""
        if event.notifications and event.operation != "register":
            pending = getattr(self._removal_notices, "items", None)
            if pending is None:
                pending = self._removal_notices.items = []
            pending.extend(event.notifications)

    def _take_removal_notices(self) -> tuple[Notification, ...]:
        pending = getattr(self._removal_notices, "items", None)
        if not pending:
            return ()
        self._removal_notices.items = []
        return self._notifications(tuple(pending))

    # ------------------------------------------------------------------ settings

    @property
    def settings(self) -> NamesrvConfig:
        """Every setting as GET_NAMESRV_CONFIG reports it: the manager's `RoutingConfig`,
        this processor's switches, and the Java-only keys kept."""
        return attrs.evolve(self._settings, routing=self.manager.config,
                            enable_all_topic_list=self.enable_all_topic_list,
                            enable_topic_list=self.enable_topic_list,
                            return_order_topic_config_to_broker=(
                                self.return_order_topic_config_to_broker))

    def update_config(self, pairs: Iterable[tuple[str, str]]) -> tuple[str, ...]:
        """UPDATE_NAMESRV_CONFIG's effect: apply Java-named settings at once, all or none.

        Returns the keys ignored (unknown to Java and routing). Raises `ConfigError`
        naming the key and value of the first that does not parse; then nothing changed.
        Routing settings need a manager with ``reconfigure`` (a journal recorder has none:
        they are refused there, as the journal records the settings at start only).
        """
        with self._config_lock:
            current = self.settings
            new, ignored = current.update(pairs)
            if new.routing != current.routing:
                reconfigure = getattr(self.manager, "reconfigure", None)
                if reconfigure is None:
                    raise ConfigError("routing settings cannot change while journaling "
                                      f"({type(self.manager).__name__} has no reconfigure)")
                reconfigure(new.routing)
            self._settings = new
            self.enable_all_topic_list = new.enable_all_topic_list
            self.enable_topic_list = new.enable_topic_list
            self.return_order_topic_config_to_broker = new.return_order_topic_config_to_broker
        return ignored

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _ok(request: RemotingCommand, *, ext: Mapping[str, str] | None = None,
            body: bytes = b"") -> Outcome:
        return Outcome(response=request.make_response(ResponseCode.SUCCESS, ext_fields=ext,
                                                      body=body))

    @staticmethod
    def _fail(request: RemotingCommand, code: int, remark: str) -> Outcome:
        return Outcome(response=request.make_response(code, remark))

    def _notifications(self, notices: tuple[MinBrokerIdChanged, ...]) -> tuple[Notification, ...]:
        out = []
        for notice in notices:
            ext = {"minBrokerId": str(notice.min_broker_id), "brokerName": notice.broker_name,
                   "minBrokerAddr": notice.min_broker_addr}
            if notice.offline_broker_addr is not None:
                ext["offlineBrokerAddr"] = notice.offline_broker_addr
            if notice.ha_broker_addr is not None:
                ext["haBrokerAddr"] = notice.ha_broker_addr
            for addr in notice.recipients:
                out.append(Notification(addr=addr, command=RemotingCommand(
                    code=RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE, version=CURRENT_VERSION,
                    opaque=next(self._opaques) & 0x7FFFFFFF, flag=FLAG_ONEWAY,
                    ext_fields=ext)))
        return tuple(out)

    def _topic_list(self, request: RemotingCommand, listing: Callable[[], tuple[str, ...]],
                    *, gated: bool = True) -> Outcome:
        if gated and not self.enable_topic_list:
            return self._fail(request, ResponseCode.SYSTEM_ERROR, "disable")
        return self._ok(request, body=encode_topic_list(listing()))

    # ------------------------------------------------------------------ brokers

    def _unregister_broker(self, request: RemotingCommand, f: _Fields,
                           channel: Hashable | None) -> Outcome:
        self._take_removal_notices()
        self.manager.unregister(cluster=f.text("clusterName"), broker_addr=f.text("brokerAddr"),
                                broker_name=f.text("brokerName"), broker_id=f.long("brokerId"))
        return Outcome(response=request.make_response(ResponseCode.SUCCESS),
                       notifications=self._take_removal_notices())

    def _query_data_version(self, request: RemotingCommand, f: _Fields,
                            channel: Hashable | None) -> Outcome:
        f.text("brokerName")
        f.long("brokerId")
        cluster, addr = f.text("clusterName"), f.text("brokerAddr")
        version = decode_data_version(request.body) if request.body else _NO_VERSION
        answer = self.manager.query_data_version(cluster=cluster, broker_addr=addr,
                                                 data_version=version)
        changed = answer.changed or version is _NO_VERSION
        body = encode_data_version(answer.stored) if answer.stored is not None else b""
        return self._ok(request, ext={"changed": "true" if changed else "false"}, body=body)

    def _heartbeat(self, request: RemotingCommand, f: _Fields, channel: Hashable | None) -> Outcome:
        f.text("brokerName")
        self.manager.heartbeat(cluster=f.text("clusterName"), broker_addr=f.text("brokerAddr"))
        return self._ok(request)  # Java answers SUCCESS even for an unknown broker

    def _member_group(self, request: RemotingCommand, f: _Fields,
                      channel: Hashable | None) -> Outcome:
        group = self.manager.broker_member_group(f.text("clusterName"), f.text("brokerName"))
        # Java's getBrokerMemberGroup never clears createResponseCommand's default remark
        return Outcome(response=request.make_response(
            ResponseCode.SUCCESS, _NO_CODE_REMARK, body=encode_broker_member_group(group)))

    def _wipe_write_perm(self, request: RemotingCommand, f: _Fields,
                         channel: Hashable | None) -> Outcome:
        count = self.manager.wipe_write_perm(f.text("brokerName"))
        return self._ok(request, ext={"wipeTopicCount": str(count)})

    def _add_write_perm(self, request: RemotingCommand, f: _Fields,
                        channel: Hashable | None) -> Outcome:
        count = self.manager.add_write_perm(f.text("brokerName"))
        return self._ok(request, ext={"addTopicCount": str(count)})

    # ------------------------------------------------------------------ routes and topics

    def _route(self, request: RemotingCommand, f: _Fields, channel: Hashable | None) -> Outcome:
        topic = f.text("topic")
        standard = request.version >= V4_9_4 or bool(f.optional_bool("acceptStandardJsonOnly"))
        try:
            route = self.manager.pickup_route(topic)
        except NotReady:
            return self._fail(request, ResponseCode.SYSTEM_ERROR, "name server not ready")
        if route is None:
            return self._fail(request, ResponseCode.TOPIC_NOT_EXIST,
                              f"No topic route info in name server for the topic: {topic}{_FAQ}")
        snapshot = route  # the manager's shared snapshot: its body can be cached
        if self.manager.config.order_message_enable:
            conf = self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
            route = attrs.evolve(route, order_topic_conf=conf)
        zone = f.optional_text(ZONE_NAME)
        if zone is not None and zone.strip() and f.optional_bool(ZONE_MODE):
            route = _filter_by_zone(route, zone)  # Java's ZoneRouteRPCHook
        if route is not snapshot:
            return self._ok(request, body=encode_route(route, standard=standard))
        cached = self._route_cache.get((topic, standard))
        if cached is not None and cached[0] is route:
            return self._ok(request, body=cached[1])
        body = encode_route(route, standard=standard)
        if len(self._route_cache) >= _ROUTE_CACHE_LIMIT:
            self._route_cache.clear()
        self._route_cache[(topic, standard)] = (route, body)
        return self._ok(request, body=body)

    def _cluster_info(self, request: RemotingCommand, f: _Fields,
                      channel: Hashable | None) -> Outcome:
        return self._ok(request, body=encode_cluster_info(self.manager.cluster_info()))

    def _all_topics(self, request: RemotingCommand, f: _Fields,
                    channel: Hashable | None) -> Outcome:
        if not self.enable_all_topic_list:
            return self._fail(request, ResponseCode.SYSTEM_ERROR, "disable")
        return self._ok(request, body=encode_topic_list(self.manager.all_topics()))

    def _delete_topic(self, request: RemotingCommand, f: _Fields,
                      channel: Hashable | None) -> Outcome:
        topic, cluster = f.text("topic"), f.optional_text("clusterName")
        self.manager.delete_topic(topic, cluster)
        return self._ok(request)

    def _register_topic(self, request: RemotingCommand, f: _Fields,
                        channel: Hashable | None) -> Outcome:
        topic = f.text("topic")
        if request.body:
            route = decode_route(request.body)
            if route.queue_datas:
                self.manager.register_topic(topic, route.queue_datas)
        return self._ok(request)

    def _topics_by_cluster(self, request: RemotingCommand, f: _Fields,
                           channel: Hashable | None) -> Outcome:
        if not self.enable_topic_list:
            return self._fail(request, ResponseCode.SYSTEM_ERROR, "disable")
        cluster = f.text("cluster")
        return self._ok(request, body=encode_topic_list(self.manager.topics_by_cluster(cluster)))

    def _system_topics(self, request: RemotingCommand, f: _Fields,
                       channel: Hashable | None) -> Outcome:
        return self._ok(request, body=encode_topic_list(self.manager.system_topics()))

    def _unit_topics(self, request: RemotingCommand, f: _Fields,
                     channel: Hashable | None) -> Outcome:
        return self._topic_list(request, self.manager.unit_topics)

    def _unit_sub_topics(self, request: RemotingCommand, f: _Fields,
                         channel: Hashable | None) -> Outcome:
        return self._topic_list(request, self.manager.has_unit_sub_topics)

    def _unit_sub_non_unit_topics(self, request: RemotingCommand, f: _Fields,
                                  channel: Hashable | None) -> Outcome:
        return self._topic_list(request, self.manager.has_unit_sub_non_unit_topics)


def _filter_by_zone(route: TopicRouteData, zone: str) -> TopicRouteData:
    """Java ``ZoneRouteRPCHook``: keep groups of the client's zone, and groups without a
    master ("master down, break nearby rule"); drop the others' rows and filter servers."""
    kept: list[BrokerData] = []
    dropped: list[BrokerData] = []
    for data in route.broker_datas:
        master_down = MASTER_ID not in data.broker_addrs
        same_zone = data.zone_name is not None and data.zone_name.lower() == zone.lower()
        (kept if master_down or same_zone else dropped).append(data)
    if not dropped:
        return route
    gone = {d.broker_name for d in dropped}
    gone_addrs = {a for d in dropped for a in d.broker_addrs.values()}
    return attrs.evolve(
        route, broker_datas=tuple(kept),
        queue_datas=tuple(q for q in route.queue_datas if q.broker_name not in gone),
        filter_server_table={k: v for k, v in route.filter_server_table.items()
                             if k not in gone_addrs})


_P = NameServerProcessor
_HANDLERS: dict[int, _Handler] = {
    RequestCode.PUT_KV_CONFIG: admin.put_kv,
    RequestCode.GET_KV_CONFIG: admin.get_kv,
    RequestCode.DELETE_KV_CONFIG: admin.delete_kv,
    RequestCode.GET_KVLIST_BY_NAMESPACE: admin.kv_list,
    RequestCode.REGISTER_BROKER: register_broker,
    RequestCode.UNREGISTER_BROKER: _P._unregister_broker,
    RequestCode.QUERY_DATA_VERSION: _P._query_data_version,
    RequestCode.BROKER_HEARTBEAT: _P._heartbeat,
    RequestCode.GET_BROKER_MEMBER_GROUP: _P._member_group,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: _P._wipe_write_perm,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: _P._add_write_perm,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: _P._route,
    RequestCode.GET_BROKER_CLUSTER_INFO: _P._cluster_info,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: _P._all_topics,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: _P._delete_topic,
    RequestCode.REGISTER_TOPIC_IN_NAMESRV: _P._register_topic,
    RequestCode.GET_TOPICS_BY_CLUSTER: _P._topics_by_cluster,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: _P._system_topics,
    RequestCode.GET_UNIT_TOPIC_LIST: _P._unit_topics,
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: _P._unit_sub_topics,
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: _P._unit_sub_non_unit_topics,
    RequestCode.UPDATE_NAMESRV_CONFIG: admin.update_config,
    RequestCode.GET_NAMESRV_CONFIG: admin.get_config,
}
