"""Availability over a topic's life: the share of the time a topic existed during which a
name server would have given a producer a writable queue for it.

The ``availability`` table measures from a topic's first appearance to the end of the
journal, so a topic deleted on purpose after 26 minutes of 4 hours reads 10 %. Here a
topic's life on a name server ends when its route disappears *on purpose* there, and
starts again if it comes back. A disappearance is on purpose when no session of a broker
that served the topic (a group of its last route) ended at that instant on that name
server: the brokers stayed live and the topic was deleted (or re-registered without it).
When the route vanished because its brokers expired, closed their channel, unregistered,
or the name server restarted, the topic was unavailable, and that counts against it.

Computed from finished rows (``route_changes`` without ``route_json``, ``sessions``,
``name_servers``), so Spark and the reference share it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["availability_over_life", "rank_availability"]

Row = dict[str, Any]


def _removals(sessions: Iterable[Row]) -> set[tuple[str, str, int]]:
    """(ns, broker name, ms) of every session that ended other than by the journal's end."""
    return {(s["ns"], s["broker_name"], s["end_ms"]) for s in sessions
            if s["end_reason"] != "open"}


def availability_over_life(route_changes: Sequence[Row], sessions: Sequence[Row],
                           name_servers: Sequence[Row]) -> list[Row]:
    """One row per (topic, name server) that ever had the topic's route somewhere:
    ``life_ms`` (the time the topic existed, from its first appearance on any name server,
    or this name server's first record if later, to the end of this name server's journal,
    less the time after each deletion on purpose until it reappeared on some name server),
    ``writable_ms`` (of that, with a writable queue on this name server), ``share``
    (None for an empty life), ``outages`` (maximal spans without a writable queue inside
    the life), ``longest_outage_ms``, ``deleted`` (how often it was deleted on purpose) and
    ``deleted_ms`` (the last deletion, None if it was not deleted or came back).
    Sorted by (topic, ns)."""
    spans = {r["ns"]: (r["first_ms"], r["last_ms"]) for r in name_servers}
    removed = _removals(sessions)
    by_topic: dict[str, list[Row]] = {}
    for r in route_changes:
        by_topic.setdefault(r["topic"], []).append(r)
    out: list[Row] = []
    for topic in sorted(by_topic):
        changes = sorted(by_topic[topic], key=lambda r: (r["at_ms"], r["ns"], r["seq"]))
        # instants the topic (re)appeared on some name server where it was absent
        appear: list[int] = []
        last_present: dict[str, bool] = {}
        for r in changes:
            if r["present"] and not last_present.get(r["ns"], False):
                appear.append(r["at_ms"])
            last_present[r["ns"]] = r["present"]
        if not appear:
            continue
        for ns in sorted(spans):
            first, last = spans[ns]
            mine = [r for r in changes if r["ns"] == ns]
            out.append(_life_of(topic, ns, mine, appear, max(first, appear[0]), last, removed))
    return out


def _life_of(topic: str, ns: str, changes: Sequence[Row], appear: Sequence[int], start: int,
             end: int, removed: set[tuple[str, str, int]]) -> Row:
    writable = False
    groups: list[str] = []
    alive = True  # within the topic's life (False after a deletion until it reappears)
    t = start
    life = up = outages = longest = deletions = 0
    down_since: int | None = None
    deleted_at: int | None = None
    resume = iter(sorted(appear))
    next_appear = next(resume, None)

    def advance(to: int) -> None:
        nonlocal t, life, up, outages, longest, down_since
        to = min(to, end)
        if to <= t:
            return
        if alive:
            life += to - t
            if writable:
                up += to - t
            elif down_since is None:
                outages += 1
                down_since = t
        t = to

    def close_outage(at: int) -> None:
        nonlocal longest, down_since
        if down_since is not None:
            longest = max(longest, min(at, end) - down_since)
            down_since = None

    for r in changes:
        at = r["at_ms"]
        while not alive and next_appear is not None and next_appear <= at:
            advance(next_appear)
            alive, deleted_at = True, None
        advance(at)
        if at < start:  # before the window: only take the state
            writable, groups = r["writable_queue_count"] > 0, list(r["groups"])
            continue
        if not r["present"] and alive and groups and not any(
                (ns, g, at) in removed for g in groups):
            close_outage(at)
            alive, deleted_at = False, at
            deletions += 1
            while next_appear is not None and next_appear <= at:
                next_appear = next(resume, None)
        elif r["present"] and not alive:
            alive, deleted_at = True, None
        writable = r["writable_queue_count"] > 0
        if writable:
            close_outage(at)
        if r["present"]:
            groups = list(r["groups"])
    while not alive and next_appear is not None and next_appear < end:
        advance(next_appear)
        alive, deleted_at = True, None
        next_appear = next(resume, None)
    advance(end)
    close_outage(end)
    return {"topic": topic, "ns": ns, "life_ms": life, "writable_ms": up,
            "share": up / life if life else None, "outages": outages,
            "longest_outage_ms": longest, "deleted": deletions, "deleted_ms": deleted_at}


def rank_availability(rows: Iterable[Row], top: int = 10) -> list[Row]:
    """The least available (topic, name server) pairs: real outages first, i.e. by share
    of the life, then the longest outage; rows with no life or no outage are left out."""
    ranked = [r for r in rows if r["share"] is not None and r["outages"] > 0]
    ranked.sort(key=lambda r: (r["share"], -r["longest_outage_ms"], r["topic"], r["ns"]))
    return ranked[:top]
