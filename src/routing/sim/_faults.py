"""Simulation settings, fault specifications, and the seeded fault plan.

Every fault is a frozen value with the instant it strikes (``at_ms``, simulated ms) and the
group (index) or name server (index) it hits. A plan is either given explicitly (tests) or
drawn from a named profile with a seeded RNG (`plan_faults`): the same seed always gives the
same plan. Within a plan, a group or a name server is hit by at most one fault at a time
(each fault keeps its target busy until its effects have settled), so every fault can be
measured on its own.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import ClassVar, Literal, TypeAlias

import attrs

from .._errors import InvalidRequest
from .._messages import RoutingConfig
from .._validate import fail, non_negative, positive, valid_int

__all__ = [
    "FAULT_KINDS",
    "PROFILES",
    "Crash",
    "CrashMode",
    "DegradedLink",
    "Failover",
    "Fault",
    "NameServerRestart",
    "Partition",
    "SimConfig",
    "TopicCreate",
    "TopicDelete",
    "plan_faults",
]

def _to_ints(value: Sequence[int]) -> tuple[int, ...]:
    return tuple(value)



#: ``halt``: the machine vanishes (no FIN, no unregister: expiry only). ``kill``: the process
#: dies and its connections close (the name servers see a channel close). ``clean``: a
#: shutdown: UNREGISTER_BROKER to every name server, then the connections close (Java §3.9).
CrashMode = Literal["halt", "kill", "clean"]


@attrs.frozen(kw_only=True)
class Crash:
    """Broker ``broker_id`` of group ``group`` stops at ``at_ms``; it restarts (same address,
    same id, its persisted data version) after ``restart_after_ms``, or never (None)."""

    kind: ClassVar[str] = "crash"
    at_ms: int = attrs.field(validator=non_negative)
    group: int = attrs.field(validator=non_negative)
    broker_id: int = attrs.field(default=0, validator=non_negative)
    mode: CrashMode = "halt"
    restart_after_ms: int | None = None


@attrs.frozen(kw_only=True)
class Partition:
    """Messages between a broker and the name servers ``nameservers`` (indexes) are dropped,
    both ways, for ``duration_ms``. Connections stay open (no channel event)."""

    kind: ClassVar[str] = "partition"
    at_ms: int = attrs.field(validator=non_negative)
    group: int = attrs.field(validator=non_negative)
    nameservers: tuple[int, ...] = attrs.field(converter=_to_ints)
    duration_ms: int = attrs.field(validator=positive)
    broker_id: int = attrs.field(default=0, validator=non_negative)


@attrs.frozen(kw_only=True)
class NameServerRestart:
    """Name server ``nameserver`` (index) goes down at ``at_ms`` and comes back ``down_ms``
    later with empty state; routes are refused until its readiness gate opens
    (``RoutingConfig.wait_for_service_ms``, D10)."""

    kind: ClassVar[str] = "ns_restart"
    at_ms: int = attrs.field(validator=non_negative)
    nameserver: int = attrs.field(validator=non_negative)
    down_ms: int = attrs.field(validator=positive)


@attrs.frozen(kw_only=True)
class Failover:
    """The group's master halts; ``promote_after_ms`` later its lowest-id live slave
    re-registers as broker id 0 with a bumped data version and ``state_version + 1`` (the new
    epoch, as a controller switch does). The old master comes back as a slave, taking the
    promoted slave's old id, after ``restart_old_after_ms`` (None: never)."""

    kind: ClassVar[str] = "failover"
    at_ms: int = attrs.field(validator=non_negative)
    group: int = attrs.field(validator=non_negative)
    promote_after_ms: int = attrs.field(default=20_000, validator=non_negative)
    restart_old_after_ms: int | None = None


@attrs.frozen(kw_only=True)
class TopicCreate:
    """A new topic on the group's brokers (data version bump); the master registers at
    once (Java ``registerIncrementBrokerData``, here a full registration)."""

    kind: ClassVar[str] = "topic_create"
    at_ms: int = attrs.field(validator=non_negative)
    group: int = attrs.field(validator=non_negative)
    topic: str | None = None  # None: the next "New-NNNN" name


