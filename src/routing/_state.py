"""The name server's tables and the indexes kept beside them.

Base tables mirror Java's ``RouteInfoManager`` fields. Every mutation goes through a method
here that keeps the indexes in step and records which topics it touched, so the manager can
rebuild exactly those routes afterwards. Nothing here takes locks or reads clocks; the
manager does both.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection, Hashable, ItemsView, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, TypeVar

from ._deadlines import DeadlineIndex
from ._frozen import FrozenMap
from ._values import BrokerAddr, BrokerData, DataVersion, QueueData, TopicRouteData
from ._values import TopicQueueMappingInfo as MappingInfo

if TYPE_CHECKING:
    from ._messages import Registration, VersionAnswer

__all__ = ["Group", "Live", "State", "TopicEntry"]

LiveKey = tuple[str, str]  # (cluster, addr): Java's BrokerAddrInfo


class TopicEntry(MutableMapping[str, QueueData]):
    """One topic: its rows by broker name (Java ``topicQueueTable[topic]``; the entry *is*
    that mapping), and the route snapshot and version the manager derived from them.
    Keeping them in one object means a topic costs one lookup in one large table whether
    it is read, rebuilt or dropped.

    Most topics have one row: it is held inline (two slots), and a dict exists only while
    the topic has several (a one-entry dict costs about 200 B). ``version`` is 0 until the
    manager first builds the topic; the entry (and with it the route and version) goes
    when the topic's last row goes. Entries compare as mappings; the indexes that hold
    them rely on identity. Every operation O(1) (iteration O(rows)).
    """

    __slots__ = ("_many", "_name", "_row", "route", "version")

    def __init__(self) -> None:
        self._name: str | None = None  # the one row's broker name, when there is one
        self._row: QueueData | None = None
        self._many: dict[str, QueueData] | None = None  # every row, when several
        self.route: TopicRouteData | None = None
        self.version = 0

    def __getitem__(self, name: str) -> QueueData:
        if self._many is not None:
            return self._many[name]
        if name == self._name and self._row is not None:
            return self._row
        raise KeyError(name)

    def get(self, name: str, default: Any = None) -> Any:
        if self._many is not None:
            return self._many.get(name, default)
        return self._row if name == self._name else default

    def __contains__(self, name: object) -> bool:
        many = self._many
        return name in many if many is not None else name == self._name

    def __setitem__(self, name: str, row: QueueData) -> None:
        many = self._many
        if many is not None:
            many[name] = row
        elif self._name is None or self._name == name:
            self._name, self._row = name, row
        else:
            assert self._row is not None
            self._many = {self._name: self._row, name: row}
            self._name = self._row = None

    def __delitem__(self, name: str) -> None:
        many = self._many
        if many is not None:
            del many[name]
            if len(many) == 1:
                ((self._name, self._row),) = many.items()
                self._many = None
        elif name == self._name and self._name is not None:
            self._name = self._row = None
        else:
            raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        if self._many is not None:
            return iter(self._many)
        return iter(() if self._name is None else (self._name,))

    def __len__(self) -> int:
        if self._many is not None:
            return len(self._many)
        return 0 if self._name is None else 1

    def items(self) -> ItemsView[str, QueueData]:
        if self._many is not None:
            return self._many.items()
        return ItemsView(self)


class Group:
    """One broker group (Java ``BrokerData``), mutable inside the manager only.

    Members (broker id -> address, Java ``brokerAddrs``): nearly every group has one, held
    inline in two slots; a dict exists only while the group has several (a one-entry dict
    costs 224 B, a third of a live broker's memory). Writers go through `set_member` and
    `del_member`; readers use `member` (O(1), no allocation) or `min_id`, and `addrs`
    for the whole mapping (read-only; a new one-entry dict for a single member, so not for
    hot paths).

    ``rows_epoch`` is a stamp renewed (from `State.next_epoch`, unique across groups) on
    every change to the group's topic rows, 0 while the group never had a row; a live
    entry remembers the stamp right after it last applied its whole topic table, which
    makes re-sending that same table O(1) (see ``Live.applied_names``). Unique stamps mean
    an entry that applied its table to another group can never mistake this group's rows
    for its own (a group at 0 has no row, and a table applied at 0 was empty).
    """

    __slots__ = ("_addr", "_id", "_many", "broker_name", "cluster", "clusters",
                 "enable_acting_master", "held_snapshots", "rows_epoch", "zone_name")

    def __init__(self, cluster: str, broker_name: str, *, rows_epoch: int = 0) -> None:
        self.cluster = cluster  # fixed at creation, as Java
        self.broker_name = broker_name
        #: The clusters listing this group (`State.add_to_cluster`): nearly always one,
        #: held as the plain string (a set only for several: `with_one`, `members`).
        self.clusters: str | set[str] | None = None
        self._id: int | None = None  # the one member's id, when there is exactly one
        self._addr: str | None = None  # its address
        self._many: dict[int, str] | None = None  # every member, when several
        self.zone_name: str | None = None
        self.enable_acting_master = False
        self.rows_epoch = rows_epoch
        #: `snapshots` as last built, None since the last change (`changed`): read it,
        #: never set it (a renewal compares it by identity, see ``Live.steady``)
        self.held_snapshots: tuple[BrokerData] | None = None

    @property
    def addrs(self) -> Mapping[int, str]:
        """Every member, broker id -> address (Java ``brokerAddrs``), read-only. O(1) for
        several members (the group's own dict); a new dict for one (a few hundred ns)."""
        many = self._many
        if many is not None:
            return many
        return {} if self._id is None else {self._id: self._addr}  # type: ignore[dict-item]

    def member(self, broker_id: int) -> str | None:
        """The address of member ``broker_id``, or None (``addrs.get``). O(1)."""
        if broker_id == self._id:
            return self._addr
        many = self._many
        return None if many is None else many.get(broker_id)

    def min_id(self) -> int:
        """The smallest member id (``min(addrs)``); ValueError when empty. O(I)."""
        bid = self._id
        if bid is not None:
            return bid
        return min(self._many or ())

    def is_empty(self) -> bool:
        """No member left (``not addrs``). O(1)."""
        return self._id is None and not self._many

    def has_addr(self, addr: str) -> bool:
        """Some member is at ``addr`` (``addr in addrs.values()``). O(I)."""
        many = self._many
        return addr in many.values() if many is not None else addr == self._addr

    def set_member(self, broker_id: int, addr: str) -> None:
        """``addrs[broker_id] = addr``; a second member turns the inline pair into a dict.
        O(1)."""
        many = self._many
        if many is not None:
            many[broker_id] = addr
        elif self._id is None or self._id == broker_id:
            self._id, self._addr = broker_id, addr
        else:
            self._many = {self._id: self._addr, broker_id: addr}  # type: ignore[dict-item]
            self._id = self._addr = None

    def del_member(self, broker_id: int) -> None:
        """``del addrs[broker_id]`` (KeyError when absent); one member left goes back
        inline. O(1)."""
        many = self._many
        if many is not None:
            del many[broker_id]
            if len(many) == 1:
                ((self._id, self._addr),) = many.items()
                self._many = None
        elif broker_id == self._id and self._id is not None:
            self._id = self._addr = None
        else:
            raise KeyError(broker_id)

    def snapshot(self) -> BrokerData:
        """The group as an immutable `BrokerData`, cached until the group changes. O(I)."""
        return self.snapshots()[0]

    def snapshots(self) -> tuple[BrokerData]:
        """``(snapshot(),)``, cached with it: the ``broker_datas`` of every route served by
        this group alone, shared by those routes. O(I)."""
        snap = self.held_snapshots
        if snap is None:
            snap = self.held_snapshots = (BrokerData(
                cluster=self.cluster, broker_name=self.broker_name,
                broker_addrs=FrozenMap(dict(sorted(self.addrs.items()))),
                zone_name=self.zone_name, enable_acting_master=self.enable_acting_master),)
        return snap

    def changed(self) -> None:
        self.held_snapshots = None


class Live:
    """One live entry (Java ``BrokerLiveInfo``) plus what the manager needs to fence and
    fast-path it. Mutable; never handed out (`BrokerLiveInfo` values are)."""

    __slots__ = ("applied_deleted", "applied_epoch", "applied_names", "broker_id",
                 "broker_name", "channel", "data_version", "entry", "generation",
                 "ha_server_addr", "last_update", "steady", "timeout", "unchanged_answer")

    def __init__(self, *, broker_name: str, broker_id: int, last_update: int,
                 timeout: int, data_version: DataVersion, channel: Hashable | None,
                 ha_server_addr: str | None, generation: int) -> None:
        # (no key of its own: the tables hold it, and every path reaching an entry has it)
        self.broker_name = broker_name
        self.broker_id = broker_id
        self.last_update = last_update
        self.timeout = timeout
        self.data_version = data_version
        self.channel = channel
        self.ha_server_addr = ha_server_addr
        self.generation = generation
        #: The `TopicTable.names_key` of the table this entry last applied in full (or
        #: found unchanged), and the group's rows_epoch stamp right after; None when it
        #: never wrote topics (a slave). The names only: the manager does not keep a
        #: registration's TopicConfig objects alive (the port keeps none). A host that
        #: passes the same table again shares this very string with it.
        self.applied_names: str | None = None
        self.applied_epoch = -1
        #: This entry's place in the deadline index (`DeadlineIndex.file`): a deadline
        #: at or before ``last_update + timeout``. A refresh raises ``last_update`` alone;
        #: the index re-files the entry when the filed deadline comes due.
        self.entry: tuple[int, object] | None = None
        #: QUERY_DATA_VERSION's answer for an equal version, made on first use and shared.
        self.unchanged_answer: VersionAnswer | None = None
        #: Whether that application deleted by omission (D12: full, not partial, no static
        #: mappings, deletion configured): the group's rows were then exactly its topics.
        self.applied_deleted = False
        #: The registration this entry last renewed with (weak: the manager keeps no
        #: input alive), its group's `BrokerData` snapshot then (`Group.snapshots`: a new
        #: object after any change of members or flags, and another group's is another
        #: object) and the group's ``rows_epoch`` then. The same object again, with both
        #: unchanged, passes every check of `renew_registration` (this entry's own fields
        #: change only with a new entry). None until a renewal; made by renewals only, so
        #: a broker that is never renewed costs the slot alone.
        self.steady: tuple[weakref.ref[Registration], tuple[BrokerData], int] | None = None


class State:
    """All tables and indexes. Methods are O(size of their inputs) and record touched topics."""

    def __init__(self) -> None:
        # --- base tables (Java: topicQueueTable, brokerAddrTable, clusterAddrTable, ...)
        self.topics: dict[str, TopicEntry] = {}
        self.groups: dict[str, Group] = {}
        # cluster -> its groups' names; a dict used as an insertion-ordered set: a str-keyed
        # dict costs about 21 B per name where a set costs about 52 B (sets keep a fill
        # of at most 60 % and grow fourfold)
        self.clusters: dict[str, dict[str, None]] = {}
        self.live: dict[LiveKey, Live] = {}
        self.filter_servers: dict[LiveKey, tuple[str, ...]] = {}
        self.mappings: dict[str, dict[str, MappingInfo]] = {}
        # --- indexes
        # broker name -> its topics' entries (entries, not names: a group removal reaches
        # each topic's rows without a lookup in the large table)
        self.topics_of_group: dict[str, dict[str, TopicEntry]] = {}
        # (group.cluster, addr) -> the names of the groups holding it: nearly always one,
        # held as the plain string (a set only for several: see `members`), which spares a
        # set (216 B) per broker. (broker name -> its clusters is `Group.clusters`.)
        self.groups_of_addr: dict[LiveKey, str | set[str]] = {}
        self.keys_of_channel: dict[Hashable, set[LiveKey]] = {}
        # the live entries keep their refresh time (last_update) and their place in the
        # index (entry): the index reads both there
        self.deadlines: DeadlineIndex[LiveKey] = DeadlineIndex(self.live.get)
        self._epoch = 0  # the last rows_epoch stamp handed out (see Group)
        # --- bookkeeping for one write
        self.touched: set[str] = set()  # topics (still present) whose route may change
        self.vanished: list[str] = []  # topics dropped with their route

    # ------------------------------------------------------------------ topic rows

    def put_row(self, topic: str, row: QueueData) -> None:
        """Upsert one (topic, group) row. O(1)."""
        entry = self.topics.get(topic)
        if entry is None:
            entry = self.topics[topic] = TopicEntry()
        rows = entry
        if rows.get(row.broker_name) == row:
            return
        rows[row.broker_name] = row
        self.topics_of_group.setdefault(row.broker_name, {})[topic] = entry
        self.touched.add(topic)
        self._rows_changed(row.broker_name)

    def drop_row(self, topic: str, broker_name: str) -> bool:
        """Remove one row; drop the topic when it has none left. O(1)."""
        entry = self.topics.get(topic)
        if entry is None or entry.pop(broker_name, None) is None:
            return False
        topics = self.topics_of_group[broker_name]
        del topics[topic]
        if not topics:
            del self.topics_of_group[broker_name]
        if entry:
            self.touched.add(topic)
        else:
            self._vanish(topic, entry)
        self._rows_changed(broker_name)
        return True

    def _vanish(self, topic: str, entry: TopicEntry) -> None:
        del self.topics[topic]
        if entry.route is not None:
            self.vanished.append(topic)

    def drop_topic(self, topic: str) -> bool:
        """Remove every row of ``topic``. O(B_t)."""
        entry = self.topics.get(topic)
        if entry is None:
            return False
        for name in list(entry):
            self.drop_row(topic, name)
        return True

    def rows_of(self, topic: str) -> MutableMapping[str, QueueData]:
        """The rows of ``topic`` by broker name; empty for an unknown topic. O(1)."""
        entry = self.topics.get(topic)
        return entry if entry is not None else {}

    def _rows_changed(self, broker_name: str) -> None:
        group = self.groups.get(broker_name)
        if group is not None:
            group.rows_epoch = self.next_epoch()

    def next_epoch(self) -> int:
        """A fresh `Group.rows_epoch` stamp, never handed out before. O(1)."""
        self._epoch += 1
        return self._epoch

    # ------------------------------------------------------------------ groups

    def group_changed(self, group: Group) -> None:
        """The group's `BrokerData` changed: every route it appears in must be rebuilt."""
        group.changed()
        self.touched.update(self.topics_of_group.get(group.broker_name, ()))

    def add_member(self, group: Group, broker_id: int, addr: str,
                   key: LiveKey | None = None) -> None:
        """Add a member; ``key`` is the live key ``(cluster, addr)`` of the registration, to
        be shared by the address index when the group is of that cluster. O(1)."""
        group.set_member(broker_id, addr)
        if key is None or key[0] != group.cluster:
            key = (group.cluster, addr)
        add_one(self.groups_of_addr, key, group.broker_name)

    def groups_at(self, key: LiveKey) -> Collection[str]:
        """The names of the groups of cluster ``key[0]`` holding address ``key[1]``. O(1)."""
        return members(self.groups_of_addr.get(key))

    def remove_member(self, group: Group, broker_id: int, addr: str) -> None:
        """Remove the member ``broker_id``, which must be at ``addr``. Addresses are unique
        within a group (register moves an address to its new id), so this is every
        member at ``addr``: `remove_addr` without the search. O(1)."""
        group.del_member(broker_id)
        discard_one(self.groups_of_addr, (group.cluster, addr), group.broker_name)

    def remove_addr(self, group: Group, addr: str, *, except_id: int | None = None) -> bool:
        """Remove every member of ``group`` at ``addr`` (but ``except_id``). O(I)."""
        ids = [i for i, a in group.addrs.items() if a == addr and i != except_id]
        if not ids:
            return False
        for i in ids:
            group.del_member(i)
        if not group.has_addr(addr):
            discard_one(self.groups_of_addr, (group.cluster, addr), group.broker_name)
        return True

    def add_to_cluster(self, cluster: str, group: Group) -> None:
        """List ``group`` under ``cluster`` (Java ``clusterAddrTable``), both ways. O(1)."""
        self.clusters.setdefault(cluster, {})[group.broker_name] = None
        group.clusters = with_one(group.clusters, cluster)

    def drop_group(self, group: Group) -> None:
        """Remove an empty group: its rows (O(T_b)), its cluster memberships and itself."""
        name = group.broker_name
        topics = self.topics_of_group.pop(name, None)
        if topics:
            table, touched, vanished = self.topics, self.touched, self.vanished
            for topic, entry in topics.items():  # drop_row, unrolled: the O(T_b) of a removal
                if entry._many is not None:  # several rows (len(entry) > 1, without a call)
                    del entry[name]
                    touched.add(topic)
                else:  # the topic's last row: the entry goes whole, rows and all
                    del table[topic]
                    if entry.route is not None:
                        vanished.append(topic)
            self._epoch += 1  # self.next_epoch(), inlined
            group.rows_epoch = self._epoch
        for cluster in members(group.clusters):
            names = self.clusters[cluster]
            del names[name]
            if not names:
                del self.clusters[cluster]
        group.clusters = None
        if not group.is_empty():
            for addr in set(group.addrs.values()):
                self.remove_addr(group, addr)
        del self.groups[name]
        group.changed()

    # ------------------------------------------------------------------ live entries

    def put_live(self, key: LiveKey, live: Live) -> None:
        """Insert or replace the live entry of ``key``, keeping the channel and deadline
        indexes. O(1)."""
        old = self.live.get(key)
        if old is not None and old.channel != live.channel:
            self._unindex_channel(key, old)
        self.live[key] = live
        if live.channel is not None:
            self.keys_of_channel.setdefault(live.channel, set()).add(key)
        if old is not None:  # the new entry takes over the old one's place in the index
            live.entry = old.entry
            if old.timeout == live.timeout:  # still a lower bound: last_update only grows
                return
        self.deadlines.file(key, live)  # (a changed timeout: the old place is dropped)

    def drop_live(self, key: LiveKey, *, expired: bool = False) -> Live | None:
        """Remove a live entry and its filter servers; ``expired`` when the deadline index
        already let it go (`DeadlineIndex.pop_expired`). O(1) amortised."""
        live = self.live.pop(key, None)
        if live is None:
            return None
        if live.channel is not None:
            self._unindex_channel(key, live)
        if not expired:
            self.deadlines.forget(live)
        if key in self.filter_servers:
            self.set_filter_servers(key, ())
        return live

    def _unindex_channel(self, key: LiveKey, live: Live) -> None:
        if live.channel is None:
            return
        keys = self.keys_of_channel.get(live.channel)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.keys_of_channel[live.channel]

    def set_filter_servers(self, key: LiveKey, servers: tuple[str, ...]) -> None:
        """Store (non-empty) or remove (empty) an address's filter servers. O(T of its groups)
        when the value changes, since routes carry them."""
        before = self.filter_servers.get(key, ())
        if before == servers:
            return
        if servers:
            self.filter_servers[key] = servers
        else:
            del self.filter_servers[key]
        for name in self.groups_at(key):
            self.touched.update(self.topics_of_group.get(name, ()))

    # ------------------------------------------------------------------ static topics

    def put_mapping(self, topic: str, info: MappingInfo) -> None:
        infos = self.mappings.setdefault(topic, {})
        if infos.get(info.bname) != info:
            infos[info.bname] = info
            self.touched.add(topic)

    # ------------------------------------------------------------------ helpers

    def live_key(self, addr: BrokerAddr) -> LiveKey:
        return (addr.cluster, addr.addr)

    def take_touched(self) -> tuple[set[str], list[str]]:
        """The topics this write touched and those it dropped with their route; resets
        both. O(1)."""
        touched, vanished = self.touched, self.vanished
        if touched:
            self.touched = set()
        if vanished:
            self.vanished = []
        return touched, vanished


_K = TypeVar("_K")


def with_one(held: str | set[str] | None, name: str) -> str | set[str]:
    """``held`` (names kept as a plain string for one, a set for several; None for none)
    with ``name`` added: the string, a new set of two, or the same set grown. O(1)."""
    if held is None:
        return name
    if type(held) is str:
        return held if held == name else {held, name}
    held.add(name)  # type: ignore[union-attr]
    return held


def add_one(index: dict[_K, str | set[str]], key: _K, name: str) -> None:
    """Add ``name`` to the names held under ``key`` (`with_one`). O(1)."""
    index[key] = with_one(index.get(key), name)


def discard_one(index: dict[_K, str | set[str]], key: _K, name: str) -> None:
    """Remove ``name`` from the names held under ``key`` (a set of one becomes the string
    again, none removes the key). O(1)."""
    held = index.get(key)
    if held is None:
        return
    if type(held) is str:
        if held == name:
            del index[key]
        return
    held.discard(name)  # type: ignore[union-attr]
    if len(held) == 1:
        index[key] = next(iter(held))
    elif not held:
        del index[key]


def members(held: str | set[str] | None) -> Collection[str]:
    """The names of an `add_one` index entry, as a collection (never a bare string)."""
    if held is None:
        return ()
    if type(held) is str:
        return (held,)
    return held


def no_master(group: Group | None) -> bool:
    """Java ``isNoMasterExists``: no group, no member, or smallest id above 0."""
    return group is None or group.is_empty() or group.min_id() > 0

