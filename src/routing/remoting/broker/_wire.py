"""The broker side on the wire, sans-I/O: `routing.heartbeat` actions as remoting requests,
and the name server's responses fed back to the `BrokerHeartbeat` (Java ``BrokerOuterAPI``).

`request_for` builds the command an action sends (None for the events, which send
nothing); `deliver` hands the response (or None when the request failed or timed out) to the
heartbeat and returns the actions that follow. The asyncio host (`BrokerHost`) only moves
bytes.

Registrations carry the truthful ``compressed`` header: Java 5.x deflates the body when
``compressedRegister`` is set but always writes ``compressed=false`` (Java study §3.6), so a
5.x name server cannot read it; here the header says what the body is.
"""

from __future__ import annotations

from collections.abc import Mapping

from ... import heartbeat
from ..._errors import InvalidRequest
from ..._messages import RegisterResult, VersionAnswer
from ..._values import TopicRouteData
from ...heartbeat import Action, BrokerHeartbeat
from ..wire._bodies import (
    RegisterBrokerBody,
    body_crc32,
    decode_broker_member_group,
    decode_data_version,
    decode_kv_table,
    decode_route,
    encode_data_version,
    encode_route,
)
from ..wire._codec import FLAG_ONEWAY, RemotingCommand
from ..wire._codes import CURRENT_VERSION, ZONE_NAME, RequestCode, ResponseCode

__all__ = ["Wanted", "deliver", "notify_fields", "request_for"]

#: What a request expects back: nothing (oneway), or a response within ``timeout_ms``.
Wanted = tuple[RemotingCommand, int | None]


def _identity(a: heartbeat.SendVersionQuery | heartbeat.SendHeartbeat | heartbeat.SendUnregister,
              ) -> dict[str, str]:
    return {"brokerAddr": a.broker_addr, "brokerId": str(a.broker_id),
            "brokerName": a.broker_name, "clusterName": a.cluster}


def request_for(action: Action, opaque: int, *, compressed: bool = False) -> Wanted | None:
    """The request ``action`` sends and its timeout (None for a oneway send), or None for
    an action that sends nothing (`UpdateMasterAddress`, `MinBrokerChanged`,
    `CheckNameServer`). O(body size)."""
    ext: dict[str, str]
    body = b""
    oneway = False
    if isinstance(action, heartbeat.SendRegistration):
        reg = action.registration
        ext = {"brokerAddr": reg.broker_addr, "brokerId": str(reg.broker_id),
               "brokerName": reg.broker_name, "clusterName": reg.cluster,
               "haServerAddr": reg.ha_server_addr or "",
               "enableActingMaster": "true" if reg.enable_acting_master else "false",
               "compressed": "true" if compressed else "false"}
        if reg.heartbeat_timeout_ms is not None:
            ext["heartbeatTimeoutMillis"] = str(reg.heartbeat_timeout_ms)
        if reg.zone_name:
            ext[ZONE_NAME] = reg.zone_name
        body = RegisterBrokerBody(data_version=reg.data_version, topics=reg.topics,
                                  topic_queue_mappings=reg.topic_queue_mappings,
                                  filter_servers=reg.filter_servers or ()).encode(
                                      compressed=compressed)
        ext["bodyCrc32"] = str(body_crc32(body))
        code, oneway = RequestCode.REGISTER_BROKER, action.oneway
    elif isinstance(action, heartbeat.SendVersionQuery):
        ext, body = _identity(action), encode_data_version(action.data_version)
        code, oneway = RequestCode.QUERY_DATA_VERSION, action.oneway
    elif isinstance(action, heartbeat.SendHeartbeat):
        ext, code, oneway = _identity(action), RequestCode.BROKER_HEARTBEAT, True
    elif isinstance(action, heartbeat.SendUnregister):
        ext, code = _identity(action), RequestCode.UNREGISTER_BROKER
    elif isinstance(action, heartbeat.SendTopicRegistration):
        ext = {"topic": action.topic}
        body = encode_route(TopicRouteData(queue_datas=(action.queue_data,)), standard=False)
        code = RequestCode.REGISTER_TOPIC_IN_NAMESRV
    elif isinstance(action, heartbeat.SendMemberGroupQuery):
        if action.via_route:
            ext, code = {"topic": action.route_topic}, RequestCode.GET_ROUTEINFO_BY_TOPIC
        else:
            ext = {"clusterName": action.cluster, "brokerName": action.broker_name}
            code = RequestCode.GET_BROKER_MEMBER_GROUP
    else:
        return None
    command = RemotingCommand(code=code, version=CURRENT_VERSION, opaque=opaque,
                              flag=FLAG_ONEWAY if oneway else 0, ext_fields=ext, body=body)
    return command, None if oneway else action.timeout_ms


