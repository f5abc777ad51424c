"""The broker-group partition (``partition="group"``): which journal entries can be replayed
apart, as independent sets of broker groups, and their replay.

A name server's manager couples broker groups only through what they share. This module
names what each entry touches (*nodes*) and joins nodes that appear in the same entry; each
resulting component can be replayed on its own manager, and the routes of the components
add up to the real routes (``_answers.merge_routes``). The coupling points, from
``_manager.py`` and ``_routes.py``:

* a group (``g:<broker_name>``): its rows, its members, its write bit, its rejections (D3);
* an address (``a:<host:port>``, any cluster): its live entry, every group it joined (an
  expiry removes it from all of them), its filter servers (keyed by address in a route);
* a channel (``c:<repr>``): ``on_channel_closed`` removes every broker registered on it;
* a ``register_topic`` or ``unregister_many`` naming several groups: all or nothing.

Entries that touch the whole name server but act on each group alone (the header, ``scan``,
``channel_closed``, ``delete_topic``) are copied to every component: each copy changes only
that component's part. Static-topic mappings (``topic_queue_mappings``) appear in a route
even for groups without a row, so a name server whose registrations carry any is not split
(`WHOLE`). Everything else lands in exactly one component.

`replay_components` replays the accepted lines of each (name server, component), in
sequence order, each on its own reader and `ReplayDeriver`: what Spark's replay tasks run
and what the reference's model of this plan (`analyze_partitioned`) runs in one process.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import attrs

from .._errors import InvariantViolation
from ..journal import (
    AddWritePerm,
    ChannelClosed,
    DeleteTopic,
    Heartbeat,
    JournalEntry,
    JournalHeader,
    JournalReader,
    JournalRecord,
    JournalSnapshot,
    QueryDataVersion,
    Register,
    RegisterTopic,
    RejectedLine,
    Scan,
    Unregister,
    UnregisterMany,
    WipeWritePerm,
)
from ._deriver import ReplayDeriver
from ._schema import Emitted

__all__ = ["WHOLE", "ComponentLine", "Components", "component_count", "components", "nodes_of",
           "replay_components", "replay_entry"]

#: The node of an entry that forbids splitting its name server.
WHOLE = "*"

#: node → component number, per name server.
Components = Mapping[str, Mapping[str, int]]


def nodes_of(entry: JournalEntry) -> tuple[str, ...]:
    """What ``entry`` touches: ``()`` means "copy to every component", `WHOLE` means "do
    not split this name server". Deterministic and O(size of the call)."""
    if isinstance(entry, JournalHeader):
        return ()
    if isinstance(entry, JournalSnapshot):  # the whole state: one component
        return (WHOLE,)
    call = entry.call
    if isinstance(call, Register):
        reg = call.registration
        if reg.topic_queue_mappings:
            return (WHOLE,)
        nodes = [f"g:{reg.broker_name}", f"a:{reg.broker_addr}"]
        if reg.channel is not None:
            nodes.append(f"c:{reg.channel!r}")
        return tuple(nodes)
    if isinstance(call, Unregister):
        return (f"g:{call.request.broker_name}", f"a:{call.request.broker_addr}")
    if isinstance(call, UnregisterMany):
        seen: dict[str, None] = {}
        for r in call.requests:
            seen[f"g:{r.broker_name}"] = None
            seen[f"a:{r.broker_addr}"] = None
        return tuple(seen)
    if isinstance(call, Heartbeat | QueryDataVersion):
        return (f"a:{call.broker_addr}",)
    if isinstance(call, RegisterTopic):
        return tuple(dict.fromkeys(f"g:{q.broker_name}" for q in call.queue_datas))
    if isinstance(call, WipeWritePerm | AddWritePerm):
        return (f"g:{call.broker_name}",)
    if isinstance(call, Scan | ChannelClosed | DeleteTopic):
        return ()
    return (WHOLE,)  # a call this planner does not know: be exact, do not split


