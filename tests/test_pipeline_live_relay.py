"""`LiveRelay` without Spark (``routing watch --remote``'s client side): it copies to a stream
exactly the incident lines the sink's `IncidentLog` marked delivered — never a batch being
written, each line once, also across a restarted client — and feeds `LiveMetrics` each
delivered batch's statuses and open disagreements."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from routing.pipeline import LiveMetrics, LiveRelay
from routing.pipeline._live_relay import DELIVERED_MARKER
from routing.pipeline._live_spark import IncidentLog
from routing.pipeline._live_tables import write_status
from routing.pipeline._live_topics import TopicWatch


def _status(live: int, records: int) -> dict[str, Any]:
    return {"live_brokers": {"ns-0": live}, "open_sessions": [],
            "name_servers": [{"ns": "ns-0", "records": records, "last_ms": 1_000}]}


def _batch(root: Path, log: IncidentLog, batch_id: int, incidents: list[dict[str, Any]],
           *, live: int, open_topics: int, between: Any = None) -> None:
    """What the sink does for one micro-batch (`LiveSink`): statuses, the topic watch,
    then the incidents."""
    write_status(root / "out", batch_id, {"ns-0": _status(live, 10 * (batch_id + 1))})
    watch = TopicWatch()
    watch.open = {f"T{i}": 0 for i in range(open_topics)}
    watch.save(root / "ck" / "topics", batch_id)
    log.deliver(batch_id, incidents, between)


def test_only_delivered_batches_are_relayed_each_line_once(tmp_path: Path) -> None:
    ck, written = tmp_path / "ck", tmp_path / "ck" / "incidents.jsonl"
    log = IncidentLog(written, ck / DELIVERED_MARKER)
    stream = io.StringIO()
    relay = LiveRelay(written, ck, tmp_path / "out", stream=stream)
    assert relay.poll() == 0 and stream.getvalue() == ""  # nothing delivered yet
    _batch(tmp_path, log, 0, [{"event": "a"}, {"event": "b"}], live=3, open_topics=0)
    seen: list[str] = []
    # a poll while batch 1 is written but not marked delivered relays none of it
    _batch(tmp_path, log, 1, [{"event": "c"}], live=2, open_topics=1,
           between=lambda: seen.append(f"{relay.poll()} {stream.getvalue()!r}"))
    assert seen == ["""2 '{"event": "a"}\\n{"event": "b"}\\n'"""]
    assert relay.poll() == 1
    assert relay.poll() == 0
    assert stream.getvalue().splitlines() == ['{"event": "a"}', '{"event": "b"}',
                                              '{"event": "c"}']
    # a restarted client continues after what it relayed
    _batch(tmp_path, log, 2, [{"event": "d"}], live=2, open_topics=0)
    again = io.StringIO()
    assert LiveRelay(written, ck, tmp_path / "out", stream=again).poll() == 1
    assert again.getvalue() == '{"event": "d"}\n'


def test_metrics_get_each_delivered_batch(tmp_path: Path) -> None:
    ck, written = tmp_path / "ck", tmp_path / "incidents.jsonl"
    log = IncidentLog(written, ck / DELIVERED_MARKER)
    metrics = LiveMetrics()
    relay = LiveRelay(written, ck, tmp_path / "out", metrics=metrics)
    expired = {"event": "broker_expired", "ns": "ns-0", "detection_delay_ms": 125_000}
    _batch(tmp_path, log, 0, [expired], live=3, open_topics=2)
    _batch(tmp_path, log, 1, [], live=2, open_topics=1)
    assert relay.poll({"durationMs": {"addBatch": 250}}) == 1
    registry = metrics.registry
    assert registry.get_sample_value("routing_watch_live_brokers", {"ns": "ns-0"}) == 2
    assert registry.get_sample_value("routing_watch_open_disagreements") == 1
    assert registry.get_sample_value("routing_watch_records_total") == 20
    assert registry.get_sample_value("routing_watch_expiries_total", {"ns": "ns-0"}) == 1
    assert registry.get_sample_value("routing_watch_batch_seconds") == 0.25
    _batch(tmp_path, log, 2, [expired], live=1, open_topics=0)
    assert relay.poll() == 1
    assert registry.get_sample_value("routing_watch_expiries_total", {"ns": "ns-0"}) == 2
    assert registry.get_sample_value("routing_watch_live_brokers", {"ns": "ns-0"}) == 1
    assert json.loads((ck / "incidents-relayed.json").read_text()) == {
        "offset": written.stat().st_size, "batch": 2}
