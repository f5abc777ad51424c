"""The live watcher's Python steps without Spark (``routing.pipeline._live``): simulator
journals (with faults, one damaged) cut into rotated pieces, each name server's replay
continued piece by piece through its state bytes, add up to `analyze_local`'s tables on the
same files, row for row; the incidents are the final rows' events, each once."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from pipeline_scenarios import bad_folder, damage
from routing.pipeline import analyze_local
from routing.pipeline._files import kind_in_folder
from routing.pipeline._live import (
    INCIDENT,
    STATUS,
    LiveReplay,
    dump_state,
    load_state,
    split_file,
)
from routing.pipeline._live_tables import tables_of
from routing.pipeline._live_topics import TopicWatch
from routing.pipeline._schema import rows_equal
from routing.sim import SimConfig, simulate

AT = (600_000, 1_500_000)


def rotate(lines: list[str], folder: Path, ns: str, pieces: int, *, zipped: bool = False
           ) -> list[Path]:
    """``lines`` as ``pieces`` rotated files ``<ns>-00000.jsonl``…, sorted by name."""
    size = -(-len(lines) // pieces)
    out = []
    for i in range(pieces):
        chunk = lines[i * size:(i + 1) * size]
        if not chunk:
            break
        data = ("\n".join(chunk) + "\n").encode()
        path = folder / f"{ns}-{i:05d}.jsonl{'.gz' if zipped else ''}"
        path.write_bytes(gzip.compress(data, mtime=0) if zipped else data)
        out.append(path)
    return out


def sim_folder(root: Path) -> Path:
    """Two seeds of a faulty fleet, rotated into pieces; one journal damaged, one gzipped;
    plus the bad inputs of `bad_folder` (not journals, empty, not UTF-8, gzip cut short)."""
    folder = bad_folder(root)
    for seed in (1, 2):
        result = simulate(SimConfig(groups=4, slaves=1, nameservers=3, duration_ms=1_800_000,
                                    seed=seed, faults="heavy"))
        for ns, text in sorted(result.journal_texts.items()):
            lines = [x.replace('"ns-', f'"s{seed}-ns-') for x in text.splitlines()]
            if seed == 2 and ns == "ns-1":
                lines = damage({"x": lines}, seed)["x"]
            rotate(lines, folder, f"s{seed}-{ns}", 7, zipped=(seed == 2 and ns == "ns-2"))
    in_name_order(folder)
    return folder


def in_name_order(folder: Path) -> None:
    """Modification times increasing in name order, one second apart: the order a rotating
    writer renames its complete files into place (Spark's file source takes new files in
    modification-time order)."""
    for i, path in enumerate(sorted(folder.iterdir())):
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def consume(files: Iterable[Path], states: dict[str, bytes]
            ) -> tuple[dict[str, list[Any]], dict[str, Any], list[dict[str, Any]]]:
    """What the stream does with one micro-batch of ``files`` (sorted): final rows,
    statuses, incidents; ``states`` holds each name server's state bytes between calls."""
    by_key: dict[str, list[tuple[str, Any]]] = {}
    for path in files:
        for key, piece in split_file(str(path), path.read_bytes(),
                                     journal=kind_in_folder(path.name) == "text").items():
            by_key.setdefault(key, []).append((str(path), piece))
    final: dict[str, list[Any]] = {}
    statuses: dict[str, Any] = {}
    incidents: list[dict[str, Any]] = []
    for key, pieces in by_key.items():
        replay = load_state(states[key]) if key in states else LiveReplay()
        for _source, (lines, notes) in sorted(pieces, key=lambda p: p[0]):
            for table, row in replay.feed(lines, notes):
                if table == INCIDENT:
                    incidents.append(row)
                else:
                    final.setdefault(table, []).append(row)
        statuses[key] = replay.status()
        states[key] = dump_state(replay)
    assert STATUS not in final
    return final, statuses, incidents


def batch_incidents(folder: Path, per_batch: int) -> list[str]:
    """Every incident of ``folder`` (sorted JSON) as the stream finds them in micro-batches
    of ``per_batch`` files taken in modification-time order (as Spark's file source forms
    them): the name servers' own, and the topics compared across name servers
    (`TopicWatch`). An empty file counts towards a batch but is never read."""
    files = sorted(folder.iterdir(), key=lambda p: p.stat().st_mtime)
    states: dict[str, bytes] = {}
    watch = TopicWatch()
    found: list[dict[str, Any]] = []
    for i in range(0, len(files), per_batch):
        final, statuses, own = consume(
            sorted(p for p in files[i:i + per_batch] if p.stat().st_size), states)
        found += own
        found += watch.batch(final.get("route_changes", []), statuses)
    return sorted(json.dumps(i, sort_keys=True) for i in found)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sim_folder(tmp_path_factory.mktemp("live"))


