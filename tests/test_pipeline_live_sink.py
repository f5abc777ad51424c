"""The watcher's delivery and metrics without Spark: `IncidentLog` delivers each micro-batch
once (a batch cut short by a crash is cut off and written again in its place), and
`LiveMetrics` serves what the sink tells it in Prometheus' text format."""

from __future__ import annotations

import io
import json
import urllib.request
from pathlib import Path

import pytest

from routing import InvalidRequest
from routing.pipeline import LiveMetrics, parse_host_port
from routing.pipeline._live_spark import IncidentLog


class Crash(RuntimeError):
    pass


def _lines(path: Path) -> list[dict[str, int]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_each_batch_is_delivered_once_even_when_cut_short(tmp_path: Path) -> None:
    out, marker = tmp_path / "incidents.jsonl", tmp_path / "ck" / "marker.json"
    log = IncidentLog(out, marker)
    assert log.deliver(0, [{"b": 0, "i": 0}, {"b": 0, "i": 1}])
    assert not log.deliver(0, [{"b": 0, "i": 0}, {"b": 0, "i": 1}])  # Spark ran it again

    def crash() -> None:
        raise Crash

    with pytest.raises(Crash):  # written, not marked: a crash in the worst place
        log.deliver(1, [{"b": 1, "i": 0}], between=crash)
    assert len(_lines(out)) == 3
    again = IncidentLog(out, marker)  # a restarted watcher
    assert again.deliver(1, [{"b": 1, "i": 0}])
    assert again.deliver(2, [])
    assert _lines(out) == [{"b": 0, "i": 0}, {"b": 0, "i": 1}, {"b": 1, "i": 0}]


def test_to_a_stream_a_delivered_batch_is_not_written_again(tmp_path: Path) -> None:
    stream = io.StringIO()
    log = IncidentLog(stream, tmp_path / "marker.json")
    assert log.deliver(5, [{"event": "x"}])
    assert not log.deliver(5, [{"event": "x"}]) and not log.deliver(4, [])
    assert stream.getvalue() == '{"event": "x"}\n'


def test_metrics_are_served_as_the_sink_reports_them() -> None:
    metrics = LiveMetrics()
    port = metrics.serve("127.0.0.1", 0)
    try:
        status = {"live_brokers": {"ns-0": 3}, "open_sessions": [],
                  "name_servers": [{"ns": "ns-0", "records": 40, "last_ms": 1_000}]}
        expired = {"event": "broker_expired", "ns": "ns-0", "detection_delay_ms": 125_000}
        metrics.batch({"ns-0": status}, [expired], disagreeing=2, seconds=0.25)
        status["name_servers"][0]["records"] = 100
        metrics.batch({"ns-0": status}, [], disagreeing=1, seconds=0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
            text = page.read().decode()
    finally:
        metrics.close()
    assert 'routing_watch_live_brokers{ns="ns-0"} 3.0' in text
    assert "routing_watch_open_disagreements 1.0" in text
    assert 'routing_watch_expiries_total{ns="ns-0"} 1.0' in text
    assert 'routing_watch_expiry_delay_seconds_bucket{le="125.0"} 1.0' in text
    assert 'routing_watch_expiry_delay_seconds_bucket{le="120.0"} 0.0' in text
    assert "routing_watch_records_total 100.0" in text
    assert "routing_watch_batch_seconds 0.5" in text


@pytest.mark.parametrize("text", ["9100", "host:", "host:x", "host:70000"])
def test_a_bad_metrics_address_names_the_field(text: str) -> None:
    with pytest.raises(InvalidRequest, match="metrics") as info:
        parse_host_port(text)
    assert info.value.field == "metrics"
    assert parse_host_port(":9100") == ("0.0.0.0", 9100)
