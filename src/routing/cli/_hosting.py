"""What ``routing serve`` and ``routing broker`` share as long-running hosts: logs to stderr
(text, or one JSON object per line with ``--log-json``) and ``HOST:PORT`` options."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import click

__all__ = ["JsonFormatter", "configure_logging", "split_listen"]

_STANDARD_FIELDS = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts_ms``, ``level``, ``logger``, the structured fields
    (``event`` and its extras) or else the message, and the exception if any."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {"ts_ms": int(record.created * 1000), "level": record.levelname,
                               "logger": record.name}
        extra = {k: v for k, v in vars(record).items() if k not in _STANDARD_FIELDS}
        if "event" not in extra:
            doc["message"] = record.getMessage()
        doc.update(extra)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str, separators=(",", ":"))


def configure_logging(level: str, *, as_json: bool) -> logging.Logger:
    """Send the ``routing`` loggers to stderr only, at ``level``; return the root one."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if as_json else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s"))
    logger = logging.getLogger("routing")
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False
    return logger


def split_listen(value: str, option: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 hosts in brackets) as ``(host, port)``; otherwise a click error
    naming ``option`` and the valid ports."""
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65_535:
        raise click.BadParameter(f"expected HOST:PORT with a port from 0 to 65535, got "
                                 f"{value!r}", param_hint=option)
    return host.strip("[]"), int(port)
