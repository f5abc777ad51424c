"""Prometheus metrics of ``routing serve --metrics HOST:PORT`` (the ``metrics`` extra).

Imported only when metrics are asked for: prometheus-client is optional. Per request the
host pays one counter increment and one histogram observation; everything else (live
brokers, connections, queue lengths, KV writes) is read from the host when scraped.
"""

from __future__ import annotations

import http.server
import importlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sized
from typing import Any, Protocol

from ..._errors import RoutingError

__all__ = ["HostMetrics", "MeteredHost", "start_metrics"]


class _Queue(Sized, Protocol):
    @property
    def rejected(self) -> int: ...


class _KV(Protocol):
    @property
    def writes(self) -> int: ...


class _Processor(Protocol):
    @property
    def manager(self) -> object: ...
    @property
    def kv(self) -> _KV: ...


class MeteredHost(Protocol):
    """What the metrics read of a host at scrape time (`NameServerHost` has it): its
    processor (live brokers, KV writes), its open channels and its queues by class; and
    where they are attached (``metrics``)."""

    metrics: HostMetrics | None

    @property
    def processor(self) -> _Processor: ...
    @property
    def channels(self) -> tuple[object, ...]: ...
    @property
    def queues(self) -> Mapping[str, _Queue]: ...

#: Latency buckets in seconds: 50 µs to 2.5 s.
_BUCKETS = (5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
            1.0, 2.5)


def _prometheus() -> Any:
    try:
        return importlib.import_module("prometheus_client")
    except ImportError:
        raise RoutingError("--metrics needs prometheus-client: pip install "
                           "'rocketmq-routing[metrics]'") from None


class HostMetrics:
    """The host's counters in their own registry (several hosts per process are fine).
    Per request `observe` costs one dictionary lookup, one counter increment and one
    histogram observation; the gauges cost nothing until scraped."""

    def __init__(self, host: MeteredHost) -> None:
        prom = _prometheus()
        self.registry = prom.CollectorRegistry()
        self.requests = prom.Counter(
            "routing_requests", "Requests answered, by request code and response code",
            ["code", "response"], registry=self.registry)
        self.latency = prom.Histogram(
            "routing_request_seconds", "Time from read to answer, by request code", ["code"],
            buckets=_BUCKETS, registry=self.registry)
        self.removed = prom.Counter(
            "routing_brokers_removed", "Brokers removed, by reason (expired, channel_closed, "
            "unregistered)", ["reason"], registry=self.registry)
        self.registry.register(_HostCollector(host, prom))
        self._observers: dict[tuple[int, int], Callable[[float], None]] = {}

    def observe(self, code: int, response: int | None, seconds: float) -> None:
        key = (code, -1 if response is None else response)
        observer = self._observers.get(key)
        if observer is None:
            counter = self.requests.labels(code=str(code), response=str(key[1]))
            histogram = self.latency.labels(code=str(code))

            def observer(s: float, _c: Any = counter, _h: Any = histogram) -> None:
                _c.inc()
                _h.observe(s)

            self._observers[key] = observer
        observer(seconds)

    def broker_removed(self, reason: str, count: int = 1) -> None:
        self.removed.labels(reason=reason).inc(count)


class _HostCollector:
    """Gauges read from the host at scrape time."""

    def __init__(self, host: MeteredHost, prom: Any) -> None:
        self.host, self.prom = host, prom

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        families = importlib.import_module("prometheus_client.core")
        gauge, counter = families.GaugeMetricFamily, families.CounterMetricFamily
        host = self.host
        live = getattr(host.processor.manager, "live_brokers", None)
        if live is not None:
            yield gauge("routing_live_brokers", "Brokers with a live entry", value=len(live()))
        yield gauge("routing_connections", "Open connections", value=len(host.channels))
        queued = gauge("routing_queue_length", "Requests waiting, by class", labels=["class"])
        busy = counter("routing_system_busy", "Requests answered SYSTEM_BUSY, by class",
                       labels=["class"])
        for name, queue in host.queues.items():
            queued.add_metric([name], len(queue))
            busy.add_metric([name], queue.rejected)
        yield queued
        yield busy
        yield counter("routing_kv_writes", "KV file writes (each may carry several changes)",
                      value=host.processor.kv.writes)


def start_metrics(host: MeteredHost, address: str, port: int) -> tuple[HostMetrics, Any]:
    """Attach metrics to ``host`` and serve them at ``http://address:port/metrics`` from a
    daemon thread; returns the metrics and the HTTP server (``shutdown()`` and
    ``server_close()`` it; ``server_port`` is the bound port). A scrape costs O(queues)
    plus the manager's ``live_brokers`` (O(brokers))."""
    prom = _prometheus()
    metrics = HostMetrics(host)
    registry = metrics.registry

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404)
                return
            body = prom.generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Type", prom.CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = http.server.ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="routing-metrics", daemon=True).start()
    host.metrics = metrics
    return metrics, server