def components(node_sets: Iterable[tuple[str, Sequence[str]]]) -> dict[str, dict[str, int]]:
    """Union-find over ``(ns, nodes)`` pairs: for each name server, node → component.

    Components are numbered from 0 in the order of their smallest node, so the numbering
    does not depend on input order. A name server with a `WHOLE` node gets one component.
    """
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    whole: set[str] = set()
    for ns, nodes in node_sets:
        parent.setdefault((ns, ""), (ns, ""))  # every name server has a component 0
        if WHOLE in nodes:
            whole.add(ns)
        keys = [(ns, n) for n in nodes]
        for key in keys:
            parent.setdefault(key, key)
        for key in keys[1:]:
            a, b = find(keys[0]), find(key)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[str, dict[tuple[str, str], list[str]]] = {}
    for ns, node in parent:
        if node:
            groups.setdefault(ns, {}).setdefault(find((ns, node)), []).append(node)
        else:
            groups.setdefault(ns, {})
    result: dict[str, dict[str, int]] = {}
    for ns, by_root in groups.items():
        if ns in whole:
            result[ns] = {n: 0 for members in by_root.values() for n in members}
            continue
        ordered = sorted(sorted(members) for members in by_root.values())
        result[ns] = {n: i for i, members in enumerate(ordered) for n in members}
    return result


def component_count(comps: Mapping[str, int]) -> int:
    """How many components a name server has (at least 1)."""
    return max(comps.values(), default=0) + 1


def replay_entry(reader: JournalReader, ns: str, seq: int, ts: int, op: str, source: str,
                 line: int, text: str) -> JournalEntry:
    """A component's entry for an accepted line: re-read by the component's own reader
    (which rebuilds the topic tables its registrations refer to), except for ``scan``,
    copied to every component and always ``Scan()``, which is built without parsing. The
    line was accepted when its name server was read whole; a rejection now is a bug.
    ``seq`` is the whole read's number (after a restart that numbered its lines from the
    start again, a component's reader, which saw fewer lines, may number them otherwise)."""
    if op == "scan":
        return JournalRecord(nameserver_id=ns, seq=seq, at_ms=ts, call=Scan())
    entry = reader.feed(text, source=source, line_number=line)
    if isinstance(entry, RejectedLine):
        raise InvariantViolation([f"{source}:{line} was accepted when {ns} was read whole, "
                                  f"but its component's reader rejects it: {entry.reason}"])
    if entry.seq != seq:  # renumbered after a restart: the whole read's number is the one
        entry = attrs.evolve(entry, seq=seq)
    return entry


#: An accepted line routed to a component: (ns, component, primary, seq, ts, op, source,
#: line, text); ``primary`` is False for the copies of an entry every component replays
#: but the first (their replay rejection is reported once).
ComponentLine = tuple[str, int, bool, int, int, str, str, int, str]


def replay_components(lines: Iterable[ComponentLine], spans: Mapping[str, tuple[int, int]]
                      ) -> Iterator[Emitted]:
    """The rows of every (name server, component) of ``lines``, sorted by (ns, component,
    seq): each is re-read by its own reader (`replay_entry`) and replayed by its own
    `ReplayDeriver` (``spans``: each name server's journal [first, last] ms, the end of its
    open sessions); its contributions instead of ``route_changes``. O(lines) and one
    manager held at a time."""
    key: tuple[str, int] | None = None
    reader = JournalReader()
    deriver: ReplayDeriver | None = None
    for ns, comp, primary, seq, ts, op, source, line, text in lines:
        if (ns, comp) != key:
            if deriver is not None:
                yield from deriver.finish()
            key = (ns, comp)
            reader = JournalReader()
            deriver = ReplayDeriver(ns, comp, end_ms=spans[ns][1])
        assert deriver is not None
        entry = replay_entry(reader, ns, seq, ts, op, source, line, text)
        yield from deriver.apply(entry, (source, line, text), primary=bool(primary))
    if deriver is not None:
        yield from deriver.finish()
