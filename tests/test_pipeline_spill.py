"""The reference's disk spills (`routing.pipeline._spill`, `_store.TableStore`): a store
that spills after every few rows gives exactly the tables of one that never spills, the
sweep read back from sorted runs equals the in-memory one, and the Parquet writer's
batches stay within their bound."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_scenarios import damage, operations, play
from routing import RoutingError
from routing.pipeline import _reference, _store, analyze_local, analyze_local_to
from routing.pipeline._schema import TABLES, sort_rows
from routing.pipeline._spill import BLOCK, RouteTexts, SortedRuns, SpillFolder
from routing.pipeline._store import TableStore, text_batches
from routing.sim import SimConfig, simulate


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 5), st.none() | st.sampled_from("abc")),
                max_size=60), st.integers(1, 9))
def test_sorted_runs_merge_as_one_sort(rows: list[tuple[int, Any]], limit: int) -> None:
    folder = SpillFolder()
    runs = SortedRuns(lambda r: (r[0], r[1] or ""), folder, limit=limit)
    for row in rows:
        runs.add(row)
    assert runs.count == len(rows)
    assert len(runs.runs) == len(rows) // limit  # a run per full buffer
    assert list(runs.sorted()) == sorted(rows, key=lambda r: (r[0], r[1] or ""))
    assert runs.count == 0 and not runs.runs  # read once; the run files are gone
    folder.close()


def test_a_run_is_read_back_a_block_at_a_time(tmp_path: Path) -> None:
    folder = SpillFolder(tmp_path)
    runs = SortedRuns(lambda r: r, folder, limit=3 * BLOCK)
    for i in reversed(range(3 * BLOCK + 5)):
        runs.add((i,))
    assert len(runs.runs) == 1 and len(runs.buffer) == 5
    merged = runs.sorted()
    assert next(merged) == (0,)
    assert [p.name for p in tmp_path.iterdir()]  # the folder exists while merging
    assert list(merged)[-1] == (3 * BLOCK + 4,)
    folder.close()
    assert not list(tmp_path.iterdir())


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(RoutingError, match="limit") as caught:
        SortedRuns(lambda r: r, SpillFolder(), limit=0)
    assert isinstance(caught.value, ValueError)


def test_route_texts_are_written_once_per_key(tmp_path: Path) -> None:
    folder = SpillFolder(tmp_path)
    texts = RouteTexts(folder, cache_chars=10)
    first = texts.put("d1", "é" * 8)
    assert texts.put("d1", "ignored") == first and len(texts) == 1
    second = texts.put("d2", "x" * 30)
    assert texts.get(first) == "é" * 8 and texts.get(second) == "x" * 30
    assert texts.get(first) == "é" * 8  # read again after the cache was emptied
    texts.close()
    (spilled,) = next(tmp_path.iterdir()).iterdir()
    assert spilled.stat().st_size == 16 + 30
    folder.close()


def test_writer_batches_hold_a_bounded_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_store, "BATCH_BYTES", 100)
    monkeypatch.setattr(_store, "BATCH_ROWS", (2, 50))
    rows = [("x" * (i % 7 * 20), i) for i in range(500)]
    chunks = list(text_batches(iter(rows)))
    assert [r for c in chunks for r in c] == rows
    for chunk in chunks[:-1]:
        text = [len(r[0]) for r in chunk]
        # a batch ends at 50 rows, or at its first row that reaches 100 characters
        # (once it holds two rows): never more than a row's text past the bound
        assert len(chunk) == 50 or (len(chunk) >= 2 and sum(text) >= 100
                                    and (len(chunk) == 2 or sum(text[:-1]) < 100))
    assert max(sum(len(r[0]) for r in c) for c in chunks) < 100 + 120


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(operations(min_size=20, max_size=120), st.integers(0, 2), st.integers(0, 5),
       st.integers(1, 7))
def test_a_store_that_spills_equals_one_that_does_not(
        monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory,
        ops: list[Any], config: int, seed: int, limit: int) -> None:
    journals = play(ops, nameservers=3, config=config)
    if seed:
        journals = damage(journals, seed)
    expected = analyze_local(journals, at=(20_000, 150_000))
    with monkeypatch.context() as m:  # every table and the sweep's changes spilled often
        m.setattr(_reference, "SPILL_ROWS", limit)
        m.setattr(_reference, "TableStore", lambda **kw: TableStore(limit=limit, **kw))
        assert analyze_local(journals, at=(20_000, 150_000)) == expected
        out = tmp_path_factory.mktemp("spilled")
        collected = analyze_local_to(out, journals, at=(20_000, 150_000))
    for name in TABLES:
        written = pq.read_table(out / name).to_pylist()
        assert written == expected[name], name
    assert len(collected["route_changes"]) == len(expected["route_changes"])


def test_simulated_journals_spilled_to_a_given_folder(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    journals = tmp_path / "journals"
    simulate(SimConfig(groups=4, slaves=1, nameservers=3, duration_ms=1_800_000, seed=5,
                       faults="heavy"), out_dir=journals)
    expected = analyze_local(journals, at=(600_000,))
    spill = tmp_path / "spill"
    spill.mkdir()
    seen: list[int] = []
    store = TableStore(limit=16, spill_dir=spill)
    real_spill = SortedRuns.spill

    def counting(self: SortedRuns) -> None:
        real_spill(self)
        seen.append(len(os.listdir(next(spill.iterdir()))))

    monkeypatch.setattr(SortedRuns, "spill", counting)
    got = _reference._analyze_into(store, journals, at=(600_000,), strict=False).tables()
    assert seen and max(seen) > 1  # runs were on disk
    assert got == expected
    assert expected["route_changes"] and got["route_changes"] == sort_rows(
        TABLES["route_changes"], expected["route_changes"])
    assert not list(spill.iterdir())  # the spill folder is removed


def test_dicts_keep_every_row_spilled_or_not() -> None:
    store = TableStore(limit=2)
    rows = [{"ns": "n", "first_ms": i, "last_ms": i, "records": i, "restarts": 0, "gaps": 0,
             "rejected": 0} for i in (3, 1, 2, 0, 4)]
    store.extend("name_servers", rows)
    assert store.count("name_servers") == 5 and len(store.rows["name_servers"]) == 1
    assert sorted(r["first_ms"] for r in store.dicts("name_servers")) == [0, 1, 2, 3, 4]
    assert store.tables()["name_servers"] == sort_rows(TABLES["name_servers"], rows)


def test_route_texts_stay_on_disk_not_in_the_pool() -> None:
    store = TableStore()
    texts = [f'{{"brokerDatas":[{i}]}}' for i in range(50)]
    for i, text in enumerate(texts):
        store.add("route_changes", {
            "ns": "ns-0", "topic": "T", "at_ms": i, "seq": i, "present": True,
            "groups": ["a"], "read_queue_count": 1, "writable_queue_count": 1,
            "producer_writable_queue_count": 1, "digest": f"{i:016x}", "route_json": text})
    assert not any(isinstance(v, str) and v.startswith("{") for v in store._pool)
    assert len(store.texts) == 50
    assert [r["route_json"] for r in store.tables()["route_changes"]] == texts


def test_a_failing_strict_run_leaves_no_folder_behind(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    journals = tmp_path / "journals"
    simulate(SimConfig(groups=3, slaves=1, nameservers=2, duration_ms=600_000, seed=3,
                       faults="heavy"), out_dir=journals)
    bad = journals / "ns-0.jsonl"
    bad.write_text(bad.read_text() + "not json\n")
    monkeypatch.setattr(_reference, "SPILL_ROWS", 2)  # the sweep's changes spill at once
    with pytest.raises(RoutingError, match="rejected"):
        analyze_local_to(tmp_path / "out", journals, strict=True)
    assert not (tmp_path / "out").exists()


def test_route_texts_forget_keys_past_their_bound(tmp_path: Path) -> None:
    folder = SpillFolder(tmp_path)
    texts = RouteTexts(folder, max_keys=2)
    handles = [texts.put(k, f"text {k}") for k in ("a", "b", "c", "a")]
    assert len(texts) == 2  # "a" and "b" forgotten at "c"; "a" written again
    assert handles[3] != handles[0]
    assert [texts.get(h) for h in handles] == ["text a", "text b", "text c", "text a"]
    texts.close()
    folder.close()
