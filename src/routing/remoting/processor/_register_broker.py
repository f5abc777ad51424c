"""REGISTER_BROKER (103) and UNREGISTER_BROKER (104), with the fast path of the 30 s
re-registration and every cache it keeps (issue 13). Java: ``DefaultRequestProcessor``'s
``registerBroker`` and ``unregisterBroker``.

A `routing.Registration` is a pure function of a request's header fields, version, body
and channel, and a broker re-registers every 30 s with byte for byte the same body while
its topics are unchanged. Three paths, cheapest first; each answers byte for byte what the
next would:

* **renewal** (``renew_unchanged``): a master's request equal to its last one (header
  fields, version, channel, body bytes) stands for the very `Registration` the manager
  applied last, and `RouteInfoManager.renew` refreshes the broker in O(1) when applying it
  would change nothing but liveness. A master's reply never carries a master or HA
  address (Java step 12 fills them for slaves only) and such a renewal cannot change the
  group's smallest id (the id is already a member), so the reply is the full path's:
  SUCCESS, no ext fields, the order-topic KV table as body. ``renew`` tells no listener;
  see `NameServerProcessor` for when that matters.
* **remembered**: the same request, or the same body under a changed header (a reconnect,
  a new timeout), skips the CRC and the decoding; the manager's ``register`` runs in full.
* **full**: CRC (when the request carries one), then the body: a JSON body read against
  the broker's previous topic table (`decode_against`, below: O(changed topics) plus a
  pass in C), else decoded in full (the deflate form, or what that decoder declines).

What `RegisterBroker` keeps, one per processor (nothing is shared by the process):

* per broker ``(clusterName, brokerAddr)`` as sent, its last request's parts, the
  `Registration` they made and its topic table's text (`LastRegistration`): at most
  ``body_cache_entries`` brokers (default 1 024; 0 turns it off) and 64 MiB of bodies and
  table texts, the least recently stored dropped first; a body over a quarter of that is
  not kept. Lookup O(1); a hit costs one comparison of the header fields and one memcmp
  of the body (an identity test when the connection's `HeaderCache` hands over the same
  object).
* the decoded `TopicConfig` of each distinct topic document seen (`TopicConfigMemo`),
  keyed by its values with their types: at most 100 000, then it starts over. A hit costs
  about 0.5 µs instead of about 9 µs; brokers resend mostly unchanged topics.
* per broker registered and not removed since, the hash of its last accepted body, so
  that `Outcome.registered` tells a first registration, a changed body and an unchanged
  one apart for the host's log: one int per live broker, O(1) per request (the hash of a
  ``bytes`` object is computed once).

No Java counterpart for the caches (Java decodes and checks every body).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any, cast

import attrs

from ... import _json as j
from ..._errors import InvalidRequest
from ..._frozen import FrozenMap
from ..._messages import Registration, TopicTable
from ..._values import MASTER_ID, TopicConfig
from ..wire._bodies import RegisterBrokerBody, body_crc32, encode_kv_table
from ..wire._codec import RemotingCommand
from ..wire._codes import NAMESPACE_ORDER_TOPIC_CONFIG, V3_0_11, V5_0_0, ZONE_NAME, ResponseCode
from ._request import Context, Fields, Outcome, Registered, fail, ignored

__all__ = ["BODY_CACHE_ENTRIES", "LastRegistration", "RegisterBroker", "Renew", "TableText",
           "TopicConfigMemo", "decode_against"]

#: Brokers whose last registration is kept decoded, and the bytes of bodies and texts.
BODY_CACHE_ENTRIES = 1_024
_BODY_CACHE_BYTES = 64 * 1024 * 1024
#: Distinct topic documents kept decoded.
_TOPIC_MEMO_LIMIT = 100_000
_TOPIC_FIELDS = ("topicName", "readQueueNums", "writeQueueNums", "perm", "topicFilterType",
                 "topicSysFlag", "order")

#: ``RouteInfoManager.renew``'s shape: the new generation, or None (then ``register``).
Renew = Callable[[Registration], "int | None"]
MemoKey = tuple[str | None, str | None]  # (clusterName, brokerAddr) as sent


class TopicConfigMemo:
    """`TopicConfig.from_json`, memoised on the document's values (with their types, so
    ``1`` and ``true`` stay apart); see the module docstring for its bound and cost.
    Only successful parses are kept."""

    def __init__(self, limit: int = _TOPIC_MEMO_LIMIT) -> None:
        self.limit = limit
        self._configs: dict[tuple[Any, ...], TopicConfig] = {}

    def __len__(self) -> int:
        return len(self._configs)

    def __call__(self, doc: Any) -> TopicConfig:
        if not isinstance(doc, dict):
            return TopicConfig.from_json(doc)
        values = [doc.get(name) for name in _TOPIC_FIELDS]
        attributes = doc.get("attributes")
        configs = self._configs
        try:
            key = (*((type(v), v) for v in values),
                   tuple(sorted(attributes.items())) if isinstance(attributes, dict)
                   else (type(attributes), attributes))
            hit = configs.get(key)
        except TypeError:  # an unhashable value: let from_json say what is wrong
            return TopicConfig.from_json(doc)
        if hit is None:
            hit = TopicConfig.from_json(doc)
            if len(configs) >= self.limit:
                configs.clear()
            configs[key] = hit
        return hit


@attrs.frozen(kw_only=True, eq=False)
class LastRegistration:
    """One broker's last request and what it decoded to. ``crc`` is the body's CRC32 once
    computed (None if the request carried none); ``era`` the body dialect (0: before
    V3_0_11, 1: before V5_0_0, 2: since)."""

    ext: FrozenMap[str, str]
    version: int
    data: bytes
    channel: Hashable | None
    compressed: bool
    era: int
    crc: int | None
    body: RegisterBrokerBody
    registration: Registration
    #: The body's topic table as text, for decoding the next changed body against it.
    table_text: TableText | None = None

    @property
    def size(self) -> int:
        """Bytes this memo holds beyond shared objects: the body and the table's text."""
        return len(self.data) + (len(self.table_text.text) if self.table_text else 0)

    def same_request(self, ext: FrozenMap[str, str], version: int, data: bytes,
                     channel: Hashable | None) -> bool:
        """True when a request with these parts makes exactly `registration`. O(header)
        plus a memcmp of the body (the length is compared first)."""
        return (self.version == version and self.data == data and self.channel == channel
                and self.ext == ext)


