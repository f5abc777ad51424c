"""The name-server host's operator log: logger ``routing.remoting``, one structured line
per event (message ``event key=value ...``, the same fields in the record's ``extra`` for
JSON formatters), and how each broker request is logged.

A broker's first registration, a change of its registration body (topic table or data
version) and its removal are logged at INFO; an unchanged re-registration or a heartbeat at
DEBUG. What a registration was (first, changed, unchanged) comes from the processor
(`Outcome.registered`), which remembers each live broker's last body; the log keeps nothing.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ..processor._request import Outcome
from ..wire._codec import RemotingCommand
from ..wire._codes import RequestCode, ResponseCode

__all__ = ["RemovalCounter", "log", "log_broker_request", "log_event"]

log = logging.getLogger("routing.remoting")

_HEARTBEATS = frozenset({RequestCode.BROKER_HEARTBEAT, RequestCode.QUERY_DATA_VERSION})


class RemovalCounter(Protocol):
    """What the log tells the metrics (`HostMetrics`): a broker removed, and why."""

    def broker_removed(self, reason: str, count: int = 1) -> None: ...


def log_event(level: int, event: str, **fields: Any) -> None:
    """One structured line: message ``event key=value ...``, the same fields in ``extra``.
    O(fields) when the level is enabled, one check otherwise."""
    if log.isEnabledFor(level):
        text = " ".join(f"{k}={v}" for k, v in fields.items())
        log.log(level, "%s %s", event, text, extra={"event": event, **fields})


def log_broker_request(command: RemotingCommand, outcome: Outcome, channel: object,
                       metrics: RemovalCounter | None) -> None:
    """Log one answered broker request (REGISTER/UNREGISTER_BROKER, heartbeats). O(1) for
    the common case, an unchanged re-registration or a heartbeat below DEBUG."""
    response = outcome.response
    ok = response is None or response.code == ResponseCode.SUCCESS
    code = command.code
    kind = outcome.registered
    if (kind == "unchanged" or code in _HEARTBEATS) and not log.isEnabledFor(logging.DEBUG):
        return  # the common case: an unchanged heartbeat, not logged
    ext = command.ext_fields
    fields = {"cluster": ext.get("clusterName"), "broker_name": ext.get("brokerName"),
              "broker_id": ext.get("brokerId"), "broker_addr": ext.get("brokerAddr"),
              "channel": channel}
    if code == RequestCode.REGISTER_BROKER:
        if not ok or kind is None:
            log_event(logging.WARNING, "broker_register_failed",
                      remark=response.remark if response else None, **fields)
        elif kind == "first":
            log_event(logging.INFO, "broker_registered", **fields)
        elif kind == "changed":
            log_event(logging.INFO, "broker_changed", what="topic table or data version",
                      **fields)
        else:
            log_event(logging.DEBUG, "broker_heartbeat", kind="register", **fields)
    elif code == RequestCode.UNREGISTER_BROKER:
        if ok:
            if metrics is not None:
                metrics.broker_removed("unregistered")
            log_event(logging.INFO, "broker_removed", reason="unregistered", **fields)
    else:
        log_event(logging.DEBUG, "broker_heartbeat",
                  kind=RequestCode(code).name.lower(), **fields)
