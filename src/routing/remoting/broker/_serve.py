"""``routing broker``'s process: the admin line protocol and the run loop around `BrokerHost`.

The admin input is a line protocol on a stream (stdin for the command): one command per
line, one JSON answer per line on the output stream.

========================================  ====================================================
``create TOPIC [QUEUES [PERM]]``          create or update a topic (QUEUES read and write
                                          queues, default 16; PERM default 6 = read+write);
                                          sent at once as Java does (`update_topics`)
``delete TOPIC``                          delete a topic locally (Java sends nothing; the next
                                          full registration carries the smaller table)
``register``                              a forced full registration now (`register_now`)
``perm N``                                set the broker permission (a forced registration)
``status``                                the broker's state as JSON
========================================  ====================================================

Blank lines and lines starting with ``#`` are ignored. An answer is
``{"ok": true, "command": ...}`` or ``{"ok": false, "error": ...}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from ..._errors import RoutingError
from ..._values import TopicConfig
from ...heartbeat import Action, BrokerConfig, BrokerHeartbeat
from ._host import BrokerHost

__all__ = ["admin_command", "run_broker", "serve_broker"]


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise RoutingError(f"{what} must be an integer, got {text!r}") from None


def admin_command(hb: BrokerHeartbeat, line: str) -> tuple[tuple[Action, ...], dict[str, Any]
                                                           ] | None:
    """Apply one admin line to ``hb``: the actions to perform and the JSON answer, or None
    for a blank or comment line. Bad input raises `RoutingError` (or `InvalidRequest`, a
    subclass) and changes nothing."""
    words = line.split()
    if not words or words[0].startswith("#"):
        return None
    verb, args = words[0].lower(), words[1:]
    if verb == "create" and 1 <= len(args) <= 3:
        queues = _int(args[1], "QUEUES") if len(args) > 1 else 16
        perm = _int(args[2], "PERM") if len(args) > 2 else 6
        topic = TopicConfig(topic_name=args[0], read_queue_nums=queues,
                            write_queue_nums=queues, perm=perm)
        return hb.update_topics([topic]), {"ok": True, "command": "create", "topic": args[0],
                                           "data_version": hb.data_version.to_json()}
    if verb == "delete" and len(args) == 1:
        return hb.delete_topics(args), {"ok": True, "command": "delete", "topic": args[0],
                                        "data_version": hb.data_version.to_json()}
    if verb == "register" and not args:
        return hb.register_now(force=True), {"ok": True, "command": "register"}
    if verb == "perm" and len(args) == 1:
        return (hb.set_broker_permission(_int(args[0], "PERM")),
                {"ok": True, "command": "perm", "perm": int(hb.broker_permission)})
    if verb == "status" and not args:
        return (), {"ok": True, "command": "status", **status(hb)}
    raise RoutingError(f"unknown admin command {line.strip()!r}: expected create TOPIC "
                       "[QUEUES [PERM]], delete TOPIC, register, perm N or status")


def status(hb: BrokerHeartbeat) -> dict[str, Any]:
    return {"broker": hb.config.broker_name, "id": hb.config.broker_id,
            "topics": sorted(hb.topics), "data_version": hb.data_version.to_json(),
            "available_name_servers": list(hb.available_name_servers),
            "master_addr": hb.master_addr, "min_broker_id": hb.min_broker_id,
            "acting_as_master": hb.acting_as_master, "registering": hb.registering}


async def serve_broker(config: BrokerConfig, topics: Sequence[TopicConfig], *,
                       listen: tuple[str, int] | None = None, journal_dir: str | Path | None = None,
                       compressed_register: bool = False,
                       admin: asyncio.StreamReader | None = None, out: IO[str] | None = None,
                       stop_event: asyncio.Event | None = None,
                       install_signal_handlers: bool = True) -> None:
    """Run a broker until SIGTERM/SIGINT (or ``stop_event``), then unregister and return.

    ``admin`` lines are applied as they come (module docstring); answers go to ``out``.
    A ``{"event": "started", ...}`` line is written to ``out`` once the first registration
    is under way, and ``{"event": "stopped"}`` after the unregisters. Cost: `BrokerHost`'s
    (one registration body per period and name server, O(topics)) plus O(line) per
    admin line.
    """
    hb = BrokerHeartbeat(config, topics=topics)
    journal: IO[str] | None = None
    if journal_dir is not None:
        directory = Path(journal_dir)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{config.broker_name}-{config.broker_id}-{hb.clock.now_ms()}.jsonl"
        journal = open(path, "x", encoding="utf-8", buffering=1)  # noqa: SIM115
    stop = stop_event or asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    if install_signal_handlers:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)

    def say(doc: dict[str, Any]) -> None:
        if out is not None:
            out.write(json.dumps(doc, separators=(",", ":")) + "\n")
            out.flush()

    host = BrokerHost(hb, listen=listen, compressed_register=compressed_register,
                      journal=journal)
    reader_task: asyncio.Task[None] | None = None
    try:
        await host.start()
        say({"event": "started", **status(hb)})
        if admin is not None:
            reader_task = asyncio.create_task(_admin_loop(hb, host, admin, say))
        await stop.wait()
    finally:
        if reader_task is not None:
            reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader_task
        await host.shutdown()
        say({"event": "stopped"})
        for sig in installed:
            loop.remove_signal_handler(sig)
        if journal is not None:
            journal.close()


async def _admin_loop(hb: BrokerHeartbeat, host: BrokerHost, admin: asyncio.StreamReader,
                      say: Any) -> None:
    while line := await admin.readline():
        text = line.decode("utf-8", "replace")
        try:
            done = admin_command(hb, text)
        except RoutingError as exc:
            say({"ok": False, "error": str(exc)})
            continue
        if done is not None:
            actions, answer = done
            host.perform(actions)
            say(answer)


async def _stdin_reader() -> asyncio.StreamReader | None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except (OSError, ValueError):
        return None  # e.g. stdin is a regular file or closed: no admin input
    return reader


def run_broker(config: BrokerConfig, topics: Sequence[TopicConfig], **kwargs: Any) -> int:
    """Blocking `serve_broker` with stdin as the admin input and stdout as its output.
    Runs until SIGINT/SIGTERM; costs what `BrokerHost` costs. Returns 0."""

    async def main() -> None:
        await serve_broker(config, topics, admin=await _stdin_reader(), out=sys.stdout,
                           **kwargs)

    asyncio.run(main())
    return 0
