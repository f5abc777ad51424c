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

from .._errors import InvalidRequest
from .._frozen import FrozenMap
from .._messages import Registration
from .._validate import check_int, fail
from .._values import DataVersion, TopicConfig, TopicQueueMappingInfo

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
    checked as a ``register`` line's table is (`InvalidRequest` naming the item). O(size)."""
    if not isinstance(doc, Mapping) or set(doc) != {"topics", "tables"}:
        fail(where, doc, 'an object with "topics" and "tables"')
    configs = [_config(item, f"{where}.topics[{i}]")
               for i, item in enumerate(_array(doc["topics"], f"{where}.topics"))]
    out: dict[int, Registration] = {}
    for i, item in enumerate(_array(doc["tables"], f"{where}.tables")):
        at = f"{where}.tables[{i}]"
        row = _array(item, at, size=14)
        table_id = check_int(f"{at}[0]", row[0], low=1)
        if table_id in out:
            fail(f"{at}[0]", table_id, "a table id listed once")
        out[table_id] = _registration(row, configs, at)
    return FrozenMap(out)


def _array(value: object, where: str, *, size: int | None = None) -> Sequence[Any]:
    if not isinstance(value, list):
        fail(where, value, "a JSON array")
    if size is not None and len(value) != size:
        fail(where, value, f"an array of {size} items")
    return value


def _config(value: object, where: str) -> TopicConfig:
    name, read, write, perm, kind, flag, order, attributes = _array(value, where, size=8)
    if not isinstance(attributes, Mapping):
        fail(f"{where}[7]", attributes, "a JSON object")
    check_int(f"{where}[3]", perm, low=0, high=15)
    try:
        return TopicConfig(topic_name=name, read_queue_nums=read, write_queue_nums=write,
                           perm=perm, topic_filter_type=kind, topic_sys_flag=flag,
                           order=order, attributes=attributes)
    except InvalidRequest as exc:
        raise InvalidRequest(f"{where}: {exc}", field=where, value=exc.value) from None


def _registration(row: Sequence[Any], configs: Sequence[TopicConfig], at: str) -> Registration:
    (_id, cluster, name, broker_id, addr, ha, zone, timeout, acting, version, refs,
     mappings, servers, partial) = row
    dv = _array(version, f"{at}[9]", size=3)
    topics = {}
    for j, ref in enumerate(_array(refs, f"{at}[10]")):
        config = configs[check_int(f"{at}[10][{j}]", ref, low=0, high=len(configs) - 1)]
        topics[config.topic_name] = config
    if len(topics) != len(refs):
        fail(f"{at}[10]", refs, "topics named once each")
    if not isinstance(mappings, Mapping):
        fail(f"{at}[11]", mappings, "a JSON object")
    try:
        return Registration(
            cluster=cluster, broker_name=name, broker_id=broker_id, broker_addr=addr,
            ha_server_addr=ha, zone_name=zone, heartbeat_timeout_ms=timeout,
            enable_acting_master=acting,
            data_version=DataVersion(state_version=dv[0], timestamp=dv[1], counter=dv[2]),
            topics=topics,
            topic_queue_mappings={k: TopicQueueMappingInfo.from_json(v)
                                  for k, v in mappings.items()},
            filter_servers=servers, partial=partial)
    except InvalidRequest as exc:
        raise InvalidRequest(f"{at}: {exc}", field=at, value=exc.value) from None
