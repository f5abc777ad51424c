"""The watcher's file order without Spark (``routing.pipeline._live_order``): a name server's
rotated files (``<ns>.<first seq>.jsonl``) arriving in any order, across any micro-batches,
are replayed in sequence order — the same rows and incidents as in-order arrival — while
the missing file is within the hold's bound; a file that never arrives is given up on once
the oldest held file has waited the bound, and the gap is reported as the batch run does."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from routing.journal import journal_file_name
from routing.pipeline import LiveMetrics
from routing.pipeline._files import line_key
from routing.pipeline._live import LiveReplay, dump_state, load_state, split_file
from routing.pipeline._live_order import MAX_HELD_FILES
from routing.sim import SimConfig, simulate

WAIT = 30_000


def _files(pieces: int = 8) -> list[tuple[str, bytes]]:
    """One name server's journal (crashes and partitions) as ``pieces`` rotated files."""
    result = simulate(SimConfig(groups=3, nameservers=1, duration_ms=900_000, seed=5,
                                faults="heavy"))
    lines = result.journal_texts["ns-0"].splitlines()
    size = -(-len(lines) // pieces)
    out = []
    for i in range(0, len(lines), size):
        chunk = lines[i:i + size]
        first = line_key(chunk[0])[1] or 0
        out.append((f"/j/{journal_file_name('ns-0', first)}",
                    ("\n".join(chunk) + "\n").encode()))
    return out


FILES = _files()


def _piece(source: str, content: bytes) -> tuple[str, int, bytes]:
    (lines, notes), = split_file(source, content).values()
    return source, 0, pickle.dumps((lines, notes))


def _run(batches: list[list[int]], times: list[int], *, wait: int = WAIT
         ) -> tuple[list[Any], dict[str, Any]]:
    """Each micro-batch's files (indices into FILES) at its processing time, through
    state bytes as the stream keeps them: (rows and incidents, the last status)."""
    state: bytes | None = None
    rows: list[Any] = []
    status: dict[str, Any] = {}
    for batch, now in zip(batches, times, strict=True):
        replay = load_state(state) if state is not None else LiveReplay()
        for lines, notes in replay.admit([_piece(*FILES[i]) for i in batch], now, wait):
            rows += replay.feed(lines, notes)
        status = replay.status()
        state = dump_state(replay)
    return rows, status


IN_ORDER = _run([list(range(len(FILES)))], [0])


@settings(max_examples=25, deadline=None)
@given(st.permutations(range(len(FILES))), st.lists(st.integers(1, 4), min_size=len(FILES)))
def test_files_in_any_order_within_the_bound_give_the_in_order_rows(
        order: list[int], sizes: list[int]) -> None:
    batches: list[list[int]] = []
    rest = list(order)
    for size in sizes:
        if rest:
            batches.append(rest[:size])
            rest = rest[size:]
    rows, status = _run(batches, [1_000 * i for i in range(len(batches))])
    assert rows == IN_ORDER[0]
    assert status == IN_ORDER[1]
    assert status["held_files"] == 0 and status["name_servers"][0]["gaps"] == 0


def test_an_early_file_is_held_and_counted_until_the_missing_one_arrives() -> None:
    rows, status = _run([[0, 2, 3]], [0])
    assert status["held_files"] == 2  # files 2 and 3 wait for file 1
    assert status["name_servers"][0]["gaps"] == 0
    rows, status = _run([[0, 2, 3], [4], [1, 5, 6, 7]], [0, 10_000, 20_000])
    assert (rows, status) == IN_ORDER
    # not holding (a bound of 0) replays file 1 after 2: a gap, then its lines rejected
    rows, status = _run([[0, 2, 3], [4], [1, 5, 6, 7]], [0, 10_000, 20_000], wait=0)
    assert status["name_servers"][0]["gaps"] == 1 and status["released_files"] == 1
    assert status["name_servers"][0]["rejected"] > 0 and rows != IN_ORDER[0]


def test_held_and_released_files_are_metrics() -> None:
    metrics = LiveMetrics()
    for held, released in ((2, 0), (0, 1), (0, 1)):
        status = {"live_brokers": {"ns-1": 1}, "open_sessions": [], "name_servers": [],
                  "held_files": held, "released_files": released}
        metrics.batch({"ns-1": status}, [], disagreeing=0, seconds=0.1)
        assert metrics.registry.get_sample_value(
            "routing_watch_held_files", {"ns": "ns-1"}) == held
    assert metrics.registry.get_sample_value(
        "routing_watch_released_files_total", {"ns": "ns-1"}) == 1


def test_a_file_that_never_arrives_is_given_up_on_after_the_bound() -> None:
    everything_but_1 = [0, *range(2, len(FILES))]
    rows, status = _run([[0, 2], [3], list(range(4, len(FILES)))], [0, 10_000, WAIT - 1])
    assert status["held_files"] == len(FILES) - 2  # not yet: the oldest held waited < WAIT
    assert status["name_servers"][0]["gaps"] == 0
    rows, status = _run([[0, 2], [3], list(range(4, len(FILES))), []],
                        [0, 10_000, WAIT - 1, WAIT])
    # as the batch run of the folder without file 1: the gap and its lost lines reported
    gap, gap_status = _run([everything_but_1], [0], wait=0)
    assert status["held_files"] == 0 and status["released_files"] == 1
    assert (rows, status["name_servers"]) == (gap, gap_status["name_servers"])
    ns = status["name_servers"][0]
    assert ns["gaps"] == 1 and ns["records"] < IN_ORDER[1]["name_servers"][0]["records"]


def test_a_first_file_that_is_not_the_journals_start_waits_for_it() -> None:
    _rows, status = _run([[1]], [0])
    assert status["held_files"] == 1 and status["name_servers"] == []
    rows, status = _run([[1], [0]], [0, 1_000])
    assert status["held_files"] == 0
    assert _run([[0, 1]], [0]) == (rows, status)


def test_too_many_held_files_are_released() -> None:
    from routing.pipeline._live_order import FileOrder

    order = FileOrder()
    pieces = [(f"/j/{journal_file_name('ns-0', 10 * (i + 1))}", 0,
               pickle.dumps(([("x", 1, f'{{"ns":"ns-0","seq":{10 * (i + 1) + 9}}}',
                               None, None)], [])))
              for i in range(MAX_HELD_FILES + 1)]
    order.next_seq["ns-0"] = 0
    assert order.admit(pieces[:-1], 0, WAIT) == [] and len(order.held) == MAX_HELD_FILES
    assert len(order.admit(pieces[-1:], 1, WAIT)) == MAX_HELD_FILES + 1
    assert order.held == [] and order.released == 1


def test_a_negative_reorder_wait_is_refused_before_spark_starts(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from routing.cli import main

    done = CliRunner().invoke(main, ["watch", str(tmp_path), "--out", str(tmp_path / "o"),
                                     "--reorder-wait", "-1"])
    assert done.exit_code == 2 and "--reorder-wait" in done.output
    assert not (tmp_path / "o").exists()
