"""`ManagerSnapshot`: everything a `RouteInfoManager` holds that decides its later answers,
as one immutable value with a compact JSON form (format 1).

`routing.snapshot_manager` takes one and `routing.restore_manager` builds a manager in
exactly that state (``_restore.py``); the journal writes them as ``snapshot`` records so a
replay can start in the middle of a journal (``docs/journal.md``). Java has no
counterpart: its ``RouteInfoManager`` keeps nothing across a restart.

What a snapshot holds: the settings, the start time (the readiness window counts from it)
and the latest time a call used (a clock stepping back is clamped to it), the last
registration generation and route version handed out, and the tables: clusters, groups
(members, zone, acting-master flag), topic rows with each topic's route version, live
entries (refresh time, timeout, data version, channel, HA address, generation, filter
servers) and static-topic mappings. What it leaves out never changes a later result, event
or route: the route objects and unit-flag sets (rebuilt from the rows), the deadline
heap's layout (rebuilt: the same deadlines), the caches of the unchanged-table and renewal
fast paths, and the tables' insertion order (no answer depends on it: listings sort,
removal batches sort, route versions are numbered in topic-name order). Every collection
is in key order, so equal states give equal snapshots and equal JSON.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from ._checked import Checked, int_in, items_of
from ._errors import InvalidRequest
from ._frozen import FrozenMap
from ._messages import RoutingConfig
from ._validate import (
    MAX_QUEUE_NUMS,
    attrs_check,
    attrs_optional,
    check_addr,
    check_hashable,
    check_int,
    check_name,
    check_topic,
    fail,
)
from ._values import (
    BrokerData,
    DataVersion,
    Perm,
    QueueData,
    TopicQueueMappingInfo,
    TopicSysFlag,
    unchecked,
)

__all__ = ["SNAPSHOT_FORMAT", "LiveSnapshot", "ManagerSnapshot", "TopicSnapshot"]

#: The version of the JSON form `ManagerSnapshot.to_json` writes and `from_json` reads.
SNAPSHOT_FORMAT = 1

_T = TypeVar("_T")

#: Turns a channel handle into JSON (and back); the journal numbers opaque handles.
ChannelCodec = Callable[[Any], Any]


def _strings(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(items)


def _queue_rows(items: Iterable[QueueData]) -> tuple[QueueData, ...]:
    return tuple(items)


def _plain_channel(channel: Any) -> Any:
    """The default codec: ``None``, a string or an integer pass as they are."""
    if channel is None or isinstance(channel, str) or (
            isinstance(channel, int) and not isinstance(channel, bool)):
        return channel
    raise InvalidRequest(f"channel {channel!r:.80} has no JSON form: pass encode_channel "
                         f"(routing.journal encodes any hashable handle)", field="channel",
                         value=channel)


@attrs.frozen(kw_only=True)
class LiveSnapshot:
    """One live entry (Java ``BrokerLiveInfo`` under its ``BrokerAddrInfo`` key), with the
    group it registered into and its filter servers. Times and timeout in ms."""

    cluster: str = attrs.field(validator=attrs_check(check_name))
    broker_addr: str = attrs.field(validator=attrs_check(check_addr))
    broker_name: str = attrs.field(validator=attrs_check(check_name))
    broker_id: int = attrs.field(validator=attrs_check(check_int, low=0))
    last_update_ms: int = attrs.field(validator=attrs_check(check_int, low=0))
    timeout_ms: int = attrs.field(validator=attrs_check(check_int, low=1))
    data_version: DataVersion = attrs.field(validator=attrs.validators.instance_of(DataVersion))
    #: The host's handle; compared by equality (two snapshots differ if a channel does).
    channel: Hashable | None = attrs.field(validator=attrs_check(check_hashable))
    ha_server_addr: str | None = attrs.field(validator=attrs_optional(check_addr))
    generation: int = attrs.field(validator=attrs_check(check_int, low=0))
    filter_servers: tuple[str, ...] = attrs.field(default=(), converter=_strings)

    def to_json(self, encode_channel: ChannelCodec = _plain_channel) -> list[Any]:
        """``[cluster, addr, broker_name, broker_id, last_update_ms, timeout_ms,
        [state_version, timestamp, counter], channel, ha_server_addr, generation,
        filter_servers]``. O(1)."""
        dv = self.data_version
        return [self.cluster, self.broker_addr, self.broker_name, self.broker_id,
                self.last_update_ms, self.timeout_ms,
                [dv.state_version, dv.timestamp, dv.counter], encode_channel(self.channel),
                self.ha_server_addr, self.generation, list(self.filter_servers)]

    @classmethod
    def from_json(cls, doc: object, decode_channel: ChannelCodec = _plain_channel,
                  where: str = "live", checked: Checked | None = None) -> LiveSnapshot:
        """The inverse of `to_json`; `InvalidRequest` naming ``where`` and the field.
        ``checked`` remembers the names and addresses already checked in the document."""
        c = checked if checked is not None else Checked()
        (cluster, addr, name, bid, last, timeout, dv, channel, ha, gen, filters) = items_of(
            doc, where, size=11)
        servers = items_of(filters, where, ".filter_servers")
        return live_snapshot(
            c.name(where, ".cluster", cluster), c.addr(where, ".broker_addr", addr),
            broker_name=c.name(where, ".broker_name", name),
            broker_id=int_in(where, ".broker_id", bid, 0),
            last_update_ms=int_in(where, ".last_update_ms", last, 0),
            timeout_ms=int_in(where, ".timeout_ms", timeout, 1),
            data_version=data_version(dv, where, ".data_version"),
            channel=decode_channel(channel),
            ha_server_addr=c.opt_addr(where, ".ha_server_addr", ha),
            generation=int_in(where, ".generation", gen, 0),
            filter_servers=tuple(c.addr(where, f".filter_servers[{i}]", x)
                                 for i, x in enumerate(servers)))


def data_version(value: object, where: str, part: str) -> DataVersion:
    """A `DataVersion` from ``[state_version, timestamp, counter]``, checked. O(1)."""
    sv, ts, counter = items_of(value, where, part, size=3)
    return unchecked(DataVersion, state_version=int_in(where, part + "[0]", sv),
                     timestamp=int_in(where, part + "[1]", ts),
                     counter=int_in(where, part + "[2]", counter))


@attrs.frozen(kw_only=True)
class TopicSnapshot:
    """One topic: its rows (one per group, in broker-name order) and its route version
    (`RouteInfoManager.route_version`; 0 before its first route)."""

    topic: str = attrs.field(validator=attrs_check(check_topic))
    version: int = attrs.field(validator=attrs_check(check_int, low=0))
    rows: tuple[QueueData, ...] = attrs.field(converter=_queue_rows)


@attrs.frozen(kw_only=True)
class ManagerSnapshot:
    """The state of one `RouteInfoManager` (see the module docstring for what is kept).

    Take one with `routing.snapshot_manager`, build a manager from it with
    `routing.restore_manager`. Immutable; equal for equal states. ``to_json`` /
    ``from_json`` give the JSON form (format `SNAPSHOT_FORMAT`), with channels through
    the given codec. Costs: O(state) to take, write, read or restore.
    """

    config: RoutingConfig = attrs.field(validator=attrs.validators.instance_of(RoutingConfig))
    #: When the manager was created (ms): the readiness window counts from it.
    started_ms: int = attrs.field(validator=attrs_check(check_int, low=0))
    #: The latest time (ms) a call used: a clock reading below it is clamped to it.
    last_ms: int = attrs.field(validator=attrs_check(check_int, low=0))
    #: The last registration generation handed out.
    generation: int = attrs.field(validator=attrs_check(check_int, low=0))
    #: The last route version handed out.
    route_version: int = attrs.field(validator=attrs_check(check_int, low=0))
    #: Cluster name -> its groups' names (Java ``clusterAddrTable``), both sorted.
    clusters: FrozenMap[str, tuple[str, ...]]
    #: Every group (Java ``brokerAddrTable``), by broker name.
    groups: tuple[BrokerData, ...]
    #: Every live entry, by (cluster, address).
    live: tuple[LiveSnapshot, ...]
    #: Every topic with a row, by name.
    topics: tuple[TopicSnapshot, ...]
    #: Every static-topic mapping, by (topic, broker name); they outlive the rows (Java).
    mappings: tuple[TopicQueueMappingInfo, ...] = ()

    def to_json(self, encode_channel: ChannelCodec = _plain_channel) -> dict[str, Any]:
        """The JSON form (``docs/journal.md``, "Snapshots"): top-level fields by name, the
        bulk as positional arrays; equal rows are written once (``rows``) and topics
        refer to them by index. ``encode_channel`` turns a channel into JSON (the default
        passes None, strings and integers and refuses the rest). O(state)."""
        pool: dict[tuple[str, int, int, int, int], int] = {}
        topics = []
        for t in self.topics:
            refs = []
            for q in t.rows:
                key = (q.broker_name, q.read_queue_nums, q.write_queue_nums, int(q.perm),
                       int(q.topic_sys_flag))
                index = pool.get(key)
                if index is None:
                    index = pool[key] = len(pool)
                refs.append(index)
            topics.append([t.topic, t.version, refs])
        return {
            "format": SNAPSHOT_FORMAT, "config": attrs.asdict(self.config),
            "started_ms": self.started_ms, "last_ms": self.last_ms,
            "generation": self.generation, "route_version": self.route_version,
            "clusters": {c: list(names) for c, names in self.clusters.items()},
            "groups": [[g.broker_name, g.cluster, g.zone_name, g.enable_acting_master,
                        [[i, a] for i, a in g.broker_addrs.items()]] for g in self.groups],
            "rows": [list(key) for key in pool],
            "topics": topics,
            "live": [entry.to_json(encode_channel) for entry in self.live],
            "mappings": [m.to_json() for m in self.mappings],
        }

    @classmethod
    def from_json(cls, doc: object, decode_channel: ChannelCodec = _plain_channel
                  ) -> ManagerSnapshot:
        """The inverse of `to_json`, every field checked: `InvalidRequest` naming the
        field (``snapshot.live[3].broker_addr``) on anything malformed, an unknown format
        or an unknown top-level field. Collections are put in key order (a snapshot
        written by `to_json` already is). Whether the tables agree with each other
        (rows of existing groups, ...) is checked by `routing.restore_manager`. O(size)."""
        if not isinstance(doc, Mapping):
            fail("snapshot", doc, "a JSON object")
        if doc.get("format") != SNAPSHOT_FORMAT:
            fail("snapshot.format", doc.get("format"), f"{SNAPSHOT_FORMAT} (this reader's)")
        unknown = sorted(set(doc) - _FIELDS)
        if unknown:
            raise InvalidRequest(f"snapshot: unknown field(s) {', '.join(map(repr, unknown))}",
                                 field="snapshot")
        missing = sorted(_FIELDS - set(doc) - {"mappings"})
        if missing:
            raise InvalidRequest(f"snapshot: missing field(s) {', '.join(map(repr, missing))}",
                                 field="snapshot")
        c = Checked()
        rows = [_row(item, f"snapshot.rows[{i}]", c)
                for i, item in enumerate(items_of(doc["rows"], "snapshot.rows"))]
        clusters = _mapping(doc["clusters"], "snapshot.clusters")
        live = [LiveSnapshot.from_json(item, decode_channel, f"snapshot.live[{i}]", c)
                for i, item in enumerate(items_of(doc["live"], "snapshot.live"))]
        return cls(
            config=_config(doc["config"]),
            started_ms=check_int("snapshot.started_ms", doc["started_ms"], low=0),
            last_ms=check_int("snapshot.last_ms", doc["last_ms"], low=0),
            generation=check_int("snapshot.generation", doc["generation"], low=0),
            route_version=check_int("snapshot.route_version", doc["route_version"], low=0),
            clusters=FrozenMap({c.name("snapshot.clusters", " key", k): tuple(sorted(
                c.name(f"snapshot.clusters[{k!r}]", "[]", n)
                for n in items_of(names, f"snapshot.clusters[{k!r}]")))
                for k, names in sorted(clusters.items())}),
            groups=_sorted([_group(item, f"snapshot.groups[{i}]", c)
                            for i, item in enumerate(items_of(doc["groups"], "snapshot.groups"))],
                           lambda g: g.broker_name),
            live=_sorted(live, lambda e: (e.cluster, e.broker_addr)),
            topics=_sorted([_topic(item, rows, f"snapshot.topics[{i}]", c)
                            for i, item in enumerate(items_of(doc["topics"], "snapshot.topics"))],
                           lambda t: t.topic),
            mappings=_sorted([_mapping_info(item, f"snapshot.mappings[{i}]") for i, item
                              in enumerate(items_of(doc.get("mappings", []), "snapshot.mappings"))],
                             lambda m: (m.topic, m.bname)),
        )


_FIELDS = frozenset({"format", "config", "started_ms", "last_ms", "generation",
                     "route_version", "clusters", "groups", "rows", "topics", "live",
                     "mappings"})
_CONFIG_FIELDS = frozenset(a.name for a in attrs.fields(RoutingConfig))


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        fail(where, value, "a JSON object")
    return value


def _config(value: object) -> RoutingConfig:
    doc = _mapping(value, "snapshot.config")
    unknown = sorted(set(doc) - _CONFIG_FIELDS)
    if unknown:
        raise InvalidRequest(f"snapshot.config: unknown field(s) "
                             f"{', '.join(map(repr, unknown))}", field="snapshot.config")
    return _named("snapshot.config", lambda: RoutingConfig(**dict(doc)))


def _named(where: str, build: Callable[[], _T]) -> _T:
    """``build()``, with a value's own `InvalidRequest` prefixed by ``where``."""
    try:
        return build()
    except InvalidRequest as exc:
        raise InvalidRequest(f"{where}: {exc}", field=where, value=exc.value) from None
    except TypeError as exc:  # a value class given a wrong keyword
        raise InvalidRequest(f"{where}: {exc}", field=where) from None


