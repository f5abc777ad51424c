"""``routing simulate --live`` and rotated simulator journals (docs/simulator.md, "Live"):
the pacing goes through an injected wall clock and sleeper (a `ManualClock` here: no real
sleep), no file is written ahead of its wall time, and a live run writes exactly the files
of the same run rotated on simulated time."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

import routing as r
from routing.cli import main
from routing.journal import read_journals, rotated_files
from routing.sim import LivePacing, NameServerRestart, Pacer, SimConfig, simulate

CONFIG = SimConfig(groups=3, slaves=1, nameservers=2, duration_ms=1_800_000, clients=1,
                   snapshot_every_ms=600_000, seed=3,
                   faults=[NameServerRestart(at_ms=700_000, nameserver=1, down_ms=30_000)])
WALL0 = 1_700_000_000_000


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_live_run_keeps_pace_and_writes_the_files_of_the_rotated_run(
        tmp_path: Path) -> None:
    wall = r.ManualClock(start_ms=WALL0)
    live_dir, sim_dir = tmp_path / "live", tmp_path / "sim"
    checked: list[int] = []

    def sleep(ms: int) -> None:
        # every file already there holds only lines whose simulated time has come
        due_sim = (wall.now_ms() - WALL0) * 60
        for path in live_dir.iterdir():
            if not path.name.startswith("."):
                last = json.loads(path.read_text().splitlines()[-1])
                assert last.get("ts", last.get("start_ms")) <= due_sim
                checked.append(last["seq"])
        wall.advance(ms)

    live = simulate(CONFIG, out_dir=live_dir,
                    live=LivePacing(speed=60, clock=wall, sleep=sleep))
    assert wall.now_ms() - WALL0 == CONFIG.duration_ms // 60  # 30 simulated min: 30 s
    assert checked  # files appeared while the run went on
    rotated = simulate(CONFIG, out_dir=sim_dir, rotate_every_ms=600_000)  # 10 s × 60
    assert _names(live_dir) == _names(sim_dir)
    for name in _names(sim_dir):
        assert (live_dir / name).read_bytes() == (sim_dir / name).read_bytes()
    whole = simulate(CONFIG)  # in memory, unrotated
    for ns in whole.nameserver_ids:
        files = live.journal_files[ns]
        assert list(files) == rotated_files(live_dir, ns) and len(files) >= 3
        assert "".join(p.read_text() for p in files) == whole.journal_texts[ns]
    read = live.read_journals()
    assert read.ok and len(read.records) == sum(whole.stats.journal_lines.values())
    assert [h.seq > 0 for h in read.records if h.op == "header"] == [False, False, True]
    assert rotated.read_journals().records == read.records


def test_rotation_by_size_and_the_unrotated_default(tmp_path: Path) -> None:
    small = SimConfig(groups=2, slaves=0, nameservers=1, duration_ms=600_000, clients=0)
    simulate(small, out_dir=tmp_path / "plain")
    assert _names(tmp_path / "plain") == ["ns-0.jsonl"]
    result = simulate(small, out_dir=tmp_path / "sized", rotate_bytes=4_096)
    files = result.journal_files["ns-0"]
    assert len(files) > 3 and all(p.stat().st_size < 4_096 + 2_000 for p in files)
    assert read_journals(files).ok


def test_the_pacer_sleeps_only_when_ahead_and_counts_lateness() -> None:
    wall = r.ManualClock(start_ms=0)
    slept: list[int] = []

    def sleep(ms: int) -> None:
        slept.append(ms)
        wall.advance(ms)

    pacer = Pacer(LivePacing(speed=10, clock=wall, sleep=sleep, min_sleep_ms=20))
    pacer.start(1_000)
    pacer.wait_for(1_100)  # 10 ms ahead: below min_sleep_ms, no call
    pacer.wait_for(1_500)  # 50 ms
    wall.advance(100)  # the simulation was slow
    pacer.wait_for(1_600)  # due at 60, now 150: late by 90
    assert slept == [50] and (pacer.sleeps, pacer.slept_ms, pacer.late_ms) == (1, 50, 90)
    assert pacer.due_wall_ms(1_601) == 61  # rounded up: never early


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"speed": 0}, "speed"), ({"speed": float("inf")}, "speed"), ({"speed": True}, "speed"),
    ({"min_sleep_ms": -1}, "min_sleep_ms")])
def test_bad_pacing_names_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(r.InvalidRequest) as caught:
        LivePacing(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_the_cli_rotates_into_out_and_lists_the_files(tmp_path: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(main, ["simulate", "--groups", "2", "--nameservers", "1",
                                "--duration", "20m", "--rotate-every", "5m", "--out",
                                str(tmp_path), "--no-progress", "--json"])
    assert done.exit_code == 0, done.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    names = summary["journals"]["ns-0"]
    assert names == [p.name for p in rotated_files(tmp_path, "ns-0")] and len(names) == 4
    for flag in (["--live"], ["--rotate-every", "1m"], ["--rotate-bytes", "1MB"]):
        refused = runner.invoke(main, ["simulate", "--duration", "1m", "--no-progress", *flag])
        assert refused.exit_code == 2 and "give --out DIR" in refused.output
    bad = runner.invoke(main, ["simulate", "--out", str(tmp_path / "x"), "--rotate-bytes",
                               "lots", "--no-progress"])
    assert bad.exit_code == 2 and "not a size: 'lots'" in bad.output


def test_serve_passes_the_rotation_flags_in_ms_and_bytes(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    from routing.cli import _serve

    seen: list[dict[str, object]] = []
    monkeypatch.setattr(_serve, "run_server", lambda *a, **kw: seen.append(kw))
    # the routing loggers stay as they are (the command would send them to its stderr)
    monkeypatch.setattr(_serve, "configure_logging",
                        lambda *a, **kw: logging.getLogger("routing.test"))
    runner = CliRunner()
    for flags, every, size in (([], 10_000, 64 << 20),
                               (["--journal-rotate-every", "1m30s",
                                 "--journal-rotate-bytes", "512KB"], 90_000, 512 << 10),
                               (["--journal-rotate-every", "0",
                                 "--journal-rotate-bytes", "0"], 0, 0)):
        done = runner.invoke(main, ["serve", "--journal", str(tmp_path), *flags])
        assert done.exit_code == 0, done.output
        assert (seen[-1]["journal_rotate_every_ms"], seen[-1]["journal_rotate_bytes"]) == (
            every, size)
    bad = runner.invoke(main, ["serve", "--journal-rotate-every", "soon"])
    assert bad.exit_code == 2 and "not a duration: 'soon'" in bad.output


def test_an_interrupted_live_run_leaves_complete_files(tmp_path: Path) -> None:
    """Ctrl-C during a live run: the file being written is closed and renamed into place,
    and the files read as the start of the journal."""
    wall = r.ManualClock(start_ms=WALL0)

    def sleep(ms: int) -> None:
        wall.advance(ms)
        if wall.now_ms() - WALL0 > 12_000:  # 12 s of the run's 30
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        simulate(CONFIG, out_dir=tmp_path, live=LivePacing(speed=60, clock=wall, sleep=sleep))
    names = _names(tmp_path)
    assert names and not [n for n in names if n.startswith(".")]
    files = [tmp_path / n for n in names]
    read = read_journals(files)
    assert read.ok and max(e.at_ms for e in read.records) <= 12_020 * 60
    whole = simulate(CONFIG)
    for ns in whole.nameserver_ids:
        text = "".join(p.read_text() for p in rotated_files(tmp_path, ns))
        assert text and whole.journal_texts[ns].startswith(text)


def test_wall_times_stamp_the_journals_from_the_run_start_and_change_nothing_else(
        tmp_path: Path) -> None:
    """``LivePacing(wall_times=True)`` (``routing simulate --live``'s default): every
    journal time — ``ts``, and the times inside snapshots — is the simulated time plus the
    wall clock's ms at the start; files, sequence numbers, every other field, the replay's
    tables and the simulation's own summary are those of the run on simulated times."""
    def run(folder: Path, wall_times: bool) -> tuple[r.ManualClock, object]:
        wall = r.ManualClock(start_ms=WALL0)
        return wall, simulate(CONFIG, out_dir=folder, live=LivePacing(
            speed=60, clock=wall, sleep=wall.advance, wall_times=wall_times))

    _, sim = run(tmp_path / "sim", False)
    wall, stamped = run(tmp_path / "wall", True)
    assert wall.now_ms() - WALL0 == CONFIG.duration_ms // 60
    assert _names(tmp_path / "wall") == _names(tmp_path / "sim")
    a, b = sim.read_journals(), stamped.read_journals()  # type: ignore[attr-defined]
    assert a.ok and b.ok and len(a.records) == len(b.records)
    assert min(e.at_ms for e in b.records) >= WALL0
    for x, y in zip(a.records, b.records, strict=True):
        assert (y.seq, y.op, y.at_ms) == (x.seq, x.op, x.at_ms + WALL0)
    first = json.loads((tmp_path / "wall" / _names(tmp_path / "wall")[0]).read_text()
                       .splitlines()[0])
    assert first["ts"] >= WALL0
    assert stamped.faults == sim.faults  # type: ignore[attr-defined]
    assert stamped.route_timeline == sim.route_timeline  # type: ignore[attr-defined]
    # the replays agree once journal time is shifted back: same route changes, same
    # disagreement windows (durations unchanged)
    want, got = _tables(tmp_path / "sim", 0), _tables(tmp_path / "wall", WALL0)
    assert want[0] and want == got


def _tables(folder: Path, offset: int) -> tuple[list[tuple[object, ...]], ...]:
    from routing.pipeline import analyze_local
    tables = analyze_local(folder)
    return ([(c["ns"], c["topic"], c["at_ms"] - offset, c["digest"])
             for c in tables["route_changes"]],
            [(d["topic"], d["start_ms"] - offset, d["duration_ms"])
             for d in tables["disagreement"]])


def test_the_cli_stamps_live_journals_on_the_wall_clock_unless_told_not_to(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[LivePacing] = []

    def fake(config: SimConfig, **kwargs: object) -> object:
        seen.append(kwargs["live"])  # type: ignore[arg-type]
        raise KeyboardInterrupt

    monkeypatch.setattr("routing.cli._simulate.simulate", fake)
    for flags, want in (([], True), (["--sim-times"], False)):
        got = CliRunner().invoke(main, ["simulate", "--live", "--out", str(tmp_path),
                                        "--no-progress", *flags])
        assert got.exit_code == 130, got.output
        assert seen[-1].wall_times is want
