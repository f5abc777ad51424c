"""Reading journals: every line validated, bad ones set aside with the reason, never dropped."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from .._calls import CALLS, Call, QueryDataVersion, Register, RegisterTopic, Scan, UnregisterMany
from .._errors import InvalidRequest, RoutingError
from .._messages import Registration
from .._validate import check_addr, check_int, check_name
from ._args import common_broker_name, common_value, decode_args, decode_channel
from ._format import (
    HEADER_FIELDS,
    JOURNAL_FORMAT,
    JOURNAL_VERSION,
    RECORD_FIELDS,
    JournalEntry,
    JournalHeader,
    JournalRecord,
    config_from_json,
    open_journal,
)
from ._ns_state import Known, NsState, after_snapshot, built_call, forget_table, open_epoch
from ._snapshot import JournalSnapshot, decode_snapshot

__all__ = [
    "MAX_TS_JUMP_MS",
    "JournalReadResult",
    "JournalReader",
    "RejectedLine",
    "SeqGap",
    "iter_journal",
    "read_journal",
    "read_journals",
]

Source = str | os.PathLike[str] | Iterable[str]


@attrs.frozen(kw_only=True)
class RejectedLine:
    """A line the reader set aside: where it was, why, and its text (without newline)."""

    source: str
    line_number: int
    reason: str
    text: str


@attrs.frozen(kw_only=True)
class SeqGap:
    """Accepted records of ``nameserver_id`` jump from ``after_seq`` to ``next_seq``: the lines
    in between are missing or were rejected, so a replay of that name server may diverge."""

    nameserver_id: str
    after_seq: int
    next_seq: int
    source: str
    line_number: int


@attrs.frozen(kw_only=True)
class JournalReadResult:
    """Everything a read produced: the accepted entries in file order, the rejected lines,
    and the sequence gaps."""

    records: tuple[JournalEntry, ...]
    rejected: tuple[RejectedLine, ...] = ()
    gaps: tuple[SeqGap, ...] = ()

    @property
    def ok(self) -> bool:
        """True when nothing was rejected and no sequence number is missing."""
        return not self.rejected and not self.gaps

    @property
    def nameservers(self) -> tuple[str, ...]:
        """The name servers with a header, in order of first appearance."""
        return tuple(dict.fromkeys(e.nameserver_id for e in self.records
                                   if isinstance(e, JournalHeader)))


class _Bad(RoutingError):
    """A line is rejected; the message is the reason."""


#: The start of a record as `JournalRecorder` writes it. A line ``prefix + rest`` whose
#: ``rest`` equals the rest of an accepted record of the same name server decodes to the
#: same call (see `JournalReader._known`); only the order checks are left to make.
_PREFIX = re.compile(r'\{"ns":"([^"\\]*)","seq":([1-9][0-9]{0,17}),"ts":(0|[1-9][0-9]{0,17}),')
#: The longest time (ms) between two accepted records of a name server without a header
#: in between. A record further ahead is set aside as a clock jump, so that one record with
#: a far-future time does not make every later good line "go backwards"; a second record
#: at or after the first one's time confirms the jump (a real silence costs one record).
MAX_TS_JUMP_MS = 24 * 3_600_000
#: Cached rests per name server at most (a journal of all-different lines gains nothing).
_KNOWN_MAX = 65_536
_CACHED_OPS = frozenset({"register", "heartbeat", "query_data_version", "scan"})


class JournalReader:
    """Validates journal lines one at a time, keeping per-name-server state across sources.

    Checks, for every line: valid UTF-8 JSON object; a header with ``journal="routing"`` and a
    supported ``version``, or a record whose name server has a header; known fields only; a
    sequence number greater than the last accepted one of that name server; a time not earlier
    than the last one; a known operation with well-formed args; for ``register``, a table that
    was defined (by an accepted line) and top-level columns equal to the registration's.
    Cost: O(line length), plus O(topics) for a line that defines a table. A record whose
    text after ``{"ns":…,"seq":…,"ts":…,`` equals an accepted one's of the same name server
    (a periodic registration, heartbeat or scan) skips the JSON parse: one regex match, one
    dict lookup and the order checks, the same verdict for a fraction of the cost.
    """

    def __init__(self, *, remember: bool = True) -> None:
        """``remember=False`` parses every line (the same verdicts, slower: for tests)."""
        self._ns: dict[str, NsState] = {}
        self.gaps: list[SeqGap] = []
        self._remember_rests = remember

    def feed(self, text: str, *, source: str, line_number: int) -> JournalEntry | RejectedLine:
        """Validate one line; return the decoded entry or the rejection."""
        line = text.rstrip("\r\n")
        try:
            if not line.isascii():  # ASCII is UTF-8: most lines skip the encode check
                try:
                    line.encode("utf-8")
                except UnicodeEncodeError:
                    line = line.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                    raise _Bad("not valid UTF-8") from None
            prefix = _PREFIX.match(line) if self._remember_rests else None
            if prefix is not None:  # (a line the prefix matches is not blank)
                state = self._ns.get(prefix.group(1))
                if state is not None:
                    known = state.known.get(line[prefix.end():])
                    if known is not None:
                        return self._fast(prefix, state, known, source, line_number)
            if not line.strip():
                raise _Bad("blank line")
            try:
                doc = json.loads(line)
            except (ValueError, RecursionError) as exc:
                raise _Bad(f"malformed JSON: {exc}") from None
            if not isinstance(doc, dict):
                raise _Bad(f"not a JSON object: {type(doc).__name__}")
            if "journal" in doc:
                return self._header(doc, source, line_number)
            if doc.get("op") == "snapshot":
                return self._snapshot(doc, source, line_number)
            record = self._record(doc, source, line_number)
            if prefix is not None and record.op in _CACHED_OPS:
                self._remember(prefix, line, record, doc)
            return record
        except _Bad as bad:
            return RejectedLine(source=source, line_number=line_number, reason=str(bad),
                                text=line)
        except (InvalidRequest, TypeError, ValueError, KeyError) as exc:
            return RejectedLine(source=source, line_number=line_number,
                                reason=f"invalid: {exc}", text=line)

    # ------------------------------------------------------------------ known rests

    def steady(self, text: str, ns: str | None = None
               ) -> tuple[str, int, int, Register | Scan, Known] | None:
        """Accept a remembered ``register`` or ``scan`` line that follows its name server's
        last accepted record (next sequence number, time not going back nor jumping) and
        return its name server, seq, time, call and decoding; any other line: None, nothing
        changed (`feed` it). The same verdict and state change as `feed`, without building
        the `JournalRecord` (`record_of` builds it when wanted). With ``ns``, only a line of
        that name server. O(1)."""
        if not self._remember_rests or not text.isascii():
            return None
        line = text.rstrip("\r\n")
        prefix = _PREFIX.match(line)
        if prefix is None:
            return None
        name, seq_text, ts_text = prefix.groups()
        state = self._ns.get(name)
        if state is None or (ns is not None and name != ns):
            return None
        known = state.known.get(line[prefix.end():])
        if known is None:
            return None
        call = known.call
        if call is not None and type(call) is not Scan:  # a register keeps no call
            return None
        seq, ts = int(seq_text), int(ts_text)
        last_ts = state.last_ts
        if seq != state.last_seq + 1 or not last_ts <= ts <= last_ts + MAX_TS_JUMP_MS:
            return None
        if call is None:
            call = built_call(state, known.table_id, state.tables[known.table_id],
                               known.channel)
        state.last_seq, state.last_ts, state.jump = seq, ts, None
        return name, seq + state.offset, ts, call, known

    @staticmethod
    def record_of(hit: tuple[str, int, int, Register | Scan, Known]) -> JournalRecord:
        """The `JournalRecord` of a line `steady` accepted."""
        ns, seq, ts, call, known = hit
        return JournalRecord(nameserver_id=ns, seq=seq, at_ms=ts, call=call,
                             cluster=known.cluster, broker_name=known.broker_name,
                             broker_addr=known.broker_addr)

    def remembered_name(self, text: str) -> str | None:
        """The name server of a line whose text after the ``ns``/``seq``/``ts`` prefix is a
        remembered rest of that name server (its key is then known without a parse), else
        None. O(1)."""
        if not self._remember_rests:
            return None
        line = text.rstrip("\r\n")
        prefix = _PREFIX.match(line)
        if prefix is None:
            return None
        state = self._ns.get(prefix.group(1))
        if state is None or line[prefix.end():] not in state.known:
            return None
        return prefix.group(1)

    def _fast(self, prefix: re.Match[str], state: NsState, known: Known, source: str,
              line_number: int) -> JournalRecord:
        ns, seq_text, ts_text = prefix.groups()
        seq, ts = int(seq_text), int(ts_text)
        last_ts = state.last_ts
        if not (seq > state.last_seq and last_ts <= ts <= last_ts + MAX_TS_JUMP_MS):
            self._check_order(ns, state, seq, ts)
        call = known.call
        if call is None:
            call = built_call(state, known.table_id, state.tables[known.table_id],
                               known.channel)
        if seq == state.last_seq + 1:  # `_accept` without a gap
            state.last_seq, state.last_ts, state.jump = seq, ts, None
        else:
            self._accept(ns, state, seq, ts, source, line_number)
        return JournalRecord(nameserver_id=ns, seq=seq + state.offset, at_ms=ts, call=call,
                             cluster=known.cluster, broker_name=known.broker_name,
                             broker_addr=known.broker_addr)

    def _remember(self, prefix: re.Match[str], line: str, record: JournalRecord,
                  doc: Mapping[str, Any]) -> None:
        """Cache the rest of an accepted record when it decodes on its own: a JSON object
        without ``ns``/``seq``/``ts`` keys (which would override the prefix's), and no
        table definition (a table is defined once)."""
        state = self._ns[record.nameserver_id]
        if (prefix.group(1), int(prefix.group(2)), int(prefix.group(3))) != (
                doc["ns"], doc["seq"], doc["ts"]) or len(state.known) >= _KNOWN_MAX:
            return
        rest = line[prefix.end():]
        try:
            alone = json.loads("{" + rest)
        except ValueError:
            return
        if not isinstance(alone, dict) or {"ns", "seq", "ts"} & alone.keys():
            return
        call: Call | None = record.call
        table_id, channel = 0, None
        if isinstance(call, Register):
            args = doc["args"]
            if "table" in args:
                return
            table_id, channel, call = args["table_id"], call.registration.channel, None
        state.known[rest] = Known(record.op, record.cluster, record.broker_name,
                                   record.broker_addr, call, table_id, channel)

    # ------------------------------------------------------------------ header

    def _header(self, doc: dict[str, Any], source: str, line_number: int) -> JournalHeader:
        unknown = sorted(set(doc) - set(HEADER_FIELDS))
        if unknown:
            raise _Bad(f"header: unknown field(s) {', '.join(map(repr, unknown))}")
        if doc["journal"] != JOURNAL_FORMAT:
            raise _Bad(f"header: journal must be {JOURNAL_FORMAT!r}, got {doc['journal']!r}")
        version = doc.get("version")
        if version != JOURNAL_VERSION:
            raise _Bad(f"header: unsupported journal version {version!r} "
                       f"(this reader reads version {JOURNAL_VERSION})")
        for key in ("nameserver", "config", "start_ms"):
            if key not in doc:
                raise _Bad(f"header: missing field {key!r}")
        ns = check_name("nameserver", doc["nameserver"])
        start = check_int("start_ms", doc["start_ms"], low=0)
        if doc.get("ns", ns) != ns:
            raise _Bad(f"header: ns {doc['ns']!r} differs from nameserver {ns!r}")
        if doc.get("ts", start) != start:
            raise _Bad(f"header: ts {doc['ts']!r} differs from start_ms {start}")
        if doc.get("op", "header") != "header":
            raise _Bad(f"header: op must be 'header', got {doc['op']!r}")
        config = config_from_json(doc["config"])
        state = self._ns.get(ns)
        seq = check_int("seq", doc.get("seq", 0 if state is None else state.last_seq + 1), low=0)
        if state is None:
            state = self._ns[ns] = NsState(last_seq=seq, last_ts=start)
        elif seq <= state.last_seq and start > state.last_ts:
            open_epoch(state, seq, start)
        else:
            self._check_order(ns, state, seq, start, record=False)
            self._accept(ns, state, seq, start, source, line_number)
        state.fresh_tables = set()
        return JournalHeader(nameserver_id=ns, seq=seq + state.offset, start_ms=start,
                             config=config, version=version)

    def _snapshot(self, doc: dict[str, Any], source: str, line_number: int) -> JournalSnapshot:
        """A ``snapshot`` line, checked like a record (order, fields, state, tables); then
        the table ids are the ones it lists (``docs/journal.md``). A name server without
        a header starts at it (a journal, or a segment of one, may begin at one)."""
        entry = decode_snapshot(doc)
        ns, seq, ts = entry.nameserver_id, entry.seq, entry.at_ms
        state = self._ns.get(ns)
        if state is not None:
            self._check_order(ns, state, seq, ts)
            self._accept(ns, state, seq, ts, source, line_number)
        after = self._ns[ns] = after_snapshot(state, entry, f"{source}:{line_number}")
        # the line's own number is checked; the entry is numbered on over restart epochs
        return entry if not after.offset else attrs.evolve(entry, seq=seq + after.offset)

    @staticmethod
    def _check_order(ns: str, state: NsState, seq: int, ts: int, *,
                     record: bool = True) -> None:
        if seq <= state.last_seq:
            raise _Bad(f"seq {seq} of {ns!r} is not after the last accepted seq "
                       f"{state.last_seq} (duplicate or out of order" + (
                           ")" if record else "; a restart header that numbers from zero "
                           "again must start after the last accepted ts)"))
        if ts < state.last_ts:
            raise _Bad(f"ts {ts} of {ns!r} is before the last accepted ts {state.last_ts} "
                       f"(time must not go backwards)")
        if record and ts - state.last_ts > MAX_TS_JUMP_MS and (
                state.jump is None or ts < state.jump):
            state.jump = ts
            raise _Bad(f"ts {ts} of {ns!r} is {(ts - state.last_ts) / 3_600_000:.1f} h after "
                       f"the last accepted ts {state.last_ts}: a clock jump (more than "
                       f"{MAX_TS_JUMP_MS // 3_600_000} h between two records without a "
                       f"header; a later record at or after it confirms the jump)")

    def _accept(self, ns: str, state: NsState, seq: int, ts: int, source: str,
                line_number: int) -> None:
        if seq != state.last_seq + 1:
            self.gaps.append(SeqGap(nameserver_id=ns, after_seq=state.last_seq, next_seq=seq,
                                    source=source, line_number=line_number))
        state.last_seq, state.last_ts, state.jump = seq, ts, None

    # ------------------------------------------------------------------ records

    def _record(self, doc: dict[str, Any], source: str, line_number: int) -> JournalRecord:
        unknown = sorted(set(doc) - set(RECORD_FIELDS))
        if unknown:
            raise _Bad(f"unknown field(s) {', '.join(map(repr, unknown))}")
        for key in ("ns", "seq", "ts", "op", "args"):
            if key not in doc:
                raise _Bad(f"missing field {key!r}")
        ns = doc["ns"]
        if not isinstance(ns, str):
            raise _Bad(f"ns must be a string, got {ns!r:.80}")
        state = self._ns.get(ns)
        if state is None:
            raise _Bad(f"no header for name server {ns!r} before this record (nor a "
                       f"snapshot: the journal's start is missing, e.g. older files were "
                       f"deleted; keep a name server's files from one that starts with a "
                       f"snapshot)")
        seq = check_int("seq", doc["seq"], low=1)
        ts = check_int("ts", doc["ts"], low=0)
        op = doc["op"]
        if op not in CALLS:
            raise _Bad(f"unknown op {op!r}")
        args = doc["args"]
        if not isinstance(args, dict):
            raise _Bad(f"args must be an object, got {args!r:.80}")
        cluster, name, addr = (doc.get(k) for k in ("cluster", "broker_name", "broker_addr"))
        for key, value in (("cluster", cluster), ("broker_name", name)):
            if value is not None:
                check_name(key, value)
        if addr is not None:
            check_addr("broker_addr", addr)
        self._check_order(ns, state, seq, ts)
        call = self._decode(op, args, cluster, name, addr, state, f"{source}:{line_number}")
        self._accept(ns, state, seq, ts, source, line_number)  # state moves only now
        if isinstance(call, Register) and "table" in args:
            table_id = args["table_id"]
            state.tables[table_id] = call.registration
            state.table_lines[table_id] = f"{source}:{line_number}"
            state.fresh_tables.add(table_id)
        return JournalRecord(nameserver_id=ns, seq=seq + state.offset, at_ms=ts, call=call,
                             cluster=cluster, broker_name=name, broker_addr=addr)

    def _decode(self, op: str, args: Mapping[str, Any], cluster: Any, name: Any, addr: Any,
                state: NsState, where: str) -> Call:
        if op == "register":
            return self._register(args, cluster, name, addr, state, where)
        if op == "unregister":
            for key, value in (("cluster", cluster), ("broker_name", name),
                               ("broker_addr", addr)):
                if value is None:
                    raise _Bad(f"unregister: top-level {key} is required")
        elif op == "query_data_version" and "table_id" in args:
            if set(args) != {"table_id"}:
                raise _Bad("query_data_version: args.table_id excludes any other field")
            template = self._table(state, check_int("args.table_id", args["table_id"], low=1))
            _columns_of_table(op, cluster, name, addr, template)
            return QueryDataVersion(cluster=template.cluster, broker_addr=template.broker_addr,
                                    data_version=template.data_version)
        elif op in ("scan", "channel_closed"):
            for key, value in (("cluster", cluster), ("broker_name", name),
                               ("broker_addr", addr)):
                if value is not None:
                    raise _Bad(f"{op}: top-level {key} must be null")
        call = decode_args(op, args, cluster, name, addr)
        if isinstance(call, UnregisterMany):
            for key, value in (("cluster", cluster), ("broker_name", name),
                               ("broker_addr", addr)):
                if value != common_value(call, key):
                    raise _Bad(f"unregister_many: top-level {key} {value!r} must be the value "
                               f"shared by every request ({common_value(call, key)!r})")
        elif isinstance(call, RegisterTopic) and name != common_broker_name(call):
            raise _Bad(f"register_topic: top-level broker_name {name!r} must be the group "
                       f"shared by every row ({common_broker_name(call)!r})")
        return call

    @staticmethod
    def _table(state: NsState, table_id: int) -> Registration:
        found = state.tables.get(table_id)
        if found is None:
            why = (f" (its definition at {state.bad_tables[table_id]} was rejected)"
                   if table_id in state.bad_tables else "")
            raise _Bad(f"unknown table_id {table_id}{why}")
        return found

    def _register(self, args: Mapping[str, Any], cluster: Any, name: Any, addr: Any,
                  state: NsState, where: str) -> Register:
        unknown = sorted(set(args) - {"table_id", "table", "channel"})
        if unknown:
            raise _Bad(f"register: unknown args field(s) {', '.join(map(repr, unknown))}")
        if "table_id" not in args:
            raise _Bad("register: missing args field 'table_id'")
        table_id = check_int("args.table_id", args["table_id"], low=1)
        if "table" in args:
            if table_id in state.fresh_tables:
                raise _Bad(f"register: table_id {table_id} is already defined at "
                           f"{state.table_lines[table_id]}")
            if table_id in state.tables:
                forget_table(state, table_id)  # redefined after a restart
            try:
                template = Registration.from_json(args["table"])
            except InvalidRequest as exc:
                state.bad_tables[table_id] = where
                raise _Bad(f"register: bad table {table_id}: {exc}") from None
        else:
            template = self._table(state, table_id)
        _columns_of_table("register", cluster, name, addr, template)
        return built_call(state, table_id, template, decode_channel(args.get("channel")))


def _columns_of_table(op: str, cluster: Any, name: Any, addr: Any,
                      template: Registration) -> None:
    """A line that names a table must carry that table's cluster, group and address in its
    top-level columns; raises `_Bad` naming the first that differs."""
    for key, value, want in (("cluster", cluster, template.cluster),
                             ("broker_name", name, template.broker_name),
                             ("broker_addr", addr, template.broker_addr)):
        if value != want:
            raise _Bad(f"{op}: top-level {key} {value!r} differs from the table's {want!r}")


def _lines(source: Source) -> tuple[str, Iterator[str], Any]:
    """(name, line iterator, closable or None)."""
    if isinstance(source, str | os.PathLike):
        handle = open_journal(source)
        return os.fspath(source), iter(handle), handle
    return getattr(source, "name", "<lines>"), iter(source), None


def iter_journal(source: Source, *, reader: JournalReader | None = None,
                 name: str | None = None) -> Iterator[JournalEntry | RejectedLine]:
    """Stream one journal: each line as a `JournalHeader`, a `JournalRecord` or a
    `RejectedLine`. ``source`` is a path (``str`` or path-like; gzip recognised) or an
    iterable of lines. Pass a shared ``reader`` to continue name-server state across files.
    Memory: O(tables), not O(lines)."""
    reader = reader if reader is not None else JournalReader()
    label, lines, closable = _lines(source)
    label = name if name is not None else str(label)
    try:
        for number, text in enumerate(lines, start=1):
            yield reader.feed(text, source=label, line_number=number)
    finally:
        if closable is not None:
            closable.close()


def read_journals(sources: Iterable[Source]) -> JournalReadResult:
    """Read several journals (each a path or an iterable of lines) with one shared state:
    accepted entries in reading order, every rejected line, every sequence gap."""
    reader = JournalReader()
    records: list[JournalEntry] = []
    rejected: list[RejectedLine] = []
    for source in sources:
        for item in iter_journal(source, reader=reader):
            if isinstance(item, RejectedLine):
                rejected.append(item)
            else:
                records.append(item)
    return JournalReadResult(records=tuple(records), rejected=tuple(rejected),
                             gaps=tuple(reader.gaps))


def read_journal(source: Source) -> JournalReadResult:
    """Read one journal (a path, gzip recognised, or an iterable of lines).

    >>> result = read_journal(['{"journal":"routing","version":1,"nameserver":"ns-0",'
    ...                        '"config":{},"start_ms":0}', 'not json'])
    >>> [type(r).__name__ for r in result.records], result.rejected[0].line_number
    (['JournalHeader'], 2)
    >>> result.rejected[0].reason.split(":")[0]
    'malformed JSON'
    """
    return read_journals([source])
