"""Reading journals fast and reading bad input: the reader's remembered record rests give
the verdicts of a full parse, and the pipeline's input rules (skipped files, bytes that are
not UTF-8, truncated gzip, empty journals, sequence gaps, far-future times)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_scenarios import bad_folder, damage, operations, play
from routing.journal import JournalReader, RejectedLine
from routing.journal._reader import MAX_TS_JUMP_MS
from routing.pipeline import RejectedRecords, analyze_local


def _read(lines: list[str], *, remember: bool) -> tuple[list[Any], list[Any]]:
    reader = JournalReader(remember=remember)
    out = [reader.feed(text, source="x", line_number=i) for i, text in enumerate(lines, 1)]
    return out, list(reader.gaps)


def _mixed(journals: dict[str, list[str]]) -> list[str]:
    """Every journal's lines, interleaved round-robin (name servers read together)."""
    columns = list(journals.values())
    return [c[i] for i in range(max(map(len, columns), default=0)) for c in columns
            if i < len(c)]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(operations(min_size=10, max_size=80), st.integers(0, 2), st.integers(0, 50))
def test_remembered_rests_give_the_verdicts_of_a_full_parse(
        ops: list[Any], config: int, seed: int) -> None:
    played = play(ops, nameservers=2, config=config)
    lines = _mixed(damage(played, seed))
    # repeat lines (duplicates and out-of-order copies of remembered rests)
    lines += lines[1::3]
    fast, fast_gaps = _read(lines, remember=True)
    slow, slow_gaps = _read(lines, remember=False)
    assert fast == slow
    assert fast_gaps == slow_gaps


def _header(ns: str = "ns-0") -> str:
    return json.dumps({"journal": "routing", "version": 1, "nameserver": ns, "config": {},
                       "start_ms": 0}, separators=(",", ":"))


def _scan(seq: int, ts: int, ns: str = "ns-0", tail: str = "") -> str:
    return (f'{{"ns":"{ns}","seq":{seq},"ts":{ts},"op":"scan","cluster":null,'
            f'"broker_name":null,"broker_addr":null,"args":{{}}{tail}}}')


def test_a_rest_that_overrides_the_prefix_is_never_remembered() -> None:
    # duplicate keys: the last one wins, so this line's seq is 1, whatever the prefix says
    lines = [_header(), _scan(1, 5, tail=',"seq":1'), _scan(2, 6, tail=',"seq":1')]
    fast, _ = _read(lines, remember=True)
    assert isinstance(fast[2], RejectedLine)
    assert "not after the last accepted seq 1" in fast[2].reason
    assert fast == _read(lines, remember=False)[0]


def test_a_remembered_rest_still_checks_order_and_name_server() -> None:
    lines = [_header(), _scan(1, 5), _scan(2, 4), _scan(2, 6), _scan(3, 7, ns="ns-1"),
             _header("ns-1"), _scan(1, 1, ns="ns-1"), _scan(4, 8)]
    fast, gaps = _read(lines, remember=True)
    reasons = [x.reason if isinstance(x, RejectedLine) else x.seq for x in fast[1:]]
    assert "time must not go backwards" in reasons[1]
    assert reasons[2] == 2
    assert "no header for name server 'ns-1'" in reasons[3]
    assert reasons[5:] == [1, 4]
    assert [(g.after_seq, g.next_seq) for g in gaps] == [(2, 4)]
    assert (fast, gaps) == _read(lines, remember=False)


# --------------------------------------------------------------------------- bad input


def _journal_lines(seed: int = 1) -> dict[str, list[str]]:
    return play([("register", 3, 0, 0, 0, 0, [0, 1], 0, 0, None, False, 4, True),
                 ("advance", 40_000), ("heartbeat", 3, 0, 0), ("advance", 200_000)],
                nameservers=2, prefix=f"s{seed}")


def test_a_folder_skips_other_files_and_reports_bad_ones(tmp_path: Path) -> None:
    folder = bad_folder(tmp_path)
    tables = analyze_local(folder)
    rejected = {(Path(r["source"]).name, r["stage"]): r for r in tables["rejected"]}
    for name in ("summary.json", "timeline.png", "NOTES.txt"):
        assert rejected[(name, "skipped")]["line"] == 0
        assert "not a journal file name" in rejected[(name, "skipped")]["reason"]
    assert rejected[("empty.jsonl", "read")]["reason"] == "empty journal file: no lines"
    utf8 = rejected[("utf8.jsonl", "read")]
    assert (utf8["line"], utf8["reason"]) == (2, "not valid UTF-8")
    assert "broker\ufffd-a" in utf8["text"]
    cut = rejected[("cut.jsonl.gz", "read")]
    assert "gzip file cut short" in cut["reason"] and cut["line"] > 1
    # the readable lines of the cut file were analyzed
    assert any(s["ns"] == "z-0" for s in tables["sessions"])
    assert {r["ns"] for r in tables["name_servers"]} == {
        "s1-0", "s1-1", "u-0", "z-0"}
    # skipped files do not fail --strict; the other bad files do
    with pytest.raises(RejectedRecords) as caught:
        analyze_local(folder, strict=True)
    assert all(r["stage"] != "skipped" for r in caught.value.rows)
    good = tmp_path / "good"
    good.mkdir()
    for name in ("s1-0.jsonl", "s1-1.jsonl", "summary.json", "NOTES.txt"):
        (good / name).write_bytes((folder / name).read_bytes())
    assert [r["stage"] for r in analyze_local(good, strict=True)["rejected"]] == [
        "skipped", "skipped"]


def test_strict_fails_on_a_sequence_gap_naming_server_and_range() -> None:
    journals = _journal_lines()
    lines = journals["s1-0.jsonl"]
    del lines[2]  # a lost line: no rejection, but a gap
    plain = analyze_local(journals)
    assert not plain["rejected"]
    assert [r["gaps"] for r in plain["name_servers"]] == [1, 0]
    with pytest.raises(RejectedRecords, match=r"s1-0: 1 gap\(s\), the first after seq 1 "
                                              r"\(next 3: seq 2\.\.2 missing\)") as caught:
        analyze_local(journals, strict=True)
    assert caught.value.total == 0 and len(caught.value.gaps) == 1


def test_a_far_future_record_is_blamed_not_the_good_lines_after_it() -> None:
    journals = _journal_lines()
    lines = journals["s1-0.jsonl"]
    doc = json.loads(lines[2])
    far = dict(doc, seq=doc["seq"], ts=doc["ts"] + 400 * 24 * 3_600_000)
    lines[2] = json.dumps(far, separators=(",", ":"))
    tables = analyze_local(journals)
    (bad,) = tables["rejected"]
    assert bad["line"] == 3 and "clock jump" in bad["reason"]
    assert [r["last_ms"] for r in tables["name_servers"]] == [
        json.loads(lines[-1])["ts"], json.loads(journals["s1-1.jsonl"][-1])["ts"]]


def test_a_real_silence_longer_than_the_jump_limit_costs_one_record() -> None:
    reader = JournalReader()
    day = MAX_TS_JUMP_MS
    lines = [_header(), _scan(1, 5), _scan(2, 5 + day + 1), _scan(3, 5 + day + 2),
             _scan(4, 5 + day + 3)]
    got = [reader.feed(x, source="x", line_number=i) for i, x in enumerate(lines, 1)]
    assert isinstance(got[2], RejectedLine) and "clock jump" in got[2].reason
    assert [type(g).__name__ for g in got[3:]] == ["JournalRecord", "JournalRecord"]
