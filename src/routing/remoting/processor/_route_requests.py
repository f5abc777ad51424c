"""Route and topic requests: GET_ROUTEINFO_BY_TOPIC (105) with its body cache, the cluster
(106) and the topic lists (206, 224, 304, 311-313), and the operator's
DELETE/REGISTER_TOPIC_IN_NAMESRV (216, 217). Java: ``ClientRequestProcessor`` (with
``ZoneRouteRPCHook``) and ``DefaultRequestProcessor``.

Each function is a request handler: ``(processor, request, fields, channel) -> Outcome``
(`routing.remoting.processor._request`); each costs the manager's read plus the body's
encoding, O(answer size). A route's body is cached (`RouteReads`), so a hot topic costs a
dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import attrs

from ..._errors import NotReady
from ..._values import MASTER_ID, BrokerData, TopicRouteData
from ..wire._bodies import decode_route, encode_cluster_info, encode_route, encode_topic_list
from ..wire._codec import RemotingCommand
from ..wire._codes import NAMESPACE_ORDER_TOPIC_CONFIG, V4_9_4, ZONE_MODE, ZONE_NAME, ResponseCode
from ._request import Context, Fields, Outcome, fail, ignored, null_field, ok

__all__ = ["RouteReads", "all_topics", "cluster_info", "delete_topic", "register_topic",
           "system_topics", "topics_by_cluster", "unit_sub_non_unit_topics", "unit_sub_topics",
           "unit_topics"]

_FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
#: Route bodies kept per processor (topic and dialect); past it the cache starts over.
_ROUTE_CACHE_LIMIT = 65_536


class RouteReads:
    """GET_ROUTEINFO_BY_TOPIC, with each route's body kept per (topic, dialect) for as long
    as the manager hands out the same route snapshot: at most ``_ROUTE_CACHE_LIMIT``
    bodies, one per processor. A hit costs one dictionary lookup and an identity test; a
    miss O(route size) to encode."""

    def __init__(self) -> None:
        self._bodies: dict[tuple[str, bool], tuple[TopicRouteData, bytes]] = {}

    def route(self, proc: Context, request: RemotingCommand, f: Fields,
              channel: Hashable | None) -> Outcome:
        topic = f.given("topic")
        if topic is None:  # Java looks up a null topic and finds none
            return fail(request, ResponseCode.TOPIC_NOT_EXIST, "No topic route info in name "
                        f"server for the topic: null ({null_field('topic')}){_FAQ}")
        standard = request.version >= V4_9_4 or bool(f.optional_bool("acceptStandardJsonOnly"))
        try:
            route = proc.manager.pickup_route(topic)
        except NotReady:
            return fail(request, ResponseCode.SYSTEM_ERROR, "name server not ready")
        if route is None:
            return fail(request, ResponseCode.TOPIC_NOT_EXIST,
                        f"No topic route info in name server for the topic: {topic}{_FAQ}")
        snapshot = route  # the manager's shared snapshot: its body can be cached
        if proc.manager.config.order_message_enable:
            conf = proc.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
            route = attrs.evolve(route, order_topic_conf=conf)
        zone = f.optional_text(ZONE_NAME)
        if zone is not None and zone.strip() and f.optional_bool(ZONE_MODE):
            route = _filter_by_zone(route, zone)  # Java's ZoneRouteRPCHook
        if route is not snapshot:
            return ok(request, body=encode_route(route, standard=standard))
        cached = self._bodies.get((topic, standard))
        if cached is not None and cached[0] is route:
            return ok(request, body=cached[1])
        body = encode_route(route, standard=standard)
        if len(self._bodies) >= _ROUTE_CACHE_LIMIT:
            self._bodies.clear()
        self._bodies[(topic, standard)] = (route, body)
        return ok(request, body=body)

    def proof(self, proc: Context, request: RemotingCommand,
              body: bytes) -> tuple[str, TopicRouteData] | None:
        """``(topic, snapshot)`` when ``body``, answered just now by `route` to
        ``request``, is the body cached for the snapshot (so that the answer depends on
        nothing but the snapshot and the request's bytes: order messages off, no zone
        filter that changed the route, no fresh encoding); else None. O(1)."""
        if proc.manager.config.order_message_enable:
            return None
        f = Fields(request)
        topic = f.given("topic")
        if topic is None:
            return None
        standard = request.version >= V4_9_4 or bool(f.optional_bool("acceptStandardJsonOnly"))
        cached = self._bodies.get((topic, standard))
        if cached is None or cached[1] is not body:
            return None
        return topic, cached[0]

    def current(self, proc: Context, proof: tuple[object, ...]) -> bool:
        """True when the route read `proof` proved is answered the same way now: order
        messages still off and the manager's snapshot of the topic the same object (a
        snapshot is immutable and replaced on every change of the route, D4). The
        manager's O(1)."""
        topic, snapshot = proof
        if proc.manager.config.order_message_enable:
            return False
        try:
            return proc.manager.pickup_route(str(topic)) is snapshot
        except Exception:  # not ready, or the manager failed: the ordinary way
            return False


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


