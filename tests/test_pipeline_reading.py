"""Reading journals fast and reading bad input: the reader's remembered record rests give
the verdicts of a full parse, and the pipeline's input rules (skipped files, bytes that are
not UTF-8, truncated gzip, empty journals, sequence gaps, far-future times)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routing.journal import JournalReader, RejectedLine
from routing.pipeline._scenarios import damage, operations, play


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
