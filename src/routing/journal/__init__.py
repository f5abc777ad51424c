"""routing.journal — what a name server saw, written down and replayable.

A `JournalRecorder` wraps a `RouteInfoManager` and writes one JSON line per write call
(version 1 of the format, ``docs/journal.md``); `read_journal` validates every line and sets
bad ones aside with the reason; `replay` rebuilds each name server's manager on a
`ManualClock` and yields the events it produced, equal to the live run's.

>>> import io, routing as r
>>> from routing.journal import JournalRecorder, read_journal, replay
>>> clock = r.ManualClock(start_ms=0)
>>> sink = io.StringIO()
>>> ns = JournalRecorder(r.RouteInfoManager(clock=clock), sink, nameserver_id="ns-0")
>>> _ = ns.register(r.Registration(cluster="c", broker_name="b", broker_id=0,
...     broker_addr="10.0.0.1:10911",
...     topics={t: r.TopicConfig(topic_name=t) for t in ("T", "U")}))
>>> _ = clock.advance(120_001)
>>> [e.broker_addr for e in ns.scan_expired()]
['10.0.0.1:10911']
>>> result = read_journal(sink.getvalue().splitlines())
>>> result.ok
True
>>> [(e.op, e.at_ms, sorted(e.change.changed_topics)) for e in replay(result.records)
...  if e.change is not None]
[('register', 0, ['T', 'U']), ('scan', 120001, ['T', 'U'])]
"""

from .._calls import (
    AddWritePerm,
    Call,
    CallResult,
    ChannelClosed,
    DeleteTopic,
    Heartbeat,
    QueryDataVersion,
    Register,
    RegisterTopic,
    Scan,
    Unregister,
    UnregisterMany,
    WipeWritePerm,
)
from ._args import JournalChannel
from ._format import (
    JOURNAL_FORMAT,
    JOURNAL_VERSION,
    SCHEMA_DDL,
    JournalEntry,
    JournalHeader,
    JournalRecord,
    JournalSink,
    is_gzip,
    open_journal,
    open_journal_bytes,
)
from ._reader import (
    JournalReader,
    JournalReadResult,
    RejectedLine,
    SeqGap,
    iter_journal,
    read_journal,
    read_journals,
)
from ._recorder import JournalRecorder
from ._replay import Replayer, ReplayError, ReplayEvent, replay
from ._rotate import (
    DEFAULT_ROTATE_BYTES,
    DEFAULT_ROTATE_EVERY_MS,
    RotatingJournal,
    finish_open_files,
    journal_file_name,
    parse_journal_file_name,
    rotated_files,
)
from ._segments import SNAPSHOT_PREFIX, segment_starts, snapshot_key
from ._snapshot import JournalSnapshot
from ._tail import last_seq, last_seq_of_files

__all__ = (
    "DEFAULT_ROTATE_BYTES",
    "DEFAULT_ROTATE_EVERY_MS",
    "JOURNAL_FORMAT",
    "JOURNAL_VERSION",
    "AddWritePerm",
    "Call",
    "CallResult",
    "ChannelClosed",
    "DeleteTopic",
    "Heartbeat",
    "JournalChannel",
    "JournalEntry",
    "JournalHeader",
    "JournalReadResult",
    "JournalReader",
    "JournalRecord",
    "JournalRecorder",
    "JournalSink",
    "JournalSnapshot",
    "SCHEMA_DDL",
    "SNAPSHOT_PREFIX",
    "QueryDataVersion",
    "Register",
    "RegisterTopic",
    "RejectedLine",
    "ReplayError",
    "ReplayEvent",
    "Replayer",
    "RotatingJournal",
    "Scan",
    "SeqGap",
    "Unregister",
    "UnregisterMany",
    "WipeWritePerm",
    "finish_open_files",
    "is_gzip",
    "iter_journal",
    "journal_file_name",
    "last_seq",
    "last_seq_of_files",
    "open_journal",
    "open_journal_bytes",
    "parse_journal_file_name",
    "read_journal",
    "read_journals",
    "replay",
    "rotated_files",
    "segment_starts",
    "snapshot_key",
)