def _row(value: object, where: str, c: Checked) -> QueueData:
    name, read, write, perm, flag = items_of(value, where, size=5)
    return unchecked(QueueData, broker_name=c.name(where, "[0]", name),
                     read_queue_nums=int_in(where, "[1]", read, 0, MAX_QUEUE_NUMS),
                     write_queue_nums=int_in(where, "[2]", write, 0, MAX_QUEUE_NUMS),
                     perm=Perm(int_in(where, "[3]", perm, 0, 15)),
                     topic_sys_flag=TopicSysFlag(int_in(where, "[4]", flag, 0, 3)))


def _group(value: object, where: str, c: Checked) -> BrokerData:
    name, cluster, zone, acting, members = items_of(value, where, size=5)
    addrs: dict[int, str] = {}
    for i, pair in enumerate(items_of(members, where, ".members")):
        bid, addr = items_of(pair, where, f".members[{i}]", size=2)
        if int_in(where, f".members[{i}][0]", bid, 0) in addrs:
            fail(f"{where}.members[{i}][0]", bid, "a broker id listed once")
        addrs[bid] = c.addr(where, f".members[{i}][1]", addr)
    return unchecked(BrokerData, cluster=c.name(where, "[1]", cluster),
                     broker_name=c.name(where, "[0]", name),
                     broker_addrs=FrozenMap(dict(sorted(addrs.items()))),
                     zone_name=c.opt_name(where, "[2]", zone),
                     enable_acting_master=Checked.flag(where, "[3]", acting))


