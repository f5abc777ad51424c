"""The pipeline's parts without Spark: the partition planner, the per-topic sweep, the
summary, the picture, the ``--local`` command line and the session helpers."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

import routing as r
from pipeline_scenarios import damage, play
from routing.cli._analyze import analyze_command, parse_time
from routing.journal import (
    Heartbeat,
    JournalHeader,
    JournalRecord,
    Register,
    RegisterTopic,
    Scan,
    UnregisterMany,
)
from routing.pipeline import analyze_local
from routing.pipeline._answers import Contribution, canonical_json, merge_routes
from routing.pipeline._groups import WHOLE, component_count, components, nodes_of
from routing.pipeline._report import write_report
from routing.pipeline._schema import TABLES
from routing.pipeline._session import (
    SparkUnavailable,
    check_java,
    is_local_master,
    log4j_config,
)
from routing.pipeline._summary import format_ms, format_time, render_summary, summarize_rows
from routing.pipeline._sweep import sweep_topic
from routing.pipeline._timeline import draw_timeline

# --------------------------------------------------------------------------- plan


def _record(call: Any, seq: int = 1) -> JournalRecord:
    return JournalRecord(nameserver_id="ns", seq=seq, at_ms=0, call=call)


def _register(name: str, addr: str, channel: str | None = None, *,
              mapping: bool = False) -> JournalRecord:
    topics = {t: r.TopicConfig(topic_name=t) for t in ("T", "U")}
    mappings = {"T": r.TopicQueueMappingInfo(topic="T", bname=name)} if mapping else {}
    return _record(Register(registration=r.Registration(
        cluster="c", broker_name=name, broker_id=0, broker_addr=addr, topics=topics,
        topic_queue_mappings=mappings, channel=channel)))


def test_entries_touch_their_groups_addresses_and_channels() -> None:
    assert nodes_of(_register("a", "10.0.0.1:1", "conn")) == (
        "g:a", "a:10.0.0.1:1", "c:'conn'")
    assert nodes_of(_record(Heartbeat(cluster="c", broker_addr="10.0.0.1:1"))) == (
        "a:10.0.0.1:1",)
    assert nodes_of(_record(Scan())) == ()
    assert nodes_of(JournalHeader(nameserver_id="ns", seq=0, start_ms=0)) == ()
    rows = tuple(r.QueueData(broker_name=n, read_queue_nums=1, write_queue_nums=1)
                 for n in ("b", "a", "b"))
    assert nodes_of(_record(RegisterTopic(topic="T", queue_datas=rows))) == ("g:b", "g:a")
    many = UnregisterMany(requests=(r.UnregisterRequest(
        cluster="c", broker_addr="10.0.0.2:1", broker_name="x", broker_id=1),))
    assert nodes_of(_record(many)) == ("g:x", "a:10.0.0.2:1")
    assert nodes_of(_register("a", "10.0.0.1:1", mapping=True)) == (WHOLE,)


def test_components_join_what_shares_an_address_a_channel_or_a_call() -> None:
    sets = [("ns", ("g:a", "a:1")), ("ns", ("g:b", "a:2", "c:x")), ("ns", ("g:c", "a:3")),
            ("ns", ("g:d", "a:4", "c:x")), ("ns", ("g:e", "a:1")), ("ns", ()),
            ("other", ("g:a", "a:1")), ("other", ("g:z", "a:9"))]
    comps = components(sets)
    ns = comps["ns"]
    assert ns["g:a"] == ns["g:e"] == ns["a:1"]  # one address in two groups
    assert ns["g:b"] == ns["g:d"]  # one connection for two brokers
    assert len({ns["g:a"], ns["g:b"], ns["g:c"]}) == 3
    assert component_count(ns) == 3 and component_count(comps["other"]) == 2
    assert components(reversed(sets)) == comps  # numbering does not depend on input order
    assert set(components([("ns", ("g:a", "a:1")), ("ns", (WHOLE,)),
                           ("ns", ("g:b", "a:2"))])["ns"].values()) == {0}
    assert components([("empty", ())]) == {"empty": {}}


# --------------------------------------------------------------------------- topics


def _route(*groups: tuple[str, str, int]) -> r.TopicRouteData:
    return r.TopicRouteData(
        queue_datas=[r.QueueData(broker_name=n, read_queue_nums=q, write_queue_nums=q)
                     for n, _a, q in groups],
        broker_datas=[r.BrokerData(cluster="c", broker_name=n, broker_addrs={0: a})
                      for n, a, _q in groups])


def test_merging_partition_routes_gives_the_whole_route() -> None:
    whole = _route(("a", "10.0.0.1:1", 4), ("b", "10.0.0.2:1", 8), ("c", "10.0.0.3:1", 2))
    parts = [_route(("b", "10.0.0.2:1", 8)), _route(("a", "10.0.0.1:1", 4),
                                                    ("c", "10.0.0.3:1", 2))]
    assert merge_routes(parts) == whole
    assert merge_routes([]) is None
    assert canonical_json(merge_routes(reversed(parts)) or whole) == canonical_json(whole)


def _c(ns: str, at: int, seq: int, part: int, route: r.TopicRouteData | None) -> Contribution:
    return Contribution(ns=ns, topic="T", at_ms=at, seq=seq, part=part,
                        route_json=None if route is None else canonical_json(route))


def test_one_record_changing_two_partitions_is_one_route_change() -> None:
    a, b = _route(("a", "10.0.0.1:1", 4)), _route(("b", "10.0.0.2:1", 4))
    feed = [_c("ns", 0, 1, 0, a), _c("ns", 5, 2, 1, b),
            _c("ns", 9, 3, 0, None), _c("ns", 9, 3, 1, None)]  # one scan expires both
    rows = [row for table, row in sweep_topic("T", feed, {"ns": (0, 20)}, removals=())
            if table == "route_changes"]
    assert [(x["at_ms"], x["seq"], x["groups"]) for x in rows] == [
        (0, 1, ["a"]), (5, 2, ["a", "b"]), (9, 3, [])]
    assert not rows[-1]["present"]


def test_contributions_must_come_in_time_order() -> None:
    a = _route(("a", "10.0.0.1:1", 4))
    with pytest.raises(ValueError, match="out of order"):
        list(sweep_topic("T", [_c("ns", 5, 1, 0, a), _c("ns", 4, 2, 0, None)],
                         {"ns": (0, 9)}, removals=()))


def test_a_shorter_journal_bounds_the_compared_span_and_its_availability() -> None:
    a = _route(("a", "10.0.0.1:1", 4))
    spans = {"n1": (0, 100), "n2": (10, 60)}
    out = list(sweep_topic("T", [_c("n1", 0, 1, 0, a), _c("n2", 30, 1, 0, a)], spans,
                           removals=()))
    [window] = [row for t, row in out if t == "disagreement"]
    assert (window["start_ms"], window["end_ms"]) == (10, 30)
    avail = {row["ns"]: row for t, row in out if t == "availability"}
    assert (avail["n1"]["window_ms"], avail["n1"]["writable_ms"]) == (100, 100)
    assert (avail["n2"]["window_start_ms"], avail["n2"]["window_ms"],
            avail["n2"]["writable_ms"], avail["n2"]["outages"]) == (10, 50, 30, 1)
    [total] = [row for t, row in out if t == "disagreement_totals"]
    assert (total["span_ms"], total["total_ms"]) == (50, 20)


def test_one_name_server_has_nothing_to_disagree_with() -> None:
    out = list(sweep_topic("T", [_c("n1", 0, 1, 0, _route(("a", "10.0.0.1:1", 4)))],
                           {"n1": (0, 100)}, removals=()))
    assert {t for t, _ in out} == {"route_changes", "availability"}


# --------------------------------------------------------------------------- output


@pytest.fixture(scope="module")
def tables() -> dict[str, list[dict[str, Any]]]:
    ops: list[Any] = [("register", 3, 0, g, 0, g, [0, 1], g % 4, 0, None, False, 4, True)
                      for g in range(4)]
    ops += [("advance", 20_000), ("heartbeat", 3, 0, 0), ("advance", 130_000),
            ("register", 1, 0, 1, 0, 1, [0, 1], 1, 0, None, False, 4, True),
            ("advance", 5_000), ("restart", 1), ("advance", 5_000)]
    return analyze_local(damage(play(ops, nameservers=3), seed=1), at=[10_000])


def test_every_row_has_exactly_its_tables_columns(tables: dict[str, list[dict[str, Any]]]
                                                  ) -> None:
    for name, rows in tables.items():
        assert rows, name
        for row in rows:
            assert set(row) == set(TABLES[name].names), name


def test_the_summary_prints_the_answers(tables: dict[str, list[dict[str, Any]]]) -> None:
    summary = summarize_rows(tables)
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=160, color_system=None))
    text = out.getvalue()
    for heading in ("Name servers", "Broker sessions", "Expiries", "Worst disagreement incidents",
                    "Lowest availability", "Routes at", "Rejected lines"):
        assert heading in text
    assert summary.records == sum(x["records"] for x in tables["name_servers"])
    assert summary.rejected_total == len(tables["rejected"]) > 0
    assert summary.sessions_by_reason["expired"] == len(tables["expiries"])


def test_the_timeline_picture_and_page(tables: dict[str, list[dict[str, Any]]],
                                       tmp_path: Path) -> None:
    png = draw_timeline(tables["sessions"], tables["disagreement"], tables["name_servers"],
                        tmp_path / "t.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = write_report(tables, summarize_rows(tables), tmp_path / "t.html").read_text()
    assert "<h2>Incidents</h2>" in page and 'id="tl-ns-0"' in page
    assert "https://" not in page.split("<script>")[0]  # nothing fetched: plotly.js inline
    # rejected lines by reason and file, expiries per broker
    assert "<h2>Rejected lines</h2>" in page and "None: every line was used" not in page
    assert all(f">{r['source']}<" in page for r in tables["rejected"])
    assert all(f"{r['broker_name']} #{r['broker_id']} {r['broker_addr']}" in page
               for r in tables["expiries"])


def test_formats() -> None:
    assert [format_ms(v) for v in (None, 850, 12_340, 245_000, 7_380_000)] == [
        "-", "850 ms", "12.3 s", "4 min 05 s", "2 h 03 min"]
    assert format_time(3_723_004) == "T+1:02:03.004"
    assert format_time(1_700_000_000_000) == "2023-11-14 22:13:20.000"
    assert parse_time("2023-11-14T22:13:20Z") == 1_700_000_000_000
    with pytest.raises(Exception, match="expected ms"):
        parse_time("yesterday")


def test_analyze_local_from_the_command_line(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    journals = play([("register", 3, 0, 0, 0, 0, [0, 1], 0, 0, None, False, 4, True),
                     ("advance", 150_000)], nameservers=2)
    for name, lines in journals.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    paths = [str(tmp_path / n) for n in journals]
    result = CliRunner().invoke(analyze_command, [*paths, "--out", str(out), "--local",
                                                  "--at", "T+0:00:01", "--timeline"])
    assert result.exit_code == 0, result.output
    expected = analyze_local(paths, at=[1_000])
    for name in TABLES:
        assert pq.read_table(out / name).to_pylist() == expected[name], name
    assert (out / "report.html").exists() and (out / "timeline.png").exists()
    assert CliRunner().invoke(analyze_command, [*paths, "--local"]).exit_code == 2
    bad = CliRunner().invoke(analyze_command, [*paths, str(tmp_path / "nope"), "--local",
                                               "--out", str(out)])
    assert bad.exit_code == 1 and "no such journal" in bad.output


# --------------------------------------------------------------------------- session


def _fake_java(home: Path, banner: str) -> None:
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{banner}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)


def test_java_is_checked_before_spark_starts(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_java(tmp_path / "old", 'openjdk version "11.0.21" 2023-10-17')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "old"))
    with pytest.raises(SparkUnavailable, match=r"Java 17\+, but .* is Java 11"):
        check_java()
    _fake_java(tmp_path / "eight", 'java version "1.8.0_392"')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "eight"))
    with pytest.raises(SparkUnavailable, match="is Java 8"):
        check_java()
    _fake_java(tmp_path / "new", 'openjdk version "21.0.1" 2023-10-17')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "new"))
    assert check_java().major == 21
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SparkUnavailable, match="no `java` was found"):
        check_java()


def test_local_masters_and_the_quiet_log_config() -> None:
    assert all(is_local_master(m) for m in ("local", "local[2]", "local[*]",
                                            "local-cluster[2,1,1024]"))
    assert not any(is_local_master(m) for m in ("spark://h:7077", "yarn", "k8s://h"))
    text = log4j_config().read_text()
    assert "rootLogger.level = error" in text
    assert os.access(log4j_config(), os.R_OK)


def test_the_reference_needs_no_pyspark() -> None:
    import subprocess
    import sys

    code = ("import sys; sys.modules['pyspark'] = None\n"
            f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "import routing.pipeline as p\n"
            "from pipeline_scenarios import play\n"
            "t = p.analyze_local(play([('register', 1, 0, 0, 0, 0, [0, 1], 0, 0, None, False,"
            " 4, True)]))\n"
            "assert len(t['sessions']) == 1\n"
            "try:\n    p.spark_session()\nexcept p.SparkUnavailable as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "pip install 'rocketmq-routing[spark]'" in done.stdout
