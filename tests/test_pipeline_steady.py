"""The replay's steady fast path (issue 12) against the full replay: equal tables.

`ReplayDeriver` sends a re-registration of the table a broker last sent through
`Replayer.renew_call` (O(1), no event) and the reader takes a remembered line without parsing
it; switching both off (every record through `RouteInfoManager.register` and `json.loads`)
must give the same tables on simulator journals with faults, on damaged journals and on
hypothesis-made operation sequences.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_scenarios import damage, operations, play
from routing.journal import JournalReader, Replayer
from routing.pipeline import analyze_local
from routing.sim import SimConfig, simulate


@contextmanager
def full_replay() -> Iterator[dict[str, int]]:
    """Every record through the full path; counts the renewals that were refused."""
    calls = {"renew": 0}
    real_renew, real_init = Replayer.renew_call, JournalReader.__init__

    def no_renew(self: Replayer, *args: Any) -> bool:
        calls["renew"] += 1
        return False

    def parse_all(self: JournalReader, *, remember: bool = True) -> None:
        real_init(self, remember=False)

    Replayer.renew_call = no_renew  # type: ignore[method-assign]
    JournalReader.__init__ = parse_all  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        Replayer.renew_call = real_renew  # type: ignore[method-assign]
        JournalReader.__init__ = real_init  # type: ignore[method-assign]


def renewals(journals: Any) -> int:
    """How many records the fast path took."""
    count = 0
    real = Replayer.renew_call

    def counting(self: Replayer, *args: Any) -> bool:
        nonlocal count
        done = real(self, *args)
        count += done
        return done

    Replayer.renew_call = counting  # type: ignore[method-assign]
    try:
        analyze_local(journals)
    finally:
        Replayer.renew_call = real  # type: ignore[method-assign]
    return count


@pytest.mark.parametrize("seed", [3, 17, 29])
def test_simulated_journals_with_faults_give_the_full_replays_tables(seed: int) -> None:
    result = simulate(SimConfig(groups=4, slaves=1, nameservers=3, clients=1,
                                duration_ms=2 * 3_600_000, seed=seed))
    journals = {f"{ns}.jsonl": list(result.journal_lines(ns)) for ns in result.nameserver_ids}
    at = (600_000, 3_600_000)
    fast = analyze_local(journals, at=at)
    with full_replay() as calls:
        slow = analyze_local(journals, at=at)
    assert calls["renew"] > 0
    assert fast == slow
    records = sum(len(lines) for lines in journals.values())
    assert renewals(journals) > records // 2  # most records are steady re-registrations


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_damaged_journals_give_the_full_replays_tables(seed: int) -> None:
    result = simulate(SimConfig(groups=3, slaves=1, nameservers=2, clients=1,
                                duration_ms=3_600_000, seed=seed))
    journals = damage({f"{ns}.jsonl": list(result.journal_lines(ns))
                       for ns in result.nameserver_ids}, seed)
    fast = analyze_local(journals)
    with full_replay():
        slow = analyze_local(journals)
    assert fast == slow
    assert fast["rejected"]


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(operations(min_size=20, max_size=120), st.integers(0, 2), st.integers(0, 5))
def test_operation_sequences_give_the_full_replays_tables(
        ops: list[Any], config: int, seed: int) -> None:
    journals = play(ops, nameservers=2, config=config)
    if seed:
        journals = damage(journals, seed)
    at = (20_000, 150_000)
    fast = analyze_local(journals, at=at)
    with full_replay():
        slow = analyze_local(journals, at=at)
    assert fast == slow