class RegisterBroker:
    """REGISTER_BROKER and UNREGISTER_BROKER for one processor, with the caches of the
    module docstring. ``entries``/``max_bytes`` bound the `LastRegistration` s; ``renew``
    is the manager's ``renew`` when the renewal path is on. Thread-safe; O(1) amortised
    per call besides the paths' own cost."""

    def __init__(self, entries: int = BODY_CACHE_ENTRIES, max_bytes: int = _BODY_CACHE_BYTES,
                 renew: Renew | None = None) -> None:
        self.entries = entries
        self.max_bytes = max_bytes
        self.renew = renew
        self.bytes = 0  # body and table-text bytes held by the memos
        self.topic_configs = TopicConfigMemo()
        self._memos: dict[MemoKey, LastRegistration] = {}
        self._bodies: dict[MemoKey, int] = {}  # hash of the last accepted body, live brokers
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._memos)

    # ------------------------------------------------------------------ handlers

    def register_broker(self, proc: Context, request: RemotingCommand, f: Fields,
                        channel: Hashable | None) -> Outcome:
        """REGISTER_BROKER's `Outcome`. O(1) on the renewal path (plus the order-topic KV
        table, usually empty); otherwise the manager's ``register`` plus, for a new body,
        O(body) to check and decode it."""
        registration = self.registration_of(request, f, channel)
        if isinstance(registration, Outcome):
            return registration
        renew = self.renew
        if (renew is not None and registration.broker_id == MASTER_ID
                and renew(registration) is not None):
            return Outcome(response=request.make_response(ResponseCode.SUCCESS,
                                                          body=_order_topic_table(proc)),
                           registered=self._registered(request))
        result = proc.manager.register(registration)
        if not result.accepted:
            reason = result.rejection or "rejected"
            if reason.startswith("stale"):
                return Outcome(response=request.make_response(ResponseCode.SUCCESS),
                               registered=self._registered(request))
            return Outcome(response=request.make_response(
                ResponseCode.SYSTEM_ERROR, f"register broker failed: {reason}"))
        ext = {}
        if result.ha_server_addr is not None:
            ext["haServerAddr"] = result.ha_server_addr
        if result.master_addr is not None:
            ext["masterAddr"] = result.master_addr
        response = request.make_response(ResponseCode.SUCCESS, ext_fields=ext,
                                         body=_order_topic_table(proc))
        return Outcome(response=response,
                       notifications=proc.notices.commands(result.notifications),
                       registered=self._registered(request))

    def unregister_broker(self, proc: Context, request: RemotingCommand, f: Fields,
                          channel: Hashable | None) -> Outcome:
        """Applied at once (Java queues it); the group's min-broker-id notices go along.
        The manager's ``unregister`` plus O(1)."""
        try:
            cluster, addr = f.text("clusterName"), f.text("brokerAddr")
            name, broker_id = f.text("brokerName"), f.long("brokerId")
        except InvalidRequest as exc:  # Java queues it, answers SUCCESS, fails in its worker
            return ignored(request, str(exc))
        proc.notices.take_removals()
        proc.manager.unregister(cluster=cluster, broker_addr=addr, broker_name=name,
                                broker_id=broker_id)
        self.forget(cluster, addr)
        return Outcome(response=request.make_response(ResponseCode.SUCCESS),
                       notifications=proc.notices.take_removals())

    def forget(self, cluster: str, broker_addr: str) -> None:
        """The broker was removed: its next registration is a first one. O(1)."""
        self._bodies.pop((cluster, broker_addr), None)

    def _registered(self, request: RemotingCommand) -> Registered:
        ext = request.ext_fields
        key = (ext.get("clusterName"), ext.get("brokerAddr"))
        digest = hash(request.body)
        previous = self._bodies.get(key)
        self._bodies[key] = digest
        if previous is None:
            return "first"
        return "unchanged" if previous == digest else "changed"

    # ------------------------------------------------------------------ decoding

    def registration_of(self, request: RemotingCommand, f: Fields,
                        channel: Hashable | None) -> Registration | Outcome:
        """The `Registration` a REGISTER_BROKER request stands for, or the CRC failure.

        A request equal to the broker's last one (header fields, version, channel, and the
        body byte for byte) gets the remembered `Registration` itself: no CRC (equal bytes
        were checked), no decoding, and the manager's O(1) case. The same body under a
        changed header (a reconnect, a new timeout) skips CRC and decoding. Otherwise
        O(body): CRC, JSON and the topic table's checks.
        """
        data, version, ext = request.body, request.version, request.ext_fields
        key = (ext.get("clusterName"), ext.get("brokerAddr"))
        memo = self._memos.get(key) if self.entries > 0 else None
        if memo is not None and memo.same_request(ext, version, data, channel):
            return memo.registration
        name, addr, cluster = f.text("brokerName"), f.text("brokerAddr"), f.text("clusterName")
        ha_addr = f.text("haServerAddr")
        broker_id = f.long("brokerId")
        timeout = f.optional_long("heartbeatTimeoutMillis")
        acting = f.optional_bool("enableActingMaster")
        compressed = bool(f.optional_bool("compressed"))
        crc = f.optional_long("bodyCrc32") or 0
        era = 0 if version < V3_0_11 else (1 if version < V5_0_0 else 2)
        table_text = memo.table_text if memo is not None else None
        if memo is not None and memo.data != data:
            memo = None  # only the body of the last request is of use from here on
        checked = memo.crc if memo is not None else None
        if crc != 0 and crc != checked:
            checked = body_crc32(data)
            if checked != crc:
                return fail(request, ResponseCode.SYSTEM_ERROR, "crc32 not match")
        if memo is not None and memo.compressed == compressed and memo.era == era:
            body = memo.body
        elif data and not compressed:  # against the broker's previous table, else in full
            against = decode_against(data, version, table_text, self.topic_configs)
            if against is None:
                body = RegisterBrokerBody.decode(data, version=version)
                table_text = None
            else:
                body, table_text = against
        elif data:
            body = RegisterBrokerBody.decode(data, compressed=compressed, version=version)
            table_text = None
        else:
            body = RegisterBrokerBody()
            table_text = None
        registration = Registration(
            cluster=cluster, broker_name=name, broker_id=broker_id, broker_addr=addr,
            ha_server_addr=ha_addr or None, zone_name=f.optional_text(ZONE_NAME),
            heartbeat_timeout_ms=timeout, enable_acting_master=acting,
            data_version=body.data_version, topics=body.topics,
            topic_queue_mappings=body.topic_queue_mappings,
            filter_servers=body.filter_servers if version >= V3_0_11 else None,
            channel=channel)
        self._remember(key, LastRegistration(
            ext=ext, version=version, data=data, channel=channel, compressed=compressed,
            era=era, crc=checked, body=body, registration=registration,
            table_text=table_text))
        return registration

    def _remember(self, key: MemoKey, memo: LastRegistration) -> None:
        """Keep ``memo`` as the broker's last request (unless it is too large to keep)."""
        size = memo.size
        if self.entries <= 0 or size > self.max_bytes // 4:
            return
        with self._lock:
            memos = self._memos
            old = memos.pop(key, None)
            if old is not None:
                self.bytes -= old.size
            memos[key] = memo
            self.bytes += size
            while len(memos) > self.entries or self.bytes > self.max_bytes:
                self.bytes -= memos.pop(next(iter(memos))).size


