"""``routing simulate``: the click command (click and rich are imported here only).

The ``routing`` group registers `simulate_command`; it can also be run on its own with
``python -m routing.cli._simulate``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import attrs
import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .. import InvalidRequest
from ..sim import FAULT_KINDS, PROFILES, LivePacing, SimConfig, SimResult, simulate

__all__ = ["config_to_json", "parse_duration_ms", "parse_size_bytes", "simulate_command"]

_UNITS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration_ms(text: str) -> int:
    """``"2h"``, ``"90m"``, ``"1h30m"``, ``"45s"``, ``"500ms"``, ``"1d"`` → milliseconds.

    >>> parse_duration_ms("1h30m"), parse_duration_ms("500ms")
    (5400000, 500)
    """
    cleaned = text.strip().lower().replace(" ", "")
    parts = _PART.findall(cleaned)
    if not cleaned or "".join(n + u for n, u in parts) != cleaned:
        raise InvalidRequest(f"not a duration: {text!r} (use a number with a unit: 500ms, "
                             f"30s, 10m, 2h, 1d, or a sum such as 1h30m)", field="duration",
                             value=text)
    return round(sum(float(n) * _UNITS[u] for n, u in parts))


_SIZE_UNITS = {"b": 1, "kb": 1 << 10, "kib": 1 << 10, "mb": 1 << 20, "mib": 1 << 20,
               "gb": 1 << 30, "gib": 1 << 30}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)(b|kb|kib|mb|mib|gb|gib)?")


def parse_size_bytes(text: str) -> int:
    """``"64MB"``, ``"512kb"``, ``"1GB"``, ``"1000"`` (bytes) → bytes; KB, MB and GB are
    powers of 1 024 (as KiB, MiB, GiB).

    >>> parse_size_bytes("64MB"), parse_size_bytes("1.5kb"), parse_size_bytes("0")
    (67108864, 1536, 0)
    """
    found = _SIZE.fullmatch(text.strip().lower().replace(" ", ""))
    if found is None:
        raise InvalidRequest(f"not a size: {text!r} (use bytes or a number with a unit: "
                             f"512KB, 64MB, 1GB)", field="size", value=text)
    return round(float(found.group(1)) * _SIZE_UNITS[found.group(2) or "b"])


def _size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_size_bytes(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _period(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A duration where ``0`` (or ``off``) turns the trigger off (returns 0)."""
    if value is not None and value.strip().lower() in ("0", "off"):
        return 0
    return _duration(ctx, param, value)


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_duration_ms(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


#: How often the journal writers operators use (``routing simulate``, ``routing serve
#: --journal``) write a snapshot unless told otherwise: a replay can then be split there
#: (docs/journal.md, "Splitting a replay"; about +1.5 % bytes at 300 groups).
DEFAULT_SNAPSHOT_EVERY = "60m"
#: The values that turn snapshots off.
_OFF = ("off", "none", "0")


def snapshot_every(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A snapshot interval option: a duration (ms), or None for ``off`` / ``none`` / ``0``."""
    if value is None or value.strip().lower() in _OFF:
        return None
    return _duration(ctx, param, value)


def config_to_json(config: SimConfig) -> dict[str, Any]:
    """The config as JSON-ready data; explicit faults as objects with their ``kind``."""
    doc = attrs.asdict(config)
    if not isinstance(config.faults, str):
        doc["faults"] = [{"kind": f.kind, **attrs.asdict(f)} for f in config.faults]
    return doc


def _journal_names(result: SimResult) -> dict[str, Any]:
    """ns id → its journal's file name, or the list of its rotated files' names."""
    if result.journal_files:
        return {ns: [p.name for p in files] for ns, files in result.journal_files.items()}
    return {ns: p.name for ns, p in result.journal_paths.items()}


def _write_summary(path: Path, result: SimResult) -> None:
    stats = result.stats
    doc = {
        "config": config_to_json(result.config),
        "stats": {"events": stats.events, "messages": stats.messages, "lost": stats.lost,
                  "journal_lines": dict(stats.journal_lines), "wall_s": round(stats.wall_s, 3),
                  "events_per_s": round(stats.events_per_s)},
        "journals": _journal_names(result),
        "faults": result.summary().to_json(),
    }
    path.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n", encoding="utf-8")


@click.command("simulate")
@click.option("--groups", type=click.IntRange(min=1), default=20, show_default=True,
              help="Broker groups (a master and its slaves each).")
@click.option("--slaves", type=click.IntRange(min=0), default=1, show_default=True,
              help="Slaves per group.")
@click.option("--nameservers", type=click.IntRange(min=1), default=3, show_default=True,
              help="Name servers.")
@click.option("--duration", default="2h", show_default=True, callback=_duration,
              help="Simulated time: 500ms, 30s, 10m, 2h, 1d, 1h30m...")
@click.option("--faults", default="default", show_default=True,
              help=f"A profile ({', '.join(PROFILES)}) or comma-separated kinds "
                   f"({', '.join(FAULT_KINDS)}).")
@click.option("--fault-interval", default=None, callback=_duration,
              help="Mean time between faults (default: the profile's, 5m for default).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of every random choice; the same seed gives identical journals.")
@click.option("--clients", type=click.IntRange(min=0), default=3, show_default=True,
              help="Clients polling routes every 30 s.")
@click.option("--loss", type=click.FloatRange(0.0, 1.0, max_open=True), default=0.0005,
              show_default=True, help="Probability that a message is lost.")
@click.option("--acting-master", is_flag=True,
              help="Brokers in slave-acting-master mode (1 s heartbeats, 10 s timeout), name "
                   "servers with support_acting_master.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write ns-<i>.jsonl journals and summary.json here.")
@click.option("--gzip/--no-gzip", "compress", default=False, show_default=True,
              help="Compress the journals (ns-<i>.jsonl.gz).")
@click.option("--snapshot-every", "snapshot_every", default=DEFAULT_SNAPSHOT_EVERY,
              callback=snapshot_every, show_default=True, metavar="DURATION|off",
              help="Write a snapshot of each name server's state into its journal this "
                   "often (simulated time, e.g. 10m), so a replay can be split there; "
                   "off: none.")
@click.option("--rotate-every", "rotate_every", default=None, callback=_period,
              help="Write each journal as complete files, a new one this often (simulated "
                   "time; with --live, real time, default 10s): ns-<i>.<first seq>.jsonl "
                   "(docs/journal.md, \"Rotation\"). Default: one file per name server.")
@click.option("--rotate-bytes", "rotate_bytes", default=None, callback=_size,
              help="Also start a new journal file once one holds this much (e.g. 64MB).")
@click.option("--live", is_flag=True,
              help="Run in scaled real time (--speed), writing rotating journals into --out "
                   "as it goes: live data for `routing watch` and `make demo`.")
@click.option("--speed", type=float, default=60.0, show_default=True,
              help="With --live: simulated seconds per real second (60: an hour a minute).")
@click.option("--wall-times/--sim-times", "wall_times", default=True, show_default=True,
              help="With --live: journal times start at the wall clock's now (+ simulated "
                   "time), as `routing serve --journal` writes them; --sim-times: from 0.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--topics", "per_topic", is_flag=True,
              help="Also print how long the name servers disagreed about each affected topic.")
@click.option("--progress/--no-progress", "show_progress", default=True, show_default=True,
              help="Show a progress bar on stderr.")
def simulate_command(groups: int, slaves: int, nameservers: int, duration: int,
                     faults: str, fault_interval: int | None, seed: int, clients: int,
                     loss: float, acting_master: bool, out: Path | None, compress: bool,
                     snapshot_every: int | None, rotate_every: int | None,
                     rotate_bytes: int | None, live: bool, speed: float, wall_times: bool,
                     as_json: bool,
                     per_topic: bool, show_progress: bool) -> None:
    """Simulate name servers, brokers and clients under faults, deterministically.

    Prints, per fault, how long until each name server stopped routing to the broker it
    lost, and how long the name servers disagreed about the affected topics.
    """
    try:
        config = SimConfig(groups=groups, slaves=slaves, nameservers=nameservers,
                           duration_ms=duration, seed=seed, faults=faults,
                           fault_interval_ms=fault_interval, clients=clients, loss_rate=loss,
                           acting_master=acting_master, snapshot_every_ms=snapshot_every,
                           routing=attrs.evolve(SimConfig().routing,
                                                support_acting_master=acting_master))
        pacing = LivePacing(speed=speed, wall_times=wall_times) if live else None
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    for flag, given in (("--live", live), ("--rotate-every", rotate_every),
                        ("--rotate-bytes", rotate_bytes)):
        if given and out is None:
            raise click.BadParameter("writes rotating journals into a folder: give --out DIR",
                                     param_hint=flag)
    more: dict[str, Any] = {"rotate_every_ms": rotate_every, "rotate_bytes": rotate_bytes,
                            "live": pacing}
    try:
        result = _run(config, out, compress, show_progress, more)
    except KeyboardInterrupt:
        click.echo(f"interrupted: the journal files written so far are complete in {out}",
                   err=True)
        raise SystemExit(130) from None
    _print(result, config, out, as_json, per_topic)


def _run(config: SimConfig, out: Path | None, compress: bool, show_progress: bool,
         more: dict[str, Any]) -> SimResult:
    """Run the simulation, with a progress bar on stderr when asked."""
    errors = Console(stderr=True)
    if show_progress:
        with Progress(TextColumn("simulating"), BarColumn(),
                      TextColumn("{task.completed:,.0f}/{task.total:,.0f} simulated s"),
                      TimeElapsedColumn(), console=errors, transient=True) as bar:
            task = bar.add_task("sim", total=config.duration_ms / 1000)

            def report(now_ms: int, end_ms: int) -> None:
                bar.update(task, completed=now_ms / 1000)

            return simulate(config, out_dir=out, gzip=compress, progress=report, **more)
    return simulate(config, out_dir=out, gzip=compress, **more)


def _print(result: SimResult, config: SimConfig, out: Path | None, as_json: bool,
           per_topic: bool) -> None:
    """The summary: a table (or JSON) on stdout, and summary.json in ``out``."""
    seed, duration = config.seed, config.duration_ms
    summary = result.summary()
    if out is not None:
        _write_summary(out / "summary.json", result)
    if as_json:
        click.echo(json.dumps(summary.to_json(), indent=2))
        return
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    table = Table(title=f"{len(summary.rows)} faults, seed {seed}, "
                        f"{duration / 3_600_000:g} h simulated: time until each name server "
                        f"stopped routing to the lost broker; longest disagreement")
    for header in summary.headers():
        table.add_column(header, overflow="fold")
    for row in summary.table():
        table.add_row(*row)
    console.print(table)
    if per_topic:
        topics = Table(title="disagreement per affected topic (only topics with any)")
        for header in ("#", "fault", "topic", "disagreed"):
            topics.add_column(header)
        for cells in summary.topic_table():
            topics.add_row(*cells)
        console.print(topics)
    stats = result.stats
    console.print(f"{stats.events:,} events in {stats.wall_s:.1f} s "
                  f"({stats.events_per_s:,.0f}/s); {stats.messages:,} messages, "
                  f"{stats.lost:,} lost; journal lines: "
                  + ", ".join(f"{ns} {n:,}" for ns, n in stats.journal_lines.items()))
    if out is not None:
        console.print(f"journals and summary.json written to {out}")


if __name__ == "__main__":  # pragma: no cover
    simulate_command()
