"""Text renderings of routes for assertion messages: one line per broker group, and two
routes side by side."""

from __future__ import annotations

from collections.abc import Sequence

from .._values import Perm, TopicRouteData

__all__ = ["route_lines", "side_by_side"]


def route_lines(route: TopicRouteData | None) -> list[str]:
    """One line per queue row: ``name r<read>/w<write> <perm> [id=addr, ...]``."""
    if route is None:
        return ["(no route)"]
    groups = {b.broker_name: b for b in route.broker_datas}
    lines = []
    for q in route.queue_datas:
        data = groups.get(q.broker_name)
        addrs = "?" if data is None else ", ".join(
            f"{i}={a}" for i, a in sorted(data.broker_addrs.items()))
        extra = ""
        if data is not None and data.zone_name is not None:
            extra += f" zone={data.zone_name}"
        if data is not None and data.enable_acting_master:
            extra += " acting"
        if q.topic_sys_flag:
            extra += f" sysflag={int(q.topic_sys_flag)}"
        lines.append(f"{q.broker_name} r{q.read_queue_nums}/w{q.write_queue_nums} "
                     f"{Perm.to_string(q.perm)} [{addrs}]{extra}")
    names = {q.broker_name for q in route.queue_datas}
    for b in route.broker_datas:
        if b.broker_name not in names:
            lines.append(f"(group without row) {b.broker_name}")
    return lines


def side_by_side(left_title: str, left: Sequence[str], right_title: str,
                 right: Sequence[str], *, differs: Sequence[bool] | None = None) -> str:
    """Two columns of lines; rows that differ are marked with ``!`` (by default, rows
    whose two texts differ; ``differs`` overrides that per row)."""
    width = max([len(left_title), *(len(s) for s in left)]) + 1
    rule = max([len(right_title), *(len(s) for s in right)]) + 1
    out = [f"  {left_title:<{width}}| {right_title}", f"  {'-' * width}+{'-' * rule}"]
    for i in range(max(len(left), len(right))):
        a = left[i] if i < len(left) else ""
        b = right[i] if i < len(right) else ""
        bad = differs[i] if differs is not None and i < len(differs) else a != b
        out.append(f"{'!' if bad else ' '} {a:<{width}}| {b}".rstrip())
    return "\n".join(out)
