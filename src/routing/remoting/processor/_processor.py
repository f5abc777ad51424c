"""`NameServerProcessor`: remoting requests in, responses and effects out, no I/O.

Java counterparts: ``DefaultRequestProcessor`` and ``ClientRequestProcessor`` (namesrv
``processor``), ``KVConfigManager`` (`KVStore`, optionally on disk), ``Configuration``
(`NamesrvConfig`, requests 318/319) and ``ZoneRouteRPCHook``. The
processor maps each request code onto a `routing.RouteInfoManager` call and answers with
Java's response codes and remarks. It never touches a socket: `Outcome` tells the host
what to write, which channels to close and which oneway notifications to send. The
handlers live by kind of request beside this module; this one holds the dispatch table,
the settings and the removal paths.

Differences from Java, all deliberate: UNREGISTER_BROKER is applied at once (Java queues
it); a rejected registration (spec D3) answers as Java does for each case but changes
nothing; REGISTER_TOPIC_IN_NAMESRV naming an unknown group answers SYSTEM_ERROR (Java
answers SUCCESS and may keep part of the rows); the zone filter keeps the client's JSON
dialect. Malformed headers and bodies answer SYSTEM_ERROR with a remark naming the field,
except where Java's lenient decoding answers a missing name with a "not found" or an
effect-free SUCCESS: then the same code, nothing written, the field named in the remark
(docs/java-parity.md, "Bad requests").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable

import attrs

from ..._errors import InvalidRequest
from ..._messages import ExpiredBroker, RouteChange
from ..._values import TopicRouteData
from ..wire._codec import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from ..wire._codes import RequestCode, ResponseCode
from . import _broker_requests as broker
from . import _operator_requests as operator
from . import _route_requests as routes
from ._kv import KVStore
from ._namesrv_config import ConfigError, NamesrvConfig, from_routing
from ._register_broker import BODY_CACHE_ENTRIES, RegisterBroker, Renew
from ._request import Fields, Notices, Outcome, RouteManager

__all__ = ["NameServerProcessor"]

_Handler = Callable[["NameServerProcessor", RemotingCommand, Fields, "Hashable | None"], Outcome]


class NameServerProcessor:
    """Answers every routing request code from a `RouteInfoManager` (no I/O).

    ``manager`` may be any `RouteManager`, e.g. a journal recorder wrapping the manager.

    ``enable_all_topic_list``/``enable_topic_list``/``return_order_topic_config_to_broker``
    are ``NamesrvConfig``'s switches (all true by default). ``body_cache_entries`` bounds the
    number of brokers whose last registration is remembered, decoded (0 turns it off).

    ``renew_unchanged=True`` lets a master's unchanged re-registration go through the
    manager's ``renew`` (O(1), ``processor/_register_broker.py``) when the manager has one; the
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
                 body_cache_entries: int = BODY_CACHE_ENTRIES,
                 settings: NamesrvConfig | None = None,
                 renew_unchanged: bool = False) -> None:
        self.manager = manager
        #: The manager's ``renew`` when ``renew_unchanged`` (see the class docstring).
        self._renew: Renew | None = (getattr(manager, "renew", None) if renew_unchanged
                                     else None)
        self.kv = kv if kv is not None else KVStore()
        #: The NOTIFY_MIN_BROKER_ID_CHANGE commands to send (`Notices`).
        self.notices = Notices()
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
        self._registrations = RegisterBroker(body_cache_entries, renew=self._renew)
        self._routes = routes.RouteReads()
        self._handlers: dict[int, _Handler] = {
            **_HANDLERS,
            RequestCode.REGISTER_BROKER: self._registrations.register_broker,
            RequestCode.UNREGISTER_BROKER: self._registrations.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self._routes.route}

    # ------------------------------------------------------------------ entry points

    def process(self, request: RemotingCommand, channel: Hashable | None = None) -> Outcome:
        """Handle one decoded command from ``channel`` (any hashable connection handle).

        Never raises for bad input: unknown codes answer REQUEST_CODE_NOT_SUPPORTED, bad
        header fields or bodies SYSTEM_ERROR with a remark. Oneway requests are applied
        but get no response; incoming responses are ignored.
        """
        flag = request.flag
        if flag & FLAG_RESPONSE:
            return Outcome()
        handler = self._handlers.get(request.code)
        if handler is None:
            outcome = Outcome(response=request.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f" request type {request.code} not supported"))
        else:
            try:
                outcome = handler(self, request, Fields(request), channel)
            except Exception as exc:
                outcome = self._failed(request, exc)
        if flag & FLAG_ONEWAY and outcome.response is not None:
            outcome = attrs.evolve(outcome, response=None)
        return outcome

    def _failed(self, request: RemotingCommand, exc: Exception) -> Outcome:
        """What `process` answers when a handler raised ``exc``: SYSTEM_ERROR with the
        message of an `InvalidRequest`, else with the exception's type and message (as
        Java's processor answers any throwable), keeping ``exc`` for the host to log."""
        if isinstance(exc, InvalidRequest):
            return Outcome(response=request.make_response(ResponseCode.SYSTEM_ERROR, str(exc)))
        return Outcome(response=request.make_response(
            ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"), error=exc)

    # ------------------------------------------------------------------ repeated requests

    #: A subclass that overrides `process` sets this True in its own body when its
    #: `process` hands BROKER_HEARTBEAT to this class's unchanged (see `plain_heartbeats`).
    heartbeats_unchanged = False
    #: The same for GET_ROUTEINFO_BY_TOPIC (see `plain_routes`).
    routes_unchanged = False

    @property
    def plain_heartbeats(self) -> bool:
        """True when a BROKER_HEARTBEAT is answered by `broker.heartbeat` exactly as
        `process` does it here, so that a host may serve a repeated one through `beat`
        and a remembered answer (``nameserver/_memo.py``): the handler is the standard
        one and every subclass that overrides `process` says it leaves heartbeats alone
        (a fault-injecting test processor does not). O(depth of the class tree)."""
        return self._plain(RequestCode.BROKER_HEARTBEAT, broker.heartbeat,
                           "heartbeats_unchanged")

    @property
    def plain_routes(self) -> bool:
        """True when a GET_ROUTEINFO_BY_TOPIC is answered by this processor's `RouteReads`
        exactly as `process` does it here (as `plain_heartbeats`), so that a host may
        serve a repeated one from a remembered answer while `route_current` holds (a
        shadow, which refuses route reads, does not). O(depth of the class tree)."""
        return self._plain(RequestCode.GET_ROUTEINFO_BY_TOPIC, self._routes.route,
                           "routes_unchanged")

    def _plain(self, code: int, handler: object, unchanged: str) -> bool:
        if self._handlers.get(code) != handler:
            return False
        for cls in type(self).__mro__:
            if cls is NameServerProcessor:
                return True
            if "process" in cls.__dict__ and not cls.__dict__.get(unchanged):
                return False
        return False

    def route_proof(self, request: RemotingCommand,
                    body: bytes) -> tuple[str, TopicRouteData] | None:
        """``(topic, snapshot)`` when ``body``, just answered to the GET_ROUTEINFO_BY_TOPIC
        ``request``, is the cached body of the manager's route snapshot for the request's
        topic and dialect (no order-topic config, no zone filtering changed it), so that
        the same request again may be answered with the same bytes as long as
        `route_current` holds; else None. Call it right after `process`. O(1)."""
        return self._routes.proof(self, request, body)

    def route_current(self, proof: tuple[object, ...]) -> bool:
        """True when a route read answered with `route_proof`'s ``proof`` would be
        answered with the same bytes now: the manager hands out the same route snapshot
        for the topic and order messages are still off (``processor/_route_requests.py``).
        The manager's O(1)."""
        return self._routes.current(self, proof)

    def beat(self, cluster: str, broker_addr: str) -> Exception | None:
        """The effect of a BROKER_HEARTBEAT of the broker ``(cluster, broker_addr)`` whose
        same header was answered plain SUCCESS before (so its fields are present and
        valid): the manager's liveness refresh. None when it is answered SUCCESS again
        (always, unless the manager raised), else the exception, for `failed_beat`. The
        manager's O(1)."""
        try:
            self.manager.heartbeat(cluster=cluster, broker_addr=broker_addr)
        except Exception as exc:  # (a journal's disk, for one)
            return exc
        return None

    def failed_beat(self, request: RemotingCommand, exc: Exception) -> Outcome:
        """The outcome `process` gives ``request`` (a BROKER_HEARTBEAT) when the
        manager's refresh raised ``exc`` (`beat`): SYSTEM_ERROR, or nothing for a oneway
        request. O(1)."""
        outcome = self._failed(request, exc)
        if request.flag & FLAG_ONEWAY:
            outcome = attrs.evolve(outcome, response=None)
        return outcome

    def channel_closed(self, channel: Hashable | None) -> Outcome:
        """The host lost ``channel``: remove every broker registered on it (spec D6).
        The manager's cost, O(brokers on the channel)."""
        self.notices.take_removals()
        removed = self._forget(self.manager.on_channel_closed(channel))
        return Outcome(removed=removed, notifications=self.notices.take_removals())

    def scan(self) -> Outcome:
        """Expire silent brokers (Java ``scanNotActiveBroker``); close their channels.
        The manager's cost, O(expired brokers) when nothing expired is due."""
        self.notices.take_removals()
        expired = self._forget(self.manager.scan_expired())
        close = tuple(dict.fromkeys(e.channel for e in expired if e.channel is not None))
        return Outcome(close=close, removed=expired,
                       notifications=self.notices.take_removals())

    def _forget(self, removed: tuple[ExpiredBroker, ...]) -> tuple[ExpiredBroker, ...]:
        for gone in removed:
            self._registrations.forget(gone.cluster, gone.broker_addr)
        return removed

    def on_route_change(self, event: RouteChange) -> None:
        """A `routing.RouteInfoManager` listener: pass it as the manager's ``listener`` so
        that the min-broker-id notices of removals (unregister, scan, channel close; one
        per group per batch) reach `Outcome.notifications`. Registrations' notices come
        back in their result and need no listener. O(notices)."""
        if event.notifications and event.operation != "register":
            self.notices.add_removals(event.notifications)

    # ------------------------------------------------------------------ settings

    @property
    def settings(self) -> NamesrvConfig:
        """Every setting as GET_NAMESRV_CONFIG reports it: the manager's `RoutingConfig`,
        this processor's switches, and the Java-only keys kept. O(1) (a new value)."""
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
        O(pairs), plus the manager's ``reconfigure`` when a routing setting changed.
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


_HANDLERS: dict[int, _Handler] = {
    RequestCode.PUT_KV_CONFIG: operator.put_kv,
    RequestCode.GET_KV_CONFIG: operator.get_kv,
    RequestCode.DELETE_KV_CONFIG: operator.delete_kv,
    RequestCode.GET_KVLIST_BY_NAMESPACE: operator.kv_list,
    RequestCode.QUERY_DATA_VERSION: broker.query_data_version,
    RequestCode.BROKER_HEARTBEAT: broker.heartbeat,
    RequestCode.GET_BROKER_MEMBER_GROUP: broker.member_group,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: broker.wipe_write_perm,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: broker.add_write_perm,
    RequestCode.GET_BROKER_CLUSTER_INFO: routes.cluster_info,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: routes.all_topics,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: routes.delete_topic,
    RequestCode.REGISTER_TOPIC_IN_NAMESRV: routes.register_topic,
    RequestCode.GET_TOPICS_BY_CLUSTER: routes.topics_by_cluster,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: routes.system_topics,
    RequestCode.GET_UNIT_TOPIC_LIST: routes.unit_topics,
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: routes.unit_sub_topics,
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: routes.unit_sub_non_unit_topics,
    RequestCode.UPDATE_NAMESRV_CONFIG: operator.update_config,
    RequestCode.GET_NAMESRV_CONFIG: operator.get_config,
}
