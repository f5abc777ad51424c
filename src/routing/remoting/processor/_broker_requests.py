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
    decode_data_version,
    encode_broker_member_group,
    encode_data_version,
)
from ..wire._codec import RemotingCommand
from ..wire._codes import ResponseCode
from ._request import Context, Fields, Outcome, ok

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
    version = decode_data_version(request.body) if request.body else _NO_VERSION
    answer = proc.manager.query_data_version(cluster=cluster, broker_addr=addr,
                                             data_version=version)
    changed = answer.changed or version is _NO_VERSION
    body = encode_data_version(answer.stored) if answer.stored is not None else b""
    return ok(request, ext={"changed": "true" if changed else "false"}, body=body)


def heartbeat(proc: Context, request: RemotingCommand, f: Fields,
              channel: Hashable | None) -> Outcome:
    f.text("brokerName")
    proc.manager.heartbeat(cluster=f.text("clusterName"), broker_addr=f.text("brokerAddr"))
    return ok(request)  # Java answers SUCCESS even for an unknown broker


def member_group(proc: Context, request: RemotingCommand, f: Fields,
                 channel: Hashable | None) -> Outcome:
    group = proc.manager.broker_member_group(f.text("clusterName"), f.text("brokerName"))
    # Java's getBrokerMemberGroup never clears createResponseCommand's default remark
    return Outcome(response=request.make_response(
        ResponseCode.SUCCESS, _NO_CODE_REMARK, body=encode_broker_member_group(group)))


def wipe_write_perm(proc: Context, request: RemotingCommand, f: Fields,
                    channel: Hashable | None) -> Outcome:
    count = proc.manager.wipe_write_perm(f.text("brokerName"))
    return ok(request, ext={"wipeTopicCount": str(count)})


def add_write_perm(proc: Context, request: RemotingCommand, f: Fields,
                   channel: Hashable | None) -> Outcome:
    count = proc.manager.add_write_perm(f.text("brokerName"))
    return ok(request, ext={"addTopicCount": str(count)})