def _order_topic_table(proc: Context) -> bytes:
    """The reply's body: the KV namespace of order-topic configs, when enabled and set."""
    if proc.return_order_topic_config_to_broker:
        table = proc.kv.namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
        if table is not None:
            return encode_kv_table(table)
    return b""


# --------------------------------------------------------------------------- decode against
#
# A broker's changed registration usually differs from its previous one in the data version
# and a few topics, yet the full decode (`RegisterBrokerBody.decode`) parses the whole
# document with ``json.loads`` (about 1 ms for 1 000 topics here) and then turns each
# topic's dict into a `TopicConfig` (about 1.8 µs each). `decode_against` instead reads
# only what changed:
#
# * the ``topicConfigTable`` object's text equal to the previous one (one ``startswith``):
#   the previous `TopicTable` object itself;
# * otherwise member by member: a member (``"name":{...}``) whose text is the previous
#   body's member at the same place, or whose value text is the previous value of that
#   name, is the previous `TopicConfig`; any other member is parsed by the standard JSON
#   scanner and converted by the processor's `TopicConfigMemo`;
# * the rest of the document (data version, filter servers, mappings) by ``json.loads``
#   of the document with an empty table in the table's place, and once more with a probe
#   table ``{"":0}``.
#
# Exact, not a fingerprint: a JSON value is self-delimiting, so text that starts with a
# previously parsed value's text *is* that value; a table assembled from members that each
# parse is the one parse of its text (JSON's grammar is unambiguous); and the two small
# parses prove that the slot is the document's effective ``topicConfigTable`` value (were
# it inside a string or another value, the table read from both would be the same, not
# ``{}`` and ``{"":0}``), so substituting the table's text there gives the full document.
# Anything else (the legacy dialect's bare keys, a value that fails its checks, whitespace
# in odd places) returns None, and the caller runs the full decode, which also names the
# error. Differential tests compare both decodes on random and adversarial bodies.

