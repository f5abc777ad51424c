"""``serve``/``run_server``: assemble a name server process around `NameServerHost`.

The manager (with the processor as its listener, so removal notices are sent), the KV
store (``kv_config``), the settings (``settings``, e.g. from ``--config``), the optional
journal, metrics endpoint and event loop, signal handling and the graceful stop.
"""

from __future__ import annotations

import asyncio
import glob
import importlib.util
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..._clock import SystemClock
from ..._errors import InvalidRequest, RoutingError
from ..._manager import RouteInfoManager
from ..._messages import RouteChange, RoutingConfig
from ..processor._kv import KVStore
from ..processor._namesrv_config import NamesrvConfig
from ..processor._processor import NameServerProcessor
from ..processor._request import RouteManager
from ._host import NameServerHost
from ._logs import log_event as _log
from ._shadow import ShadowProcessor

__all__ = ["ListenError", "run_server", "serve"]


class ListenError(RoutingError, OSError):
    """The server could not listen on its address (in use, not this machine's, no
    permission): it never started. Names the address and the reason."""


class _Settable(Protocol):
    def set(self) -> None: ...


def _open_journal(journal_dir: str | Path, manager: RouteInfoManager, nameserver_id: str,
                  snapshot_every_ms: int | None = None, *,
                  rotate_every_ms: int | None = 10_000,
                  rotate_bytes: int | None = 64 * 1024 * 1024,
                  ) -> tuple[RouteManager, Any, Path]:
    """Wrap ``manager`` in ``routing.journal.JournalRecorder`` writing rotating files
    ``<journal_dir>/<nameserver_id>.<first seq>.jsonl`` (`routing.journal.RotatingJournal`:
    each written under a hidden name, line-buffered, so every record is on disk once its call
    returns, then fsynced and renamed into place every ``rotate_every_ms`` of the manager's
    clock or ``rotate_bytes``; 0 or None: never on that count). Files a killed run left
    under their hidden names are renamed into place first. When an earlier run of
    ``nameserver_id`` left files there (rotated, or ``<id>-<start ms>.jsonl`` of earlier
    versions), its last sequence number is read from the end of the newest one, and the new
    header continues from it: a restart (docs/journal.md); when the newest file holds no
    whole line (a kill cut its first one short), from that file's first seq, which its
    name holds (that line is rejected and its seq is a gap). Returns the recorder, the sink
    and the folder."""
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
    module.finish_open_files(directory, nameserver_id)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in nameserver_id)
    # An earlier run's file: go on with its numbers (the header is a restart).
    older = sorted(directory.glob(f"{glob.escape(safe)}-*.jsonl"), key=_started, reverse=True)
    rotated = module.rotated_files(directory, nameserver_id)
    after = module.last_seq_of_files(rotated[::-1] + older, nameserver_id)
    if rotated:  # a kill that cut a file's first line short left its seq used (its name)
        first = module.parse_journal_file_name(rotated[-1].name)[1]
        after = first if after is None else max(after, first)
    sink = module.RotatingJournal(directory, nameserver_id, clock=manager.clock,
                                  rotate_every_ms=rotate_every_ms, rotate_bytes=rotate_bytes,
                                  fsync=True, line_buffered=True)
    try:
        more = {} if snapshot_every_ms is None else {"snapshot_every_ms": snapshot_every_ms}
        recorder: RouteManager = recorder_class(manager, sink, nameserver_id=nameserver_id,
                                                after_seq=after, **more)
    except BaseException:
        sink.close()
        raise
    return recorder, sink, directory


def _started(path: Path) -> tuple[int, str]:
    """The start time (ms) in a journal file name ``<id>-<ms>.jsonl`` (-1: none), then
    the name: newest last."""
    stamp = path.name[:-len(".jsonl")].rpartition("-")[2]
    return (int(stamp) if stamp.isdigit() else -1, path.name)


def _served(address: tuple[str, int], settings: NamesrvConfig) -> list[tuple[str, str]]:
    """What GET_NAMESRV_CONFIG must report of the process, as Java's does: the address and
    port actually bound (``bindAddress``, ``listenPort``; a file's values or port 0 are not
    what is served) and ``rocketmqHome`` from ``$ROCKETMQ_HOME`` when no file set it
    (Java's ``NamesrvConfig`` default; a setting with no value is left out, as Java's is)."""
    pairs = [("bindAddress", address[0]), ("listenPort", str(address[1]))]
    home = os.environ.get("ROCKETMQ_HOME")
    if home and settings.get("rocketmqHome") is None:
        pairs.append(("rocketmqHome", home))
    return pairs