@attrs.frozen(kw_only=True)
class TopicDelete:
    """An admin deletes a topic: from every broker hosting it (version bumps, immediate
    registration), then, ``admin_delay_ms`` later, from every name server
    (``delete_topic(topic, cluster)``). ``topic=None`` picks one of the group's topics."""

    kind: ClassVar[str] = "topic_delete"
    at_ms: int = attrs.field(validator=non_negative)
    group: int = attrs.field(validator=non_negative)
    topic: str | None = None
    admin_delay_ms: int = attrs.field(default=1_000, validator=non_negative)


@attrs.frozen(kw_only=True)
class DegradedLink:
    """For ``duration_ms``, the broker's messages (both ways, every name server) are lost
    with probability ``loss_rate`` and delayed by ``extra_latency_ms`` more."""

    kind: ClassVar[str] = "degraded"
    at_ms: int = attrs.field(validator=non_negative)
    group: int = attrs.field(validator=non_negative)
    duration_ms: int = attrs.field(validator=positive)
    loss_rate: float = 0.5
    extra_latency_ms: int = attrs.field(default=500, validator=non_negative)
    broker_id: int = attrs.field(default=0, validator=non_negative)


Fault: TypeAlias = (
    Crash | Partition | NameServerRestart | Failover | TopicCreate | TopicDelete | DegradedLink
)

#: Every fault kind, by name (the ``--faults`` vocabulary).
FAULT_KINDS: dict[str, type[Fault]] = {c.kind: c for c in (
    Crash, Partition, NameServerRestart, Failover, TopicCreate, TopicDelete, DegradedLink)}

#: Named profiles: (weights by kind, mean ms between faults).
PROFILES: dict[str, tuple[dict[str, int], int]] = {
    "none": ({}, 0),
    "default": ({"crash": 4, "partition": 2, "failover": 1, "ns_restart": 1,
                 "topic_create": 2, "topic_delete": 1, "degraded": 1}, 300_000),
    "heavy": ({"crash": 4, "partition": 2, "failover": 1, "ns_restart": 1,
               "topic_create": 2, "topic_delete": 1, "degraded": 1}, 60_000),
}

#: A target stays busy this long after its fault's effects end, so faults do not overlap.
SETTLE_MS = 180_000


def _to_faults(value: str | Sequence[Fault]) -> str | tuple[Fault, ...]:
    return value if isinstance(value, str) else tuple(value)


def _sim_routing() -> RoutingConfig:
    return RoutingConfig(wait_for_service_ms=45_000)


@attrs.frozen(kw_only=True)
class SimConfig:
    """What to simulate. All durations are simulated milliseconds.

    ``groups`` broker groups of one master and ``slaves`` slaves each, ``nameservers`` name
    servers (each a `RouteInfoManager` with ``routing`` as config, scanned every
    ``scan_interval_ms``), ``clients`` clients polling ``client_topics`` topics each every
    ``client_poll_ms``. Each group hosts its own topic, the cluster topic, and its share of
    ``groups * topics_per_group / groups_per_topic`` business topics. ``faults`` is a profile
    name (``"default"``, ``"heavy"``, ``"none"``, or comma-separated kinds such as
    ``"crash,partition"``) drawn every ``fault_interval_ms`` on average (None: the profile's),
    or an explicit sequence of faults. Every message is lost with probability ``loss_rate``
    and takes ``latency_min_ms`` plus an exponential delay of mean ``latency_mean_ms``.
    ``acting_master`` runs the brokers in slave-acting-master mode (``enableSlaveActingMaster``:
    a QUERY_DATA_VERSION heartbeat every 1 000 ms, a 10 000 ms timeout); pair it with
    ``routing=RoutingConfig(support_acting_master=True, ...)`` for the route rewrite.
    ``snapshot_every_ms`` makes every journal carry a snapshot of its name server that often
    (``docs/journal.md``, "Snapshots").
    """

    groups: int = attrs.field(default=20, validator=positive)
    slaves: int = attrs.field(default=1, validator=non_negative)
    nameservers: int = attrs.field(default=3, validator=positive)
    duration_ms: int = attrs.field(default=7_200_000, validator=positive)
    seed: int = attrs.field(default=0, validator=valid_int)
    faults: str | tuple[Fault, ...] = attrs.field(
        default="default", converter=_to_faults)
    fault_interval_ms: int | None = None
    topics_per_group: int = attrs.field(default=4, validator=non_negative)
    groups_per_topic: int = attrs.field(default=2, validator=positive)
    clients: int = attrs.field(default=3, validator=non_negative)
    client_topics: int = attrs.field(default=20, validator=non_negative)
    client_poll_ms: int = attrs.field(default=30_000, validator=positive)
    scan_interval_ms: int = attrs.field(default=5_000, validator=positive)
    register_period_ms: int = attrs.field(default=30_000, validator=positive)
    acting_master: bool = False
    routing: RoutingConfig = attrs.field(factory=_sim_routing)
    loss_rate: float = attrs.field(default=0.0005)
    latency_min_ms: int = attrs.field(default=1, validator=non_negative)
    latency_mean_ms: float = 4.0
    cluster: str = "DefaultCluster"
    #: Each journal gets a ``snapshot`` line every this many simulated ms (None: never).
    snapshot_every_ms: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(positive))

    @faults.validator
    def _check_faults(self, attribute: object, value: str | tuple[Fault, ...]) -> None:
        if isinstance(value, str):
            _profile(value)
            return
        for fault in value:
            if not isinstance(fault, tuple(FAULT_KINDS.values())):
                raise InvalidRequest(f"SimConfig.faults: not a fault: {fault!r:.80}",
                                     field="SimConfig.faults", value=fault)

    @loss_rate.validator
    def _check_loss(self, attribute: object, value: float) -> None:
        if not 0.0 <= value < 1.0:
            fail("SimConfig.loss_rate", value, "in [0, 1)")


