"""The topic tables a snapshot line carries, in a compact form.

A journal writes a registration's table (everything but the channel) once, in full, and
refers to it by id afterwards. A snapshot lists every table id that stays valid after it,
with its table, so that the lines after it never need a line before it. Written in full
each table would cost as much as its ``register`` line (about 1.5 kB for six topics); here
each distinct topic configuration is written once (``topics``) and a table is its header
fields plus the indexes of its topics (``tables``), about a tenth of that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._checked import Checked, int_in, items_of
from .._errors import InvalidRequest
from .._frozen import EMPTY, FrozenMap
from .._messages import Registration, TopicTable
from .._snapshot import data_version
from .._validate import MAX_QUEUE_NUMS, fail
from .._values import Perm, TopicConfig, TopicQueueMappingInfo, TopicSysFlag, unchecked

_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")

__all__ = ["tables_from_json", "tables_to_json"]

_TopicKey = tuple[str, int, int, int, str, int, bool, tuple[tuple[str, str], ...]]


def tables_to_json(tables: Mapping[int, Registration]) -> dict[str, Any]:
    """``{"topics": [[name, read, write, perm, filter type, sys flag, order, attributes],
    ...], "tables": [[table id, cluster, broker name, broker id, address, HA address, zone,
    timeout, acting master, [state version, timestamp, counter], [topic indexes],
    {mappings}, filter servers, partial], ...]}``, tables in id order. O(size)."""
    pool: dict[_TopicKey, int] = {}
    rows = []
    for table_id in sorted(tables):
        reg = tables[table_id]
        refs = []
        for config in reg.topics.values():
            key = (config.topic_name, config.read_queue_nums, config.write_queue_nums,
                   int(config.perm), config.topic_filter_type, int(config.topic_sys_flag),
                   config.order, tuple(config.attributes.items()))
            index = pool.get(key)
            if index is None:
                index = pool[key] = len(pool)
            refs.append(index)
        dv = reg.data_version
        rows.append([table_id, reg.cluster, reg.broker_name, reg.broker_id, reg.broker_addr,
                     reg.ha_server_addr, reg.zone_name, reg.heartbeat_timeout_ms,
                     reg.enable_acting_master, [dv.state_version, dv.timestamp, dv.counter],
                     refs, {k: v.to_json() for k, v in reg.topic_queue_mappings.items()},
                     None if reg.filter_servers is None else list(reg.filter_servers),
                     reg.partial])
    return {"topics": [[*key[:7], dict(key[7])] for key in pool], "tables": rows}


def tables_from_json(doc: object, where: str = "args.tables") -> FrozenMap[int, Registration]:
    """The inverse of `tables_to_json`: table id → `Registration` (no channel), each
    field checked as a ``register`` line's table is (`InvalidRequest` naming it). O(size):
    a name, address or topic that repeats is checked once."""
    if not isinstance(doc, Mapping) or set(doc) != {"topics", "tables"}:
        fail(where, doc, 'an object with "topics" and "tables"')
    c = Checked()
    configs = [_config(item, f"{where}.topics[{i}]", c)
               for i, item in enumerate(items_of(doc["topics"], where, ".topics"))]
    out: dict[int, Registration] = {}
    for i, item in enumerate(items_of(doc["tables"], where, ".tables")):
        at = f"{where}.tables[{i}]"
        row = items_of(item, at, size=14)
        table_id = int_in(at, "[0]", row[0], 1)
        if table_id in out:
            fail(f"{at}[0]", table_id, "a table id listed once")
        out[table_id] = _registration(row, configs, at, c)
    return FrozenMap(out)


def _config(value: object, where: str, c: Checked) -> TopicConfig:
    name, read, write, perm, kind, flag, order, attributes = items_of(value, where, size=8)
    if kind not in _FILTER_TYPES:
        fail(f"{where}[4]", kind, "'SINGLE_TAG' or 'MULTI_TAG'")
    if not isinstance(attributes, Mapping) or not all(
            type(k) is str and type(v) is str for k, v in attributes.items()):
        fail(f"{where}[7]", attributes, "a JSON object of strings")
    return unchecked(TopicConfig, topic_name=c.topic(where, "[0]", name),
                     read_queue_nums=int_in(where, "[1]", read, 0, MAX_QUEUE_NUMS),
                     write_queue_nums=int_in(where, "[2]", write, 0, MAX_QUEUE_NUMS),
                     perm=Perm(int_in(where, "[3]", perm, 0, 15)), topic_filter_type=kind,
                     topic_sys_flag=TopicSysFlag(int_in(where, "[5]", flag, 0, 3)),
                     order=Checked.flag(where, "[6]", order),
                     attributes=FrozenMap(attributes) if attributes else EMPTY)


def _registration(row: Sequence[Any], configs: Sequence[TopicConfig], at: str,
                  c: Checked) -> Registration:
    (_id, cluster, name, broker_id, addr, ha, zone, timeout, acting, version, refs,
     mappings, servers, partial) = row
    picked = [configs[int_in(at, f"[10][{j}]", ref, 0, len(configs) - 1)]
              for j, ref in enumerate(items_of(refs, at, "[10]"))]
    topics = TopicTable.of_configs(picked)
    if len(topics) != len(picked):
        fail(f"{at}[10]", refs, "topics named once each")
    if not isinstance(mappings, Mapping):
        fail(f"{at}[11]", mappings, "a JSON object")
    return unchecked(
        Registration, cluster=c.name(at, "[1]", cluster), broker_name=c.name(at, "[2]", name),
        broker_id=int_in(at, "[3]", broker_id, 0), broker_addr=c.addr(at, "[4]", addr),
        ha_server_addr=c.opt_addr(at, "[5]", ha), zone_name=c.opt_name(at, "[6]", zone),
        heartbeat_timeout_ms=None if timeout is None else int_in(at, "[7]", timeout, 1),
        enable_acting_master=None if acting is None else Checked.flag(at, "[8]", acting),
        data_version=data_version(version, at, "[9]"), topics=topics,
        topic_queue_mappings=FrozenMap({
            c.topic(at, "[11] key", k): _mapping(v, f"{at}[11][{k!r}]")
            for k, v in mappings.items()}) if mappings else EMPTY,
        filter_servers=None if servers is None else tuple(
            c.addr(at, f"[12][{j}]", x) for j, x in enumerate(items_of(servers, at, "[12]"))),
        channel=None, partial=Checked.flag(at, "[13]", partial))


def _mapping(value: object, where: str) -> TopicQueueMappingInfo:
    try:
        return TopicQueueMappingInfo.from_json(value)
    except InvalidRequest as exc:
        raise InvalidRequest(f"{where}: {exc}", field=where, value=exc.value) from None