async def serve(host: str = "127.0.0.1", port: int = 9876, *,
                manager: RouteInfoManager | None = None, config: RoutingConfig | None = None,
                scan_interval_ms: int | None = None, journal_dir: str | Path | None = None,
                journal_snapshot_every_ms: int | None = None,
                journal_rotate_every_ms: int | None = 10_000,
                journal_rotate_bytes: int | None = 64 * 1024 * 1024,
                ready_event: _Settable | None = None,
                stop_event: asyncio.Event | None = None,
                install_signal_handlers: bool = True,
                nameserver_id: str | None = None,
                on_listening: Callable[[tuple[str, int]], object] | None = None,
                settings: NamesrvConfig | None = None,
                kv_config: str | Path | None = None,
                metrics: tuple[str, int] | None = None,
                shadow: bool = False,
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
    ``journal_snapshot_every_ms`` of journal time when given, into files rotated every
    ``journal_rotate_every_ms`` (ms) or ``journal_rotate_bytes`` (docs/journal.md,
    "Rotation"). ``metrics=(host, port)``
    serves Prometheus text at ``/metrics`` there (the ``metrics`` extra). ``shadow``
    refuses clients' route reads and answers brokers
    (`routing.remoting.nameserver._shadow`: beside a Java fleet, for its journal). Returns
    the address it listened on.
    Cost: `NameServerHost`'s per request; the KV file, when given, is written on every
    change (O(table size)); a journal snapshot O(state) every period.
    """
    if settings is not None:
        if config is not None and config != settings.routing:
            raise InvalidRequest("pass either settings or config, not both", field="config")
        config = settings.routing
    processor: NameServerProcessor | None = None

    def forward(event: RouteChange) -> None:
        if processor is not None:
            processor.on_route_change(event)

    if manager is None:
        manager = RouteInfoManager(clock=SystemClock(), config=config or RoutingConfig(),
                                   listener=forward)
    elif config is not None and config != manager.config:
        raise InvalidRequest("pass either manager or config, not a config that differs from "
                             "manager.config", field="config")
    kv = KVStore.open(kv_config) if kv_config is not None else KVStore()
    if kv_config is not None:
        _log(logging.INFO, "kv_config_loaded", path=kv_config,
             namespaces=len(kv.snapshot()))
    interval = scan_interval_ms if scan_interval_ms is not None else manager.config.scan_interval_ms
    routes: RouteManager = manager
    journal: Any = None
    if journal_dir is not None:
        routes, journal, _ = _open_journal(journal_dir, manager,
                                              nameserver_id or f"{host}:{port}",
                                              journal_snapshot_every_ms,
                                              rotate_every_ms=journal_rotate_every_ms,
                                              rotate_bytes=journal_rotate_bytes)
        _log(logging.INFO, "journal_opened", path=journal.current_path)
    if shadow:
        _log(logging.INFO, "shadow_mode", refused="GET_ROUTEINFO_BY_TOPIC")
    kind = ShadowProcessor if shadow else NameServerProcessor
    processor = kind(routes, kv=kv, settings=settings, renew_unchanged=True)
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
    started = False
    try:
        try:
            address = await host_.start()
        except OSError as exc:  # it never listened: no "stopped" for it
            why = os.strerror(exc.errno).lower() if exc.errno else str(exc)
            _log(logging.ERROR, "listen_failed", host=host, port=port, error=why)
            if journal is not None:  # its header only: no run to journal
                journal.close()
                if journal.last_closed is not None:
                    journal.last_closed.unlink(missing_ok=True)
                journal = None
            failed = ListenError(f"cannot listen on {host}:{port}: {why}")
            failed.errno = exc.errno
            raise failed from None
        started = True
        processor.update_config(_served(address, processor.settings))
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
        if started:
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


def resolve_loop(loop: str) -> str:
    """The event loop ``loop`` names: ``auto`` is ``uvloop`` when it can be imported (the
    ``uvloop`` extra), else ``asyncio``; ``asyncio`` and ``uvloop`` are themselves. Raises
    `InvalidRequest` for any other name. O(1) (a module lookup, no import)."""
    if loop == "auto":
        return "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"
    if loop not in ("asyncio", "uvloop"):
        raise InvalidRequest(f"loop must be 'auto', 'asyncio' or 'uvloop', got {loop!r}",
                             field="loop", value=loop)
    return loop


def run_server(host: str = "127.0.0.1", port: int = 9876, *, loop: str = "asyncio",
               **kwargs: Any) -> int:
    """Blocking `serve` for the CLI: returns 0 after a graceful shutdown.

    ``loop`` is ``asyncio`` (the standard loop, the default here), ``uvloop`` (the
    ``uvloop`` extra) or ``auto`` (uvloop when importable, else asyncio: ``routing
    serve``'s default; docs/performance.md, "Beside Java's name server"). Cost: `serve`'s."""
    loop = resolve_loop(loop)
    if loop == "asyncio":
        asyncio.run(serve(host, port, **kwargs))
        return 0
    try:
        uvloop: Any = importlib.import_module("uvloop")
    except ImportError:
        raise RoutingError("--loop uvloop needs uvloop: pip install "
                           "'rocketmq-routing[uvloop]'") from None
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve(host, port, **kwargs))
    return 0
