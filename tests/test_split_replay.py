"""A replay split at its snapshots, each segment replayed on its own and the rows stitched
(``split_replay.py``), gives exactly the reference's tables: simulator journals with
faults and restarts, damaged journals, damaged snapshots and lines lost before one, and
hypothesis-drawn operation sequences."""

from __future__ import annotations

import json
from unittest import mock

import attrs
import pytest
from hypothesis import given, settings

import pipeline_scenarios as _scenarios
from routing.journal import JournalRecorder
from routing.pipeline import analyze_local
from routing.sim import SimConfig, simulate
from split_replay import analyze_split


def _sim(seed: int, *, every_ms: int = 300_000, faults: str = "heavy", **kw: object
         ) -> dict[str, list[str]]:
    result = simulate(SimConfig(groups=4, slaves=1, nameservers=3, duration_ms=2_700_000,
                                seed=seed, faults=faults, clients=2,
                                snapshot_every_ms=every_ms, **kw))  # type: ignore[arg-type]
    return {f"{ns}.jsonl": result.journal_lines(ns) for ns in result.nameserver_ids}


def _same(journals: dict[str, list[str]], *, groups: tuple[int, ...] = (1, 3)
          ) -> dict[str, object]:
    """The split's tables equal the reference's with every segment a task (its info is
    returned) and with ``groups`` neighbouring segments a task."""
    whole = analyze_local(journals, at=(600_000, 1_800_000))
    infos = []
    for group in groups:
        split, info = analyze_split(journals, at=(600_000, 1_800_000), group=group)
        assert split.keys() == whole.keys()
        for table in whole:
            assert split[table] == whole[table], (group, table)
        infos.append(info)
    return infos[0]  # type: ignore[return-value]


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_simulator_journals_split_at_every_snapshot(seed):
    journals = _sim(seed)
    assert any('"op":"header"' in line for lines in journals.values()
               for line in lines[1:]), "a name-server restart"
    info = _same(journals)
    assert all(s.segments >= 9 for s in info.values())
    assert all(s.replayed_again == 0 for s in info.values())  # healthy: every boundary clean


def test_acting_master_journals_split_too():
    journals = _sim(3, every_ms=120_000, acting_master=True,
                    routing=attrs.evolve(SimConfig().routing, support_acting_master=True,
                                         default_heartbeat_timeout_ms=10_000))
    info = _same(journals)
    assert all(s.segments >= 20 and s.replayed_again == 0 for s in info.values())


@pytest.mark.parametrize("seed", [1, 2])
def test_damaged_journals_split_and_stitch_equal(seed):
    journals = _scenarios.damage(_sim(seed), seed)
    _same(journals)


def _snapshot_lines(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if '"op":"snapshot"' in line]


def test_a_damaged_snapshot_line_joins_its_two_segments():
    journals = _sim(5)
    segments = analyze_split(journals)[1]["ns-0"].segments
    lines = journals["ns-0.jsonl"]
    cut = _snapshot_lines(lines)[3]
    lines[cut] = lines[cut][:200]  # cut short: not JSON, so no name server's line at all
    doc = json.loads(lines[_snapshot_lines(lines)[5]])
    doc["args"]["format"] = 9  # read as a snapshot line, rejected by every reader
    lines[_snapshot_lines(lines)[5]] = json.dumps(doc, separators=(",", ":"))
    info = _same(journals)
    assert info["ns-0"].segments == segments - 1
    assert info["ns-0"].replayed_again == 1


def test_a_line_lost_before_a_snapshot_makes_it_disagree():
    journals = _sim(5)
    lines = journals["ns-1.jsonl"]
    cut = _snapshot_lines(lines)[4]
    lost = next(i for i in range(cut - 1, 0, -1) if '"table"' in lines[i])
    del lines[lost]  # a table definition: every later use of it is rejected too
    info = _same(journals)
    assert info["ns-1"].replayed_again >= 1


def test_a_duplicated_snapshot_line_is_not_a_second_start():
    journals = _sim(6)
    lines = journals["ns-2.jsonl"]
    cut = _snapshot_lines(lines)[2]
    lines.insert(cut + 3, lines[cut])
    info = _same(journals)
    assert info["ns-2"].replayed_again == 1


def test_a_tampered_snapshot_state_is_not_trusted():
    journals = _sim(7)
    lines = journals["ns-0.jsonl"]
    cut = _snapshot_lines(lines)[2]
    doc = json.loads(lines[cut])
    doc["args"]["state"]["live"][0][4] -= 1  # one refresh earlier than the journal says
    lines[cut] = json.dumps(doc, separators=(",", ":"))
    info = _same(journals)
    assert info["ns-0"].replayed_again == 1


@given(ops=_scenarios.operations(max_size=60))
@settings(max_examples=max(20, settings().max_examples // 2))
def test_drawn_operation_sequences_split_and_stitch_equal(ops):
    def with_snapshots(*args: object, **kwargs: object) -> JournalRecorder:
        return JournalRecorder(*args, snapshot_every_records=4, **kwargs)  # type: ignore[arg-type]

    with mock.patch.object(_scenarios, "JournalRecorder", with_snapshots):
        journals = _scenarios.play(ops, nameservers=2, config=2)
    _same(journals, groups=(1, 2))
    _same(_scenarios.damage(journals, len(ops)), groups=(1, 3))


def test_runs_of_neighbouring_segments_cover_them_once_and_equal_the_reference():
    journals = _sim(6)
    one = analyze_split(journals)[1]
    for group in (2, 4, 100):  # 100: every name server's segments in one task
        split, info = analyze_split(journals, group=group)
        assert split == analyze_split(journals)[0]
        for ns, s in info.items():
            assert s.segments == one[ns].segments
            assert s.replayed_again == 0
