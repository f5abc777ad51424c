"""What `NameServerProcessor` hands its host: `Outcome` (the response, channels to close,
notifications to send) and `Notification` (a oneway request to a broker)."""

from __future__ import annotations

from collections.abc import Hashable

import attrs

from .._messages import ExpiredBroker
from ._codec import RemotingCommand

__all__ = ["Notification", "Outcome"]


@attrs.frozen(kw_only=True)
class Notification:
    """A oneway request the host should send to ``addr`` (a broker's listen address).

    Java sends NOTIFY_MIN_BROKER_ID_CHANGE over a fresh client connection with a 300 ms
    timeout (``RouteInfoManager.notifyMinBrokerIdChanged``); losing one is harmless.
    """

    addr: str
    command: RemotingCommand


@attrs.frozen(kw_only=True)
class Outcome:
    """What the host must do after one `NameServerProcessor` call.

    ``response`` is None for oneway requests and for incoming responses. ``close`` lists
    channels to close (expired brokers). ``removed`` is for logging. ``error`` is an
    unexpected exception turned into SYSTEM_ERROR, for the host to log.
    """

    response: RemotingCommand | None = None
    close: tuple[Hashable, ...] = ()
    notifications: tuple[Notification, ...] = ()
    removed: tuple[ExpiredBroker, ...] = ()
    error: Exception | None = attrs.field(default=None, eq=False)