_MARK = '"topicConfigTable":'
#: The standard decoder's scanner: (text, start) -> (value, end), StopIteration if none.
_scan: Callable[[str, int], tuple[Any, int]] = (
    json.JSONDecoder().scan_once)  # type: ignore[attr-defined]  # not in typeshed
#: json.decoder.WHITESPACE; it matches at any position (possibly the empty string)
_blank = cast(Callable[[str, int], "re.Match[str]"], re.compile(r"[ \t\n\r]*").match)


class TableText:
    """A decoded ``topicConfigTable``: its text (``{`` to ``}``), each member's span in it
    (key start, value start, end), name and `TopicConfig`, and the resulting table. Kept
    per broker by `RegisterBroker` (about the size of the table's text)."""

    __slots__ = ("by_key", "configs", "keys", "spans", "table", "text")

    def __init__(self, text: str, spans: list[tuple[int, int, int]], keys: list[str],
                 configs: list[TopicConfig], table: TopicTable) -> None:
        self.text, self.spans, self.keys, self.configs, self.table = (
            text, spans, keys, configs, table)
        self.by_key: dict[str, int] | None = None  # name -> last member index, on demand

    def index_of(self, key: str) -> int | None:
        if self.by_key is None:
            self.by_key = {k: i for i, k in enumerate(self.keys)}
        return self.by_key.get(key)


