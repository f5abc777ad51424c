"""``serve``/``run_server``: assemble a name server process around `NameServerHost`.

The manager (with the processor as its listener, so removal notices are sent), the KV
store (``kv_config``), the settings (``settings``, e.g. from ``--config``), the optional
journal, metrics endpoint and event loop, signal handling and the graceful stop.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol

from .._clock import SystemClock
from .._errors import RoutingError
from .._manager import RouteInfoManager
from .._messages import RouteChange, RoutingConfig
from ._admission import log_event as _log
from ._config import NamesrvConfig
from ._kv import KVStore
from ._processor import NameServerProcessor, RouteManager
from ._server import NameServerHost

__all__ = ["run_server", "serve"]


class _Settable(Protocol):
    def set(self) -> None: ...


def _open_journal(journal_dir: str | Path, manager: RouteInfoManager, nameserver_id: str,
                  snapshot_every_ms: int | None = None) -> tuple[RouteManager, IO[str], Path]:
    """Wrap ``manager`` in ``routing.journal.JournalRecorder`` writing a new JSON Lines file
    ``<journal_dir>/<nameserver_id>-<start ms>.jsonl`` (line-buffered: every record is on
    disk once its call returns)."""
    try:
        module: Any = importlib.import_module("routing.journal")
    except ImportError:
        module = None
    recorder_class = getattr(module, "JournalRecorder", None)
    if recorder_class is None:
        # TODO(journal): routing.journal does not export JournalRecorder in this build.
        raise RoutingError(f"--journal {journal_dir}: routing.journal.JournalRecorder is not "
                           "available in this build")
    directory = Path(journal_dir)
    directory.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in nameserver_id)
    path = directory / f"{safe}-{manager.clock.now_ms()}.jsonl"
    sink = open(path, "x", encoding="utf-8", newline="\n", buffering=1)  # noqa: SIM115
    try:
        more = {} if snapshot_every_ms is None else {"snapshot_every_ms": snapshot_every_ms}
        recorder: RouteManager = recorder_class(manager, sink, nameserver_id=nameserver_id,
                                                **more)
    except BaseException:
        sink.close()
        raise
    return recorder, sink, path


async def serve(host: str = "127.0.0.1", port: int = 9876, *,
                manager: RouteInfoManager | None = None, config: RoutingConfig | None = None,
                scan_interval_ms: int | None = None, journal_dir: str | Path | None = None,
                journal_snapshot_every_ms: int | None = None,
                ready_event: _Settable | None = None,
                stop_event: asyncio.Event | None = None,
                install_signal_handlers: bool = True,
                nameserver_id: str | None = None,
                on_listening: Callable[[tuple[str, int]], object] | None = None,
                settings: NamesrvConfig | None = None,
                kv_config: str | Path | None = None,
                metrics: tuple[str, int] | None = None,
                ) -> tuple[str, int]:
    """Run a name server until SIGINT/SIGTERM (or ``stop_event``), then shut down cleanly.

    ``manager`` defaults to a new `RouteInfoManager` on a `SystemClock` with ``config``
    (default `RoutingConfig()`; its ``wait_for_service_ms`` is the readiness wait), or
    ``settings.routing`` when ``settings`` (every setting by its Java name, e.g. from
    `load_properties_file`) is given. ``scan_interval_ms`` defaults to
    ``config.scan_interval_ms`` (5 000 ms, Java). ``kv_config`` is the KV file, loaded at
    start and written on every change (`KVStore.open`); default in memory.
    ``ready_event`` (an asyncio or threading Event) is set once listening, and
    ``on_listening`` called with the bound ``(host, port)`` (useful with port 0). With
    ``journal_dir``, every write call is journaled (``routing.journal``) under
    ``nameserver_id`` (default ``host:port``), with a snapshot of the tables every
    ``journal_snapshot_every_ms`` of journal time when given. ``metrics=(host, port)``
    serves Prometheus text at ``/metrics`` there (the ``metrics`` extra). Returns the
    address it listened on.
    """
    if settings is not None:
        if config is not None and config != settings.routing:
            raise ValueError("pass either settings or config, not both")
        config = settings.routing
    processor: NameServerProcessor | None = None

    def forward(event: RouteChange) -> None:
        if processor is not None:
            processor.on_route_change(event)

    if manager is None:
        manager = RouteInfoManager(clock=SystemClock(), config=config or RoutingConfig(),
                                   listener=forward)
    elif config is not None and config != manager.config:
        raise ValueError("pass either manager or config, not a config that differs from "
                         "manager.config")
    kv = KVStore.open(kv_config) if kv_config is not None else KVStore()
    if kv_config is not None:
        _log(logging.INFO, "kv_config_loaded", path=kv_config,
             namespaces=len(kv.snapshot()))
    interval = scan_interval_ms if scan_interval_ms is not None else manager.config.scan_interval_ms
    routes: RouteManager = manager
    journal: IO[str] | None = None
    if journal_dir is not None:
        routes, journal, path = _open_journal(journal_dir, manager,
                                              nameserver_id or f"{host}:{port}",
                                              journal_snapshot_every_ms)
        _log(logging.INFO, "journal_opened", path=path)
    processor = NameServerProcessor(routes, kv=kv, settings=settings, renew_unchanged=True)
    current = processor.settings
    idle_s = int(current.get("serverChannelMaxIdleTimeSeconds") or 120)
    host_ = NameServerHost(
        processor, host=host, port=port, scan_interval_ms=interval,
        idle_timeout_ms=idle_s * 1000 if idle_s > 0 else None,
        client_queue_capacity=int(current.get("clientRequestThreadPoolQueueCapacity") or 50_000),
        default_queue_capacity=int(current.get("defaultThreadPoolQueueCapacity") or 10_000))
    stop = stop_event or asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    if install_signal_handlers:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
    metrics_server: Any = None
    try:
        address = await host_.start()
        if metrics is not None:
            from ._metrics import start_metrics
            _, metrics_server = start_metrics(host_, *metrics)
            _log(logging.INFO, "metrics_listening", host=metrics[0],
                 port=metrics_server.server_port)
        if on_listening is not None:
            on_listening(address)
        if ready_event is not None:
            ready_event.set()
        await stop.wait()
        _log(logging.INFO, "shutting_down", host=address[0], port=address[1])
    finally:
        await host_.close()
        if metrics_server is not None:
            metrics_server.shutdown()
            metrics_server.server_close()
        for sig in installed:
            loop.remove_signal_handler(sig)
        if journal is not None:
            journal.close()
        if kv.path is not None:
            kv.flush()
            _log(logging.INFO, "kv_config_written", path=kv.path, writes=kv.writes)
    return address


def run_server(host: str = "127.0.0.1", port: int = 9876, *, loop: str = "asyncio",
               **kwargs: Any) -> int:
    """Blocking `serve` for the CLI: returns 0 after a graceful shutdown.

    ``loop`` is ``asyncio`` (the standard loop, the default) or ``uvloop`` (the ``uvloop``
    extra; see docs/performance.md for when it pays)."""
    if loop == "asyncio":
        asyncio.run(serve(host, port, **kwargs))
        return 0
    if loop != "uvloop":
        raise ValueError(f"loop must be 'asyncio' or 'uvloop', got {loop!r}")
    try:
        uvloop: Any = importlib.import_module("uvloop")
    except ImportError:
        raise RoutingError("--loop uvloop needs uvloop: pip install "
                           "'rocketmq-routing[uvloop]'") from None
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve(host, port, **kwargs))
    return 0