def _version_answer(response: RemotingCommand) -> VersionAnswer:
    raw = response.ext_fields.get("changed")
    changed = raw is None or raw.lower() == "true"  # Java counts a null header as changed
    stored = decode_data_version(response.body) if response.body else None
    return VersionAnswer(changed=changed, stored=stored)


def deliver(hb: BrokerHeartbeat, name_server: str, action: Action,
            response: RemotingCommand | None) -> tuple[Action, ...]:
    """Feed the outcome of ``action`` to ``hb``: ``response=None`` means the request failed
    (connect or send error, or no answer in time: Java treats both as an exception). A
    response body that does not parse counts as a failure too. Returns the follow-ups."""
    rid = getattr(action, "request_id", None)
    if rid is None:
        return ()
    if response is None:
        return hb.on_failure(name_server, rid)
    ok = response.code == ResponseCode.SUCCESS
    try:
        if isinstance(action, heartbeat.SendRegistration):
            if not ok:
                return hb.on_error_response(name_server, rid)
            ext: Mapping[str, str] = response.ext_fields
            kv = decode_kv_table(response.body) if response.body else None
            return hb.on_register_reply(name_server, rid, RegisterResult(
                accepted=True, master_addr=ext.get("masterAddr") or None,
                ha_server_addr=ext.get("haServerAddr") or None), kv_table=kv)
        if isinstance(action, heartbeat.SendVersionQuery):
            if not ok:
                return hb.on_error_response(name_server, rid)
            return hb.on_version_reply(name_server, rid,
                                       _version_answer(response))
        if isinstance(action, heartbeat.SendTopicRegistration):
            return (hb.on_topic_reply(name_server, rid) if ok
                    else hb.on_error_response(name_server, rid))
        if isinstance(action, heartbeat.SendMemberGroupQuery):
            if not ok or not response.body:
                return hb.on_member_group(name_server, rid, None)
            if action.via_route:
                group = heartbeat.member_group_from_route(
                    decode_route(response.body), action.cluster, action.broker_name)
            else:
                group = decode_broker_member_group(response.body)
            return hb.on_member_group(name_server, rid, group)
    except InvalidRequest:
        return hb.on_failure(name_server, rid)
    return ()


def notify_fields(request: RemotingCommand) -> dict[str, object]:
    """The arguments of `BrokerHeartbeat.on_min_broker_id_changed` from a
    NOTIFY_MIN_BROKER_ID_CHANGE request (``NotifyMinBrokerIdChangeRequestHeader``). Raises
    `InvalidRequest` naming a missing or bad field."""
    ext = request.ext_fields
    raw = ext.get("minBrokerId")
    if raw is None or not raw.strip().lstrip("-").isdigit():
        raise InvalidRequest(f"minBrokerId must be an integer, got {raw!r}", field="minBrokerId",
                             value=raw)
    return {"min_broker_id": int(raw), "min_broker_addr": ext.get("minBrokerAddr") or None,
            "offline_broker_addr": ext.get("offlineBrokerAddr") or None,
            "ha_broker_addr": ext.get("haBrokerAddr") or None}