def _profile(name: str) -> tuple[dict[str, int], int]:
    if name in PROFILES:
        return PROFILES[name]
    kinds = [k.strip() for k in name.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if not kinds or unknown:
        raise InvalidRequest(f"faults: unknown fault profile {name!r}: use one of "
                             f"{', '.join(PROFILES)} or comma-separated kinds from "
                             f"{', '.join(FAULT_KINDS)}", field="faults", value=name)
    return dict.fromkeys(kinds, 1), PROFILES["default"][1]


def plan_faults(config: SimConfig) -> tuple[Fault, ...]:
    """The faults of a run: ``config.faults`` itself when explicit, else drawn from the
    profile with ``random.Random(f"{seed}:faults")``. Faults start after a 60 s warm-up and
    end before the last settle period; a busy target is not hit again. O(faults)."""
    if not isinstance(config.faults, str):
        return tuple(sorted(config.faults, key=lambda f: f.at_ms))
    weights, mean = _profile(config.faults)
    mean = config.fault_interval_ms or mean
    if not weights or mean <= 0:
        return ()
    if config.slaves == 0:
        weights = {k: w for k, w in weights.items() if k != "failover"}
    if not weights:
        return ()
    rng = random.Random(f"{config.seed}:faults")
    kinds = sorted(weights)
    cum = [weights[k] for k in kinds]
    group_busy = [0] * config.groups
    ns_busy = [0] * config.nameservers
    out: list[Fault] = []
    t = 60_000
    last = config.duration_ms - SETTLE_MS
    while True:
        t += max(1_000, int(rng.expovariate(1.0 / mean)))
        if t >= last:
            return tuple(out)
        kind = rng.choices(kinds, weights=cum)[0]
        if kind == "ns_restart":
            free = [i for i, b in enumerate(ns_busy) if b <= t]
            if not free or config.nameservers < 2:
                continue
            idx = rng.choice(free)
            down = rng.randint(5_000, 60_000)
            out.append(NameServerRestart(at_ms=t, nameserver=idx, down_ms=down))
            ns_busy[idx] = t + down + SETTLE_MS
            continue
        free = [i for i, b in enumerate(group_busy) if b <= t]
        if not free:
            continue
        g = rng.choice(free)
        fault, busy_for = _draw(kind, t, g, rng, config)
        out.append(fault)
        group_busy[g] = t + busy_for + SETTLE_MS


def _draw(kind: str, t: int, g: int, rng: random.Random,
          config: SimConfig) -> tuple[Fault, int]:
    """One fault of ``kind`` on group ``g`` at ``t``, and how long its effects last (ms)."""
    member = 0 if config.slaves == 0 or rng.random() < 0.7 else rng.randint(1, config.slaves)
    if kind == "crash":
        mode: CrashMode = rng.choices(("halt", "kill", "clean"), weights=(5, 3, 2))[0]
        restart = None if rng.random() < 0.1 else rng.randint(30_000, 600_000)
        return (Crash(at_ms=t, group=g, broker_id=member, mode=mode, restart_after_ms=restart),
                restart if restart is not None else config.duration_ms)
    if kind == "partition":
        n = config.nameservers
        count = rng.randint(1, n - 1) if n > 1 else 1
        chosen = tuple(sorted(rng.sample(range(n), count)))
        duration = rng.randint(30_000, 360_000)
        return (Partition(at_ms=t, group=g, broker_id=member, nameservers=chosen,
                          duration_ms=duration), duration)
    if kind == "failover":
        promote = rng.randint(10_000, 30_000)
        back = None if rng.random() < 0.2 else rng.randint(120_000, 600_000)
        return (Failover(at_ms=t, group=g, promote_after_ms=promote, restart_old_after_ms=back),
                back if back is not None else config.duration_ms)
    if kind == "topic_create":
        return TopicCreate(at_ms=t, group=g), 0
    if kind == "topic_delete":
        return TopicDelete(at_ms=t, group=g), 0
    duration = rng.randint(60_000, 300_000)
    return (DegradedLink(at_ms=t, group=g, broker_id=member, duration_ms=duration,
                         loss_rate=round(rng.uniform(0.3, 0.9), 2),
                         extra_latency_ms=rng.randint(50, 3_000)), duration)


def describe(fault: Fault, group_names: Sequence[str], ns_ids: Sequence[str],
             note: str = "") -> str:
    """A short description, e.g. ``broker-003/0 halt, back 120 s`` (``group/broker id``)."""
    def secs(ms: int | None) -> str:
        return "never" if ms is None else f"{ms / 1000:.0f} s"

    if isinstance(fault, NameServerRestart):
        name = ns_ids[fault.nameserver] if fault.nameserver < len(ns_ids) else "?"
        return f"{name} down {secs(fault.down_ms)}"
    name = group_names[fault.group] if fault.group < len(group_names) else f"#{fault.group}"
    if isinstance(fault, Crash):
        return f"{name}/{fault.broker_id} {fault.mode}, back {secs(fault.restart_after_ms)}"
    if isinstance(fault, Partition):
        cut = ",".join(ns_ids[i] for i in fault.nameservers if i < len(ns_ids))
        return f"{name}/{fault.broker_id} from {cut} for {secs(fault.duration_ms)}"
    if isinstance(fault, Failover):
        return (f"{name} promote {secs(fault.promote_after_ms)}, "
                f"old back {secs(fault.restart_old_after_ms)}")
    if isinstance(fault, TopicCreate | TopicDelete):
        return f"{name} {fault.topic or note or '(auto)'}"
    return (f"{name}/{fault.broker_id} loss {fault.loss_rate:g} "
            f"+{fault.extra_latency_ms} ms for {secs(fault.duration_ms)}")


@attrs.frozen(kw_only=True)
class FaultRecord:
    """One fault as it happened.

    ``start_ms`` is when it struck; ``end_ms`` when its cause ended (restart, heal, name
    server back, link repaired; None: not within the run; equal to ``start_ms`` for topic
    faults). ``target_addrs`` are the broker addresses it made unreachable, ``nameservers``
    the name servers it cut off from them (all of them, except for a partition), ``topics``
    the topics it may change (of those, only ``group``'s part when set). ``skipped`` says
    why nothing happened (e.g. the broker was already down); ``note`` adds what the run
    decided (the promoted slave, the chosen topic).
    """

    index: int
    fault: Fault
    start_ms: int
    end_ms: int | None
    target_addrs: tuple[str, ...] = ()
    #: The broker group whose part of each route the fault can change (None: whole routes).
    group: str | None = None
    nameservers: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    skipped: str | None = None
    note: str = ""

    @property
    def kind(self) -> str:
        return self.fault.kind
