"""``routing watch --metrics HOST:PORT``: the watcher's Prometheus metrics.

prometheus_client (the ``metrics`` extra, ``>=0.17`` as for ``routing serve``; the watcher
uses only its metric types and ``make_wsgi_app``, served by the standard library's
``wsgiref`` on a daemon thread that `LiveMetrics.close` shuts down) is imported only when
metrics are asked for. The metrics live in their own
``CollectorRegistry`` (never the process-wide default), updated by the sink once a
micro-batch (``_live_spark.LiveSink``):

* ``routing_watch_live_brokers{ns}`` — live broker entries on each name server;
* ``routing_watch_open_disagreements`` — topics answered differently now;
* ``routing_watch_expiries_total{ns}`` and ``routing_watch_expiry_delay_seconds`` (a
  histogram of each expiry's detection delay: last heartbeat to the scan that removed it);
* ``routing_watch_incidents_total{event}``;
* ``routing_watch_records_total`` and ``routing_watch_records_per_second`` (accepted
  records, over the last micro-batch's wall time);
* ``routing_watch_lag_seconds`` — wall time now less the newest record time read (for
  journals written in real time; a replayed old journal shows its age);
* ``routing_watch_batch_seconds`` — the sink's time for the last micro-batch;
* ``routing_watch_held_files{ns}`` — rotated files held for an earlier one still missing
  (``_live_order.py``), and ``routing_watch_released_files_total{ns}``, those given up on
  (replayed with the gap accepted after ``--reorder-wait``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import InvalidRequest
from ._schema import Row

__all__ = ["LiveMetrics", "parse_host_port"]

#: Detection-delay buckets (s): around the 120 s heartbeat timeout plus a 5 s scan.
_DELAY_BUCKETS = (1, 5, 10, 30, 60, 90, 120, 125, 130, 150, 180, 300, 600)


def parse_host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (HOST may be empty: every interface) as (host, port); raises
    `routing.InvalidRequest` naming ``metrics`` otherwise. O(len)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65_535:
        raise InvalidRequest(f"metrics must be HOST:PORT, got {text!r}", field="metrics",
                             value=text)
    return host or "0.0.0.0", int(port)


class LiveMetrics:
    """The watcher's metrics (see the module docstring); `serve` exposes them over HTTP.
    Cost: O(name servers + incidents) a micro-batch in `batch`; a scrape renders every
    series (O(name servers + incident kinds))."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.live = Gauge("routing_watch_live_brokers", "Live broker entries", ["ns"],
                          registry=r)
        self.disagreeing = Gauge("routing_watch_open_disagreements",
                                 "Topics answered differently now", registry=r)
        self.expiries = Counter("routing_watch_expiries", "Brokers expired", ["ns"],
                                registry=r)
        self.delay = Histogram("routing_watch_expiry_delay_seconds",
                               "Last heartbeat to expiry (s)", buckets=_DELAY_BUCKETS,
                               registry=r)
        self.incidents = Counter("routing_watch_incidents", "Incidents delivered",
                                 ["event"], registry=r)
        self.records = Counter("routing_watch_records", "Accepted records", registry=r)
        self.rate = Gauge("routing_watch_records_per_second",
                          "Accepted records a second over the last micro-batch", registry=r)
        self.lag = Gauge("routing_watch_lag_seconds",
                         "Wall time less the newest record time read (s)", registry=r)
        self.seconds = Gauge("routing_watch_batch_seconds",
                             "The sink's time for the last micro-batch (s)", registry=r)
        self.held = Gauge("routing_watch_held_files",
                          "Files held for an earlier one still missing", ["ns"], registry=r)
        self.released = Counter("routing_watch_released_files",
                                "Held files replayed with the gap accepted", ["ns"],
                                registry=r)
        self._records: dict[str, int] = {}
        self._released: dict[str, int] = {}
        self._newest = 0
        self._last = time.monotonic()
        self.server: Any = None

    def serve(self, host: str, port: int) -> int:
        """Expose the metrics on ``host:port`` (0: any free port); returns the port."""
        import threading
        from wsgiref.simple_server import WSGIRequestHandler, make_server

        from prometheus_client import make_wsgi_app

        class Quiet(WSGIRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                """No access log on stderr."""

        self.server = make_server(host, port, make_wsgi_app(self.registry),
                                  handler_class=Quiet)
        threading.Thread(target=self.server.serve_forever, name="routing-watch-metrics",
                         daemon=True).start()
        return int(self.server.server_port)

    def close(self) -> None:
        """Stop the HTTP server, if any."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def _files(self, ns: str, status: Row) -> None:
        """The held and released files of name server ``ns``'s status."""
        if not ns or "held_files" not in status:
            return
        self.held.labels(ns=ns).set(status["held_files"])
        released = status["released_files"]
        self.released.labels(ns=ns).inc(max(0, released - self._released.get(ns, 0)))
        self._released[ns] = released

    def batch(self, statuses: Mapping[str, Row], incidents: Sequence[Row], *,
              disagreeing: int, seconds: float) -> None:
        """One micro-batch's statuses and the incidents delivered. O(rows)."""
        added = 0
        for key, status in statuses.items():
            for ns, count in status["live_brokers"].items():
                self.live.labels(ns=ns).set(count)
            self._files(key, status)
            for row in status["name_servers"]:
                added += row["records"] - self._records.get(row["ns"], 0)
                self._records[row["ns"]] = row["records"]
                self._newest = max(self._newest, row["last_ms"])
        now = time.monotonic()
        self.records.inc(max(0, added))
        self.rate.set(max(0, added) / max(now - self._last, 1e-3))
        self._last = now
        if self._newest:
            self.lag.set(max(0.0, time.time() - self._newest / 1000))
        for incident in incidents:
            self.incidents.labels(event=incident["event"]).inc()
            if incident["event"] == "broker_expired":
                self.expiries.labels(ns=incident["ns"]).inc()
                self.delay.observe(incident["detection_delay_ms"] / 1000)
        self.disagreeing.set(disagreeing)
        self.seconds.set(seconds)