def cluster_info(proc: Context, request: RemotingCommand, f: Fields,
                 channel: Hashable | None) -> Outcome:
    return ok(request, body=encode_cluster_info(proc.manager.cluster_info()))


def all_topics(proc: Context, request: RemotingCommand, f: Fields,
               channel: Hashable | None) -> Outcome:
    if not proc.enable_all_topic_list:
        return fail(request, ResponseCode.SYSTEM_ERROR, "disable")
    return ok(request, body=encode_topic_list(proc.manager.all_topics()))


def delete_topic(proc: Context, request: RemotingCommand, f: Fields,
                 channel: Hashable | None) -> Outcome:
    """A missing topic deletes nothing: SUCCESS, as Java's (`ignored`)."""
    topic, cluster = f.given("topic"), f.optional_text("clusterName")
    if topic is None:
        return ignored(request, null_field("topic"))
    proc.manager.delete_topic(topic, cluster)
    return ok(request)


def register_topic(proc: Context, request: RemotingCommand, f: Fields,
                   channel: Hashable | None) -> Outcome:
    topic = f.text("topic")
    if request.body:
        route = decode_route(request.body)
        if route.queue_datas:
            proc.manager.register_topic(topic, route.queue_datas)
    return ok(request)


def topics_by_cluster(proc: Context, request: RemotingCommand, f: Fields,
                      channel: Hashable | None) -> Outcome:
    if not proc.enable_topic_list:
        return fail(request, ResponseCode.SYSTEM_ERROR, "disable")
    cluster = f.given("cluster")
    if cluster is None:  # Java: no cluster of that name, an empty list
        return ok(request, body=encode_topic_list(()), remark=null_field("cluster"))
    return ok(request, body=encode_topic_list(proc.manager.topics_by_cluster(cluster)))


def system_topics(proc: Context, request: RemotingCommand, f: Fields,
                  channel: Hashable | None) -> Outcome:
    return ok(request, body=encode_topic_list(proc.manager.system_topics()))


def _topic_list(proc: Context, request: RemotingCommand,
                listing: Callable[[], tuple[str, ...]]) -> Outcome:
    if not proc.enable_topic_list:
        return fail(request, ResponseCode.SYSTEM_ERROR, "disable")
    return ok(request, body=encode_topic_list(listing()))


def unit_topics(proc: Context, request: RemotingCommand, f: Fields,
                channel: Hashable | None) -> Outcome:
    return _topic_list(proc, request, proc.manager.unit_topics)


def unit_sub_topics(proc: Context, request: RemotingCommand, f: Fields,
                    channel: Hashable | None) -> Outcome:
    return _topic_list(proc, request, proc.manager.has_unit_sub_topics)


def unit_sub_non_unit_topics(proc: Context, request: RemotingCommand, f: Fields,
                             channel: Hashable | None) -> Outcome:
    return _topic_list(proc, request, proc.manager.has_unit_sub_non_unit_topics)
