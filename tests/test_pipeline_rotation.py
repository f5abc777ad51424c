"""The batch pipeline reads a folder of rotated journals unchanged (docs/journal.md,
"Rotation"): the same simulator run written rotated and unrotated gives equal tables on
the reference engine, with faults, name-server restarts and snapshots, and with the same
lines damaged or lost in both (only the file and line a rejection quotes differ)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from routing.pipeline import analyze_local
from routing.pipeline._schema import rows_equal
from routing.sim import NameServerRestart, SimConfig, simulate

#: One hour of a small fleet with the default faults, a name-server restart and snapshots.
CONFIG = SimConfig(groups=4, slaves=1, nameservers=3, duration_ms=3_600_000, clients=2,
                   snapshot_every_ms=900_000, seed=7, fault_interval_ms=600_000)
RESTART = SimConfig(groups=2, slaves=0, nameservers=2, duration_ms=1_200_000, clients=1,
                    faults=[NameServerRestart(at_ms=500_000, nameserver=0, down_ms=40_000)])
AT = (600_000, 1_100_000, 3_000_000)


def normal(tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The tables with the place a rejection quotes (file, line) left out."""
    out = dict(tables)
    out["rejected"] = sorted(({k: v for k, v in row.items() if k not in ("source", "line")}
                              for row in tables["rejected"]), key=repr)
    return out


def _damage(text: str, lose: set[int], cut: set[int]) -> str:
    """The journal text without the lines of seqs ``lose`` and with those of ``cut`` cut
    short (as a kill leaves them)."""
    out = []
    for line in text.splitlines(keepends=True):
        seq = json.loads(line)["seq"]
        if seq in lose:
            continue
        out.append(line[:40] + "\n" if seq in cut else line)
    return "".join(out)


@pytest.mark.parametrize("config", [CONFIG, RESTART], ids=["faults", "ns-restart"])
def test_rotated_and_unrotated_runs_give_equal_tables(tmp_path: Path,
                                                      config: SimConfig) -> None:
    plain = simulate(config, out_dir=tmp_path / "plain")
    rotated = simulate(config, out_dir=tmp_path / "rotated", rotate_every_ms=120_000)
    assert all(len(files) > 5 for files in rotated.journal_files.values())
    # a file still being written (hidden) is not read
    (tmp_path / "rotated" / ".ns-0.9999999999999999.jsonl").write_text('{"ns":"ns-0"')
    expected = analyze_local(tmp_path / "plain", at=AT)
    got = analyze_local(tmp_path / "rotated", at=AT)
    assert not rows_equal(expected, got), rows_equal(expected, got)
    assert [(r["ns"], r["gaps"], r["rejected"]) for r in got["name_servers"]] == [
        (ns, 0, 0) for ns in plain.nameserver_ids]
    assert sum(r["restarts"] for r in got["name_servers"]) == (config is RESTART)
    assert got["route_changes"] and got["sessions"]
    assert bool(got["expiries"]) == (config is CONFIG)  # the crashes of the default faults
    assert got["rejected"] == []


def test_the_same_damage_gives_the_same_tables(tmp_path: Path) -> None:
    plain = simulate(CONFIG, out_dir=tmp_path / "plain")
    rotated = simulate(CONFIG, out_dir=tmp_path / "rotated", rotate_every_ms=120_000)
    lose, cut = {50, 51, 400, 1_500}, {900, 1_201}  # of about 1 600 lines each
    for ns, path in plain.journal_paths.items():
        path.write_text(_damage(path.read_text(), lose, cut))
        for file in rotated.journal_files[ns]:
            file.write_text(_damage(file.read_text(), lose, cut))
    expected = normal(analyze_local(tmp_path / "plain", at=AT))
    got = normal(analyze_local(tmp_path / "rotated", at=AT))
    assert not rows_equal(expected, got), rows_equal(expected, got)
    # a gap for each run of lost or cut lines, on every name server
    assert [r["gaps"] for r in got["name_servers"]] == [5, 5, 5]
    assert len(got["rejected"]) == 3 * len(cut)  # the cut lines, of every name server