def decode_against(data: bytes, version: int, previous: TableText | None,
                   memo: TopicConfigMemo) -> tuple[RegisterBrokerBody, TableText] | None:
    """The JSON body ``data`` (see the module docstring), with the table read against
    ``previous`` and new members through ``memo``; None when this decode cannot vouch
    for the result (then use the full decode). O(changed topics) plus one pass over the
    text in C."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    start = text.find(_MARK)
    if start < 0:
        return None
    start += len(_MARK)
    if text[start:start + 1] != "{":
        return None
    try:
        if previous is not None and text.startswith(previous.text, start):
            table, end = previous, start + len(previous.text)
        else:
            read = _read_table(text, start, previous, memo)
            if read is None:
                return None
            table, end = read
        head, tail = text[:start], text[end:]
        wrapper, servers = _wrapper(json.loads(head + "{}" + tail), version)
        probe, _ = _wrapper(json.loads(head + '{"":0}' + tail), version)
        if wrapper.get("topicConfigTable") != {} or probe.get("topicConfigTable") != {"": 0}:
            return None
        return RegisterBrokerBody._from_wrapper(wrapper, servers, table.table), table
    except (InvalidRequest, ValueError, RecursionError, TypeError, IndexError,
            StopIteration):
        return None


def _wrapper(doc: Any, version: int) -> tuple[Mapping[str, Any], Any]:
    """The topic-config wrapper and the filter servers, as `RegisterBrokerBody.decode`
    reads them."""
    doc = j.document(doc, "RegisterBrokerBody")
    if version < V3_0_11:
        return doc, None
    wrapper = j.as_mapping(j.get(doc, "topicConfigSerializeWrapper"),
                           "topicConfigSerializeWrapper")
    return wrapper, j.get(doc, "filterServerList")


def _run(text: str, pos: int, prev_text: str, prev_spans: list[tuple[int, int, int]],
         at: int) -> int:
    """How many of the previous members from ``at`` on ``text`` repeats from ``pos`` (with
    the separators between them): a block of members is compared as one text, the
    longest found by bisection (a block matches only if every shorter one does).
    O(log T) comparisons in C."""
    k0 = prev_spans[at][0]
    last = len(prev_spans) - at
    if text.startswith(prev_text[k0:prev_spans[-1][2]], pos):
        return last
    low, high = 0, last - 1  # low members match; high + 1 do not
    while low < high:
        mid = (low + high + 1) // 2
        if text.startswith(prev_text[k0:prev_spans[at + mid - 1][2]], pos):
            low = mid
        else:
            high = mid - 1
    return low


def _after_member(text: str, pos: int) -> tuple[int, bool] | None:
    """After a member's value at ``pos``: (where the next member starts, False), or (just
    past the object's ``}``, True); None if neither a ``,`` nor a ``}`` follows."""
    pos = _blank(text, pos).end()
    if text[pos] == "}":
        return pos + 1, True
    if text[pos] != ",":
        return None
    return _blank(text, pos + 1).end(), False


def _read_table(text: str, start: int, previous: TableText | None, memo: TopicConfigMemo
                ) -> tuple[TableText, int] | None:
    """The object at ``text[start] == "{"``, member by member (see the module docstring);
    None if it is not a well-formed table of topic configs."""
    prev_text = previous.text if previous is not None else ""
    prev_spans = previous.spans if previous is not None else []
    prev_keys = previous.keys if previous is not None else []
    prev_configs = previous.configs if previous is not None else []
    count = len(prev_spans)
    spans: list[tuple[int, int, int]] = []
    keys: list[str] = []
    configs: list[TopicConfig] = []
    members: dict[str, TopicConfig] = {}
    startswith = text.startswith
    pos = _blank(text, start + 1).end()
    at = 0  # the previous member expected here
    if text[pos] == "}":
        end = pos + 1
    else:
        while True:
            key_at = pos
            run = _run(text, pos, prev_text, prev_spans, at) if at < count else 0
            if run:  # the previous body's next `run` members, repeated here
                k0, e0 = prev_spans[at][0], prev_spans[at + run - 1][2]
                shift = key_at - start - k0
                spans.extend([(k + shift, v + shift, e + shift)
                              for k, v, e in prev_spans[at:at + run]])
                same_keys, same = prev_keys[at:at + run], prev_configs[at:at + run]
                keys.extend(same_keys)
                configs.extend(same)
                members.update(zip(same_keys, same, strict=True))
                pos += e0 - k0
                at += run
            else:
                if text[pos] != '"':
                    return None
                key, pos = _scan(text, pos)
                pos = _blank(text, pos).end()
                if text[pos] != ":":
                    return None
                pos = value_at = _blank(text, pos + 1).end()
                if at < count and prev_keys[at] == key:  # a changed value at the same place
                    index: int | None = at
                else:
                    index = previous.index_of(key) if previous is not None else None
                config: TopicConfig | None = None
                if index is not None:
                    _, v0, e0 = prev_spans[index]
                    if startswith(prev_text[v0:e0], pos):  # this name's previous value
                        config = prev_configs[index]
                        pos += e0 - v0
                    at = index + 1
                if config is None:
                    value, pos = _scan(text, pos)
                    config = memo(value)
                members[key] = config
                spans.append((key_at - start, value_at - start, pos - start))
                keys.append(key)
                configs.append(config)
            after = _after_member(text, pos)
            if after is None:
                return None
            pos, last = after
            if last:
                end = pos
                break
    table = TopicTable.of_configs(list(members.values()))
    return TableText(text[start:end], spans, keys, configs, table), end
