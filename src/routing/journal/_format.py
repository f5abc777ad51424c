"""The journal format, version 1: record values, the header, and file helpers.

A journal is JSON Lines (UTF-8, one compact JSON object per line, ``\\n``-terminated),
optionally gzip-compressed. The first line of each name server's journal is a header; every
other line records one completed write call on that name server's `RouteInfoManager`.
``docs/journal.md`` is the reference, with an example of each record kind.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Mapping
from typing import IO, Any, Protocol, TypeAlias, cast

import attrs

from .._calls import Call
from .._errors import InvalidRequest
from .._messages import RoutingConfig
from .._validate import check_int, check_name, fail
from ._snapshot import JournalSnapshot

__all__ = [
    "JOURNAL_FORMAT",
    "JOURNAL_VERSION",
    "JournalEntry",
    "JournalHeader",
    "JournalRecord",
    "JournalSink",
    "is_gzip",
    "SCHEMA_DDL",
    "config_from_json",
    "config_to_json",
    "dumps",
    "open_journal",
]

#: Value of the header's ``journal`` field.
JOURNAL_FORMAT = "routing"
#: The format version this module writes and reads.
JOURNAL_VERSION = 1

#: Top-level fields of a record line, in the order they are written.
RECORD_FIELDS = ("ns", "seq", "ts", "op", "cluster", "broker_name", "broker_addr", "args")
#: An explicit schema (Spark DDL) that loads both kinds of line: ``args`` and ``config`` are
#: read as their JSON text, header-only columns are null on records and vice versa.
SCHEMA_DDL = ("ns STRING, seq BIGINT, ts BIGINT, op STRING, cluster STRING, "
              "broker_name STRING, broker_addr STRING, args STRING, journal STRING, "
              "version INT, nameserver STRING, config STRING, start_ms BIGINT")

#: Top-level fields of a header line.
HEADER_FIELDS = ("journal", "version", "nameserver", "config", "start_ms", "ns", "seq", "ts",
                 "op")


class JournalSink(Protocol):
    """Where a recorder writes: anything with ``write(str)`` (a text file, ``io.StringIO``)."""

    def write(self, text: str, /) -> Any: ...


def dumps(doc: Any) -> str:
    """One journal line (without the newline): compact JSON, keys in insertion order, UTF-8
    kept as is. Deterministic: the same document always gives the same bytes. O(size)."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def config_to_json(config: RoutingConfig) -> dict[str, Any]:
    """Every `RoutingConfig` field under its Python name, in declaration order."""
    return attrs.asdict(config)


_CONFIG_FIELDS = frozenset(a.name for a in attrs.fields(RoutingConfig))


def config_from_json(doc: object) -> RoutingConfig:
    """The inverse of `config_to_json`. Missing fields take their defaults; an unknown
    field raises `InvalidRequest` (a newer writer: do not guess)."""
    if not isinstance(doc, Mapping):
        raise InvalidRequest(f"config must be an object, got {doc!r:.80}", field="config")
    unknown = sorted(set(doc) - _CONFIG_FIELDS)
    if unknown:
        raise InvalidRequest(f"config: unknown field(s) {', '.join(map(repr, unknown))}",
                             field="config")
    return RoutingConfig(**dict(doc))


@attrs.frozen(kw_only=True)
class JournalHeader:
    """The header line: which name server, with which `RoutingConfig`, starting when.

    The first line of a journal is a header with ``seq=0``. A later header for the same name
    server marks a restart (a fresh, empty manager created at ``start_ms``); it takes the next
    sequence number, and table ids stay valid across it.
    """

    nameserver_id: str = attrs.field(validator=lambda _i, _a, v: check_name("nameserver", v))
    seq: int = attrs.field(validator=lambda _i, _a, v: check_int("seq", v, low=0))
    start_ms: int = attrs.field(validator=lambda _i, _a, v: check_int("start_ms", v, low=0))
    config: RoutingConfig = attrs.field(factory=RoutingConfig)
    version: int = JOURNAL_VERSION

    op = "header"

    @property
    def at_ms(self) -> int:
        return self.start_ms

    def to_json(self) -> dict[str, Any]:
        return {"journal": JOURNAL_FORMAT, "version": self.version,
                "nameserver": self.nameserver_id, "config": config_to_json(self.config),
                "start_ms": self.start_ms, "ns": self.nameserver_id, "seq": self.seq,
                "ts": self.start_ms, "op": "header"}


@attrs.frozen(kw_only=True)
class JournalRecord:
    """One recorded call: name server, per-server sequence number, clock time (ms), the call.

    ``cluster``, ``broker_name`` and ``broker_addr`` are the top-level partition columns as
    written (None where the operation has none; for ``heartbeat`` and ``query_data_version``
    ``broker_name`` is the group of the address's last accepted registration on that name
    server, a hint for partitioning). Only the ``call`` is applied on replay.
    """

    nameserver_id: str
    seq: int
    at_ms: int
    call: Call
    cluster: str | None = None
    broker_name: str | None = None
    broker_addr: str | None = None

    @property
    def op(self) -> str:
        return self.call.op


#: Any line a reader accepts (snapshots: ``_snapshot.py``).
JournalEntry: TypeAlias = JournalHeader | JournalRecord | JournalSnapshot


def is_gzip(path: str | os.PathLike[str]) -> bool:
    """Whether the file at ``path`` starts with gzip's magic bytes (whatever its name): how
    every journal reader tells a compressed journal. O(1): two bytes read."""
    with open(path, "rb") as probe:
        return probe.read(2) == b"\x1f\x8b"


def open_journal_bytes(path: str | os.PathLike[str]) -> IO[bytes]:
    """Open a journal file for reading as bytes, decompressed when it starts with gzip's magic
    bytes (whatever its name). The readers split lines on ``\\n`` themselves."""
    name = os.fspath(path)
    if is_gzip(name):  # a GzipFile is a binary file; typeshed does not call it IO[bytes]
        return cast(IO[bytes], gzip.GzipFile(name, "rb"))
    return open(name, "rb")


def open_journal(path: str | os.PathLike[str], mode: str = "r") -> IO[str]:
    """Open a journal file as text, gzip-compressed when the name ends in ``.gz``.

    ``mode`` is ``"r"``, ``"w"`` or ``"a"``. Written gzip members carry no file name and
    mtime 0, so the same lines always give the same bytes. For reading, gzip is recognised
    by its magic bytes whatever the name.
    """
    if mode not in ("r", "w", "a"):
        fail("mode", mode, "'r', 'w' or 'a'")
    name = os.fspath(path)
    if mode == "r":
        # surrogateescape: a line with bytes that are not UTF-8 reaches the reader, which
        # rejects that line alone (instead of the whole file failing to decode).
        return io.TextIOWrapper(open_journal_bytes(name), encoding="utf-8", newline="\n",
                                errors="surrogateescape")
    if name.endswith(".gz"):
        raw = open(name, mode + "b")  # noqa: SIM115 - owned by the returned wrapper
        gz = gzip.GzipFile(filename="", mode=mode + "b", fileobj=raw, mtime=0)
        return _OwningText(gz, raw)
    return open(name, mode, encoding="utf-8", newline="\n")


class _OwningText(io.TextIOWrapper):
    """A text wrapper over a GzipFile that also closes the underlying file."""

    def __init__(self, gz: gzip.GzipFile, raw: IO[bytes]) -> None:
        super().__init__(gz, encoding="utf-8", newline="\n")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()
