"""Registration rounds: what one call of ``registerBrokerAll`` (or of the incremental and
single-topic registrations, which share its monitor in Java) sends, and its state in flight."""

from __future__ import annotations

from collections import deque

import attrs

from .._messages import Registration, VersionAnswer
from .._validate import fail
from .._values import DataVersion, QueueData, TopicConfig
from ._rules import QueryOutcome

__all__ = ["Round", "RoundSpec", "TopicSend", "check_topic_config"]


@attrs.frozen(kw_only=True)
class TopicSend:
    """One REGISTER_TOPIC_IN_NAMESRV step of a single-topic round."""

    topic: str
    queue_data: QueueData


Step = Registration | TopicSend


@attrs.frozen(kw_only=True)
class RoundSpec:
    """One call of ``registerBrokerAll(checkOrderConfig, oneway, forceRegister)``, or, with
    ``steps``, of ``registerIncrementBrokerData``/``registerSingleTopicAll`` (prebuilt)."""

    force: bool
    oneway: bool
    periodic: bool  # the scheduled run: skipped while isolated or before should_start
    check_order: bool = True
    steps: tuple[Step, ...] | None = None


@attrs.define(kw_only=True)
class Round:
    """A round in flight: maybe a query phase, then one send per step, each waiting."""

    spec: RoundSpec
    version: DataVersion
    chunks: deque[Step]
    querying: bool = False
    #: the step being waited for is a REGISTER_TOPIC_IN_NAMESRV
    topic_step: bool = False
    deadline_ms: int = 0
    #: request id → name server, for requests whose outcome is still awaited.
    pending: dict[int, str] = attrs.field(factory=dict)
    answers: list[VersionAnswer | QueryOutcome] = attrs.field(factory=list)
    won: bool = False


def check_topic_config(value: object) -> TopicConfig:
    if not isinstance(value, TopicConfig):
        fail("topics[]", value, "a TopicConfig")
    return value
