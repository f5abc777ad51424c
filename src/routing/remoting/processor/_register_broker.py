"""REGISTER_BROKER for `NameServerProcessor`: header and body to `Registration`, the
manager's call, and Java's reply (``DefaultRequestProcessor.registerBroker``).

Three paths, cheapest first; each answers byte for byte what the next would:

* **renewal** (``renew_unchanged``): a master's request equal to its last one (header
  fields, version, channel, body bytes; see `_memo`) stands for the very `Registration`
  the manager applied last, and `RouteInfoManager.renew` refreshes the broker in O(1)
  when applying it would change nothing but liveness. A master's reply never carries a
  master or HA address (Java step 12 fills them for slaves only) and such a renewal
  cannot change the group's smallest id (the id is already a member), so the reply is the
  full path's: SUCCESS, no ext fields, the order-topic KV table as body. ``renew`` tells
  no listener; see `NameServerProcessor` for when that matters.
* **remembered**: the same request, or the same body under a changed header, skips the
  CRC and the decoding; the manager's ``register`` then runs in full.
* **full**: CRC (when the request carries one), then the body: a JSON body read against
  the broker's previous topic table (`routing.remoting._table_decode`: O(changed topics)
  plus a pass in C), else decoded in full (the deflate form, or what that decoder
  declines); then ``register``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from .._messages import Registration
from .._values import MASTER_ID
from ._bodies import RegisterBrokerBody, body_crc32, encode_kv_table
from ._codec import RemotingCommand
from ._codes import NAMESPACE_ORDER_TOPIC_CONFIG, V3_0_11, V5_0_0, ZONE_NAME, ResponseCode
from ._memo import LastRegistration
from ._outcome import Outcome
from ._table_decode import decode_against

if TYPE_CHECKING:
    from ._processor import NameServerProcessor, _Fields

__all__ = ["register_broker", "registration_of"]

#: ``RouteInfoManager.renew``'s shape: the new generation, or None (then ``register``).
Renew = Callable[[Registration], "int | None"]


def register_broker(proc: NameServerProcessor, request: RemotingCommand, f: _Fields,
                    channel: Hashable | None) -> Outcome:
    """REGISTER_BROKER's `Outcome`. O(1) on the renewal path (plus the order-topic KV
    table, usually empty); otherwise the manager's ``register`` plus, for a new body,
    O(body) to check and decode it."""
    registration = registration_of(proc, request, f, channel)
    if isinstance(registration, Outcome):
        return registration
    renew = proc._renew
    if (renew is not None and registration.broker_id == MASTER_ID
            and renew(registration) is not None):
        return Outcome(response=request.make_response(ResponseCode.SUCCESS,
                                                      body=_order_topic_table(proc)))
    result = proc.manager.register(registration)
    if not result.accepted:
        reason = result.rejection or "rejected"
        if reason.startswith("stale"):
            return Outcome(response=request.make_response(ResponseCode.SUCCESS))
        return Outcome(response=request.make_response(
            ResponseCode.SYSTEM_ERROR, f"register broker failed: {reason}"))
    ext = {}
    if result.ha_server_addr is not None:
        ext["haServerAddr"] = result.ha_server_addr
    if result.master_addr is not None:
        ext["masterAddr"] = result.master_addr
    response = request.make_response(ResponseCode.SUCCESS, ext_fields=ext,
                                     body=_order_topic_table(proc))
    return Outcome(response=response, notifications=proc._notifications(result.notifications))


def _order_topic_table(proc: NameServerProcessor) -> bytes:
    """The reply's body: the KV namespace of order-topic configs, when enabled and set."""
    if proc.return_order_topic_config_to_broker:
        table = proc.kv.namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
        if table is not None:
            return encode_kv_table(table)
    return b""


def registration_of(proc: NameServerProcessor, request: RemotingCommand, f: _Fields,
                    channel: Hashable | None) -> Registration | Outcome:
    """The `Registration` a REGISTER_BROKER request stands for, or the CRC failure.

    A request equal to the broker's last one (header fields, version, channel, and the
    body byte for byte) gets the remembered `Registration` itself (see `_memo`): no
    CRC (equal bytes were checked), no decoding, and the manager's O(1) case. The same
    body under a changed header (a reconnect, a new timeout) skips CRC and decoding.
    Otherwise O(body): CRC, JSON and the topic table's checks.
    """
    data, version, ext = request.body, request.version, request.ext_fields
    key = (ext.get("clusterName"), ext.get("brokerAddr"))
    memo = proc._memo.get(key)
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
            return proc._fail(request, ResponseCode.SYSTEM_ERROR, "crc32 not match")
    if memo is not None and memo.compressed == compressed and memo.era == era:
        body = memo.body
    elif data and not compressed:  # against the broker's previous table, else in full
        against = decode_against(data, version, table_text, RegisterBrokerBody._from_wrapper)
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
    proc._memo.remember(key, LastRegistration(
        ext=ext, version=version, data=data, channel=channel, compressed=compressed,
        era=era, crc=checked, body=body, registration=registration, table_text=table_text))
    return registration
