"""A broker's requests besides (UN)REGISTER_BROKER (``_register_broker``):
QUERY_DATA_VERSION (322), BROKER_HEARTBEAT (904), GET_BROKER_MEMBER_GROUP (901) and the
operator's WIPE/ADD_WRITE_PERM_OF_BROKER (205, 327). Java: ``DefaultRequestProcessor``'s
``queryBrokerTopicConfig``, ``brokerHeartbeat``, ``getBrokerMemberGroup``,
``wipeWritePermOfBroker`` and ``addWritePermOfBroker``.

Each function is a request handler: ``(processor, request, fields, channel) -> Outcome``
(`routing.remoting.processor._request`); each costs the manager's call (O(1) for the
liveness requests, O(the group's topics) for the permission ones) plus O(body).
"""

from __future__ import annotations

from collections.abc import Hashable

from ..._values import DataVersion
from ..wire._bodies import (
    dumps_legacy,
    encode_broker_member_group,
    encode_data_version,
    loads,
)
from ..wire._codec import RemotingCommand
from ..wire._codes import ResponseCode
from ._request import Context, Fields, Outcome, answer, ignored, null_field, ok

__all__ = ["add_write_perm", "heartbeat", "member_group", "query_data_version",
           "wipe_write_perm"]

#: A version no broker sends, standing in for QUERY_DATA_VERSION's missing body.
_NO_VERSION = DataVersion(state_version=-1, timestamp=-1, counter=-1)
#: ``RemotingCommand.createResponseCommand(null)``'s remark, left on one SUCCESS answer.
_NO_CODE_REMARK = "not set any response code"


def query_data_version(proc: Context, request: RemotingCommand, f: Fields,
                       channel: Hashable | None) -> Outcome:
    f.text("brokerName")
    f.long("brokerId")
    cluster, addr = f.text("clusterName"), f.text("brokerAddr")
    version = _data_version(request.body)
    answer = proc.manager.query_data_version(cluster=cluster, broker_addr=addr,
                                             data_version=version)
    changed = answer.changed or version is _NO_VERSION
    body = encode_data_version(answer.stored) if answer.stored is not None else b""
    return ok(request, ext={"changed": "true" if changed else "false"}, body=body)


def _data_version(body: bytes) -> DataVersion:
    """The body's version; `_NO_VERSION` for no body, ``null`` or an array (Java's fastjson
    reads both as a null version: the broker is told its version changed, and its liveness
    is refreshed as a BROKER_HEARTBEAT with the same header would). Any other body that is
    not a version object raises `InvalidRequest` (SYSTEM_ERROR, as Java's parser error).
    O(body)."""
    if not body:
        return _NO_VERSION
    doc = loads(body, "DataVersion")
    return _NO_VERSION if doc is None or isinstance(doc, list) else DataVersion.from_json(doc)


def heartbeat(proc: Context, request: RemotingCommand, f: Fields,
              channel: Hashable | None) -> Outcome:
    """The most frequent request of a fleet: three dictionary reads, the manager's O(1)
    refresh and a bare SUCCESS (`answer`). Java answers SUCCESS even for an unknown
    broker."""
    ext = f.ext
    cluster, addr = ext.get("clusterName"), ext.get("brokerAddr")
    if cluster is None or addr is None or "brokerName" not in ext:
        f.text("brokerName")  # raises naming the first missing field, in Java's order
        f.text("clusterName")
        f.text("brokerAddr")
    assert cluster is not None and addr is not None
    proc.manager.heartbeat(cluster=cluster, broker_addr=addr)
    return answer(request.make_response(ResponseCode.SUCCESS))


def member_group(proc: Context, request: RemotingCommand, f: Fields,
                 channel: Hashable | None) -> Outcome:
    """A missing clusterName or brokerName names no group: the empty group Java answers
    (the names given, no members), the missing field in the remark."""
    cluster, name = f.given("clusterName"), f.given("brokerName")
    if cluster is None or name is None:
        body = dumps_legacy({"brokerMemberGroup": {"brokerAddrs": {}, "brokerName": name,
                                                   "cluster": cluster}})
        return ok(request, body=body,
                  remark=null_field("clusterName" if cluster is None else "brokerName"))
    group = proc.manager.broker_member_group(cluster, name)
    # Java's getBrokerMemberGroup never clears createResponseCommand's default remark
    return Outcome(response=request.make_response(
        ResponseCode.SUCCESS, _NO_CODE_REMARK, body=encode_broker_member_group(group)))


def wipe_write_perm(proc: Context, request: RemotingCommand, f: Fields,
                    channel: Hashable | None) -> Outcome:
    """A missing brokerName wipes nothing: SUCCESS with ``wipeTopicCount=0`` (Java)."""
    name = f.given("brokerName")
    if name is None:
        return ignored(request, null_field("brokerName"), ext={"wipeTopicCount": "0"})
    return ok(request, ext={"wipeTopicCount": str(proc.manager.wipe_write_perm(name))})


def add_write_perm(proc: Context, request: RemotingCommand, f: Fields,
                   channel: Hashable | None) -> Outcome:
    """A missing brokerName adds nothing: SUCCESS with ``addTopicCount=0`` (Java)."""
    name = f.given("brokerName")
    if name is None:
        return ignored(request, null_field("brokerName"), ext={"addTopicCount": "0"})
    return ok(request, ext={"addTopicCount": str(proc.manager.add_write_perm(name))})