@pytest.mark.parametrize("batch", [1, 5, 1000])
def test_rotated_pieces_fed_batch_by_batch_equal_the_reference(folder: Path, batch: int) -> None:
    expected = analyze_local(folder, at=AT)
    files = sorted(p for p in folder.iterdir() if not p.name.startswith((".", "_")))
    states: dict[str, bytes] = {}
    final: dict[str, list[Any]] = {}
    statuses: dict[str, Any] = {}
    incidents: list[dict[str, Any]] = []
    for i in range(0, len(files), batch):
        got, status, found = consume(files[i:i + batch], states)
        for table, rows in got.items():
            final.setdefault(table, []).extend(rows)
        statuses.update(status)
        incidents += found
    tables = tables_of(final, statuses.values(), at=AT)
    assert not rows_equal(expected, tables), rows_equal(expected, tables)
    # not vacuous: faults, rejections of both stages, expiries and disagreement
    assert expected["expiries"] and expected["disagreement"]
    assert {r["stage"] for r in expected["rejected"]} == {"read", "replay", "skipped"}
    # one incident per expiry and per channel close, none twice
    expired = [i for i in incidents if i["event"] == "broker_expired"]
    assert sorted((i["ns"], i["at_ms"], i["broker_addr"]) for i in expired) == sorted(
        (r["ns"], r["detected_ms"], r["broker_addr"]) for r in expected["expiries"])
    closed = [i for i in incidents if i["event"] == "channel_closed"]
    assert len(closed) == sum(r["end_reason"] == "channel_closed" for r in expected["sessions"])
    assert any(i["event"] == "topic_unwritable" for i in incidents)


def test_state_bytes_round_trip_mid_journal_changes_no_row(tmp_path: Path) -> None:
    result = simulate(SimConfig(groups=6, nameservers=1, duration_ms=1_200_000, seed=4,
                                faults="heavy"))
    lines = result.journal_texts["ns-0"].splitlines()
    whole = list(LiveReplay().feed([("j", i + 1, t, None, None) for i, t in enumerate(lines)]))
    for cut in (1, 2, len(lines) // 3, len(lines) - 1):
        first = LiveReplay()
        rows = list(first.feed([("j", i + 1, t, None, None) for i, t in enumerate(lines[:cut])]))
        again = load_state(dump_state(first))
        rows += again.feed([("j", i + 1, t, None, None)
                            for i, t in enumerate(lines) if i >= cut])
        assert rows == whole
        assert again.status() == LiveReplay.status(load_state(dump_state(again)))


def test_topic_incidents_open_and_close_where_the_batch_disagreement_windows_do(
        tmp_path: Path) -> None:
    """Fed a whole fleet, the watermark reaches the end of the common span: every batch
    ``disagreement`` window inside it (not clipped at either end) is one ``disagreement``
    incident at its start and one ``agreement_restored`` at its end."""
    folder = tmp_path
    result = simulate(SimConfig(groups=4, nameservers=3, duration_ms=1_800_000, seed=3,
                                faults="heavy"))
    for ns, text in result.journal_texts.items():
        rotate(text.splitlines(), folder, ns, 3)
    expected = analyze_local(folder)
    files = sorted(p for p in folder.iterdir() if not p.name.startswith((".", "_")))
    final, statuses, _ = consume(files, {})
    watch = TopicWatch()
    found = list(watch.batch(final["route_changes"], statuses))
    spans = [(r["first_ms"], r["last_ms"]) for r in expected["name_servers"]]
    w0, w1 = max(a for a, _b in spans), min(b for _a, b in spans)
    inside = [r for r in expected["disagreement"] if r["start_ms"] > w0 and r["end_ms"] < w1]
    assert inside  # not vacuous
    opened = {(i["topic"], i["since_ms"]) for i in found if i["event"] == "disagreement"}
    closed = {(i["topic"], i["since_ms"], i["at_ms"]) for i in found
              if i["event"] == "agreement_restored"}
    for row in inside:
        assert (row["topic"], row["start_ms"]) in opened
        assert (row["topic"], row["start_ms"], row["end_ms"]) in closed
    assert watch.disagreeing == len(opened) - len(closed)
    # fed as rotated (every name server's first pieces, then the rest), the watermark
    # holds back what one name server read ahead of the others: the same incidents
    states: dict[str, bytes] = {}
    half = TopicWatch()
    again: list[dict[str, Any]] = []
    for step in (files[0::3] + files[1::3], files[2::3]):
        got, status, _ = consume(sorted(step), states)
        again += half.batch(got.get("route_changes", []), status)
    assert sorted(map(repr, again)) == sorted(map(repr, found))
