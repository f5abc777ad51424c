"""``routing serve --shadow``: a name server for brokers only, beside a Java fleet.

A broker registers with every name server in its ``namesrvAddr``, so a ``routing serve
--journal DIR`` added to that list receives exactly the registrations, heartbeats, topic
changes and unregisters the Java name servers receive, and its journal is what the pipeline
analyses (docs/shadow.md). What a shadow must not do is hand routes to clients: its view is
its own (its own scan instants, its own network), and a client that was pointed at it by
mistake should fail loudly, not route by it. So a shadow answers every broker request and
every operator request as a name server does, and refuses GET_ROUTEINFO_BY_TOPIC with
SYSTEM_ERROR and `SHADOW_REMARK` — the answer Java gives while it is not ready
(``needWaitForService``): a client keeps its cached route and asks another name server
next time; it does not fall back to a default topic as TOPIC_NOT_EXIST can make it do.

No Java counterpart.
"""

from __future__ import annotations

from collections.abc import Hashable

from ..processor._processor import NameServerProcessor
from ..processor._request import Outcome
from ..wire._codec import RemotingCommand
from ..wire._codes import RequestCode, ResponseCode

__all__ = ["CLIENT_ROUTE_CODES", "SHADOW_REMARK", "ShadowProcessor"]

#: Requests a shadow refuses: clients' route reads.
CLIENT_ROUTE_CODES = frozenset({RequestCode.GET_ROUTEINFO_BY_TOPIC})
SHADOW_REMARK = ("shadow name server: it records brokers and answers no route reads "
                 "(routing serve --shadow); use the fleet's name servers")


class ShadowProcessor(NameServerProcessor):
    """A `NameServerProcessor` that refuses `CLIENT_ROUTE_CODES` (O(1) more per request)."""

    heartbeats_unchanged = True  # `process` hands them to NameServerProcessor's

    def process(self, request: RemotingCommand, channel: Hashable | None = None) -> Outcome:
        if request.code in CLIENT_ROUTE_CODES and not request.is_response:
            if request.is_oneway:
                return Outcome()
            return Outcome(response=request.make_response(ResponseCode.SYSTEM_ERROR,
                                                          SHADOW_REMARK))
        return super().process(request, channel)