def _topic(value: object, rows: Sequence[QueueData], where: str, c: Checked) -> TopicSnapshot:
    topic, version, refs = items_of(value, where, size=3)
    picked = [rows[int_in(where, f".rows[{i}]", ref, 0, len(rows) - 1)]
              for i, ref in enumerate(items_of(refs, where, ".rows"))]
    if not picked:
        fail(f"{where}.rows", refs, "at least one row")
    if len({q.broker_name for q in picked}) != len(picked):
        fail(f"{where}.rows", refs, "one row per broker group")
    if len(picked) > 1:
        picked.sort(key=lambda q: q.broker_name)
    return unchecked(TopicSnapshot, topic=c.topic(where, "[0]", topic),
                     version=int_in(where, "[1]", version, 0), rows=tuple(picked))


def _mapping_info(value: object, where: str) -> TopicQueueMappingInfo:
    return _named(where, lambda: TopicQueueMappingInfo.from_json(_mapping(value, where)))


def _sorted(items: list[Any], key: Callable[[Any], Any]) -> tuple[Any, ...]:
    """``items`` in ``key`` order, each key once (`InvalidRequest` for a repeat)."""
    keyed = sorted(((key(item), item) for item in items), key=lambda pair: pair[0])
    for (a, _x), (b, _y) in itertools.pairwise(keyed):
        if a == b:
            raise InvalidRequest(f"snapshot: {a!r} is listed twice", field="snapshot", value=a)
    return tuple(item for _k, item in keyed)


def live_snapshot(cluster: str, addr: str, *, broker_name: str, broker_id: int,
                  last_update_ms: int, timeout_ms: int, data_version: DataVersion,
                  channel: Hashable | None, ha_server_addr: str | None, generation: int,
                  filter_servers: tuple[str, ...]) -> LiveSnapshot:
    """A `LiveSnapshot` from trusted fields, without the constructor's work (export)."""
    return unchecked(LiveSnapshot, cluster=cluster, broker_addr=addr,
                     broker_name=broker_name, broker_id=broker_id,
                     last_update_ms=last_update_ms, timeout_ms=timeout_ms,
                     data_version=data_version, channel=channel,
                     ha_server_addr=ha_server_addr, generation=generation,
                     filter_servers=filter_servers)
