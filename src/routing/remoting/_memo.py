"""Each broker's last REGISTER_BROKER request, remembered decoded (issue 13).

A `routing.Registration` is a pure function of a request's header fields, version, body
and channel. A broker re-registers every 30 s with byte-for-byte the same body while its
topics are unchanged, so `NameServerProcessor` keeps, per broker ``(clusterName,
brokerAddr)``, the last request's parts and the `Registration` they made: an equal request
gets the same `Registration` object back (one ``memcmp`` of the body instead of its CRC,
its hash and its decoding), and the manager then sees the same topic table again, its
O(1) case. No Java counterpart (Java decodes and checks every body).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

import attrs

from .._frozen import FrozenMap
from .._messages import Registration
from ._bodies import RegisterBrokerBody
from ._table_decode import TableText

__all__ = ["LastRegistration", "RegistrationMemo"]

MemoKey = tuple[str | None, str | None]  # (clusterName, brokerAddr) as sent


@attrs.frozen(kw_only=True, eq=False)
class LastRegistration:
    """One broker's last request and what it decoded to. ``crc`` is the body's CRC32 once
    computed (None if the request carried none); ``era`` the body dialect (0: before
    V3_0_11, 1: before V5_0_0, 2: since)."""

    ext: FrozenMap[str, str]
    version: int
    data: bytes
    channel: Hashable | None
    compressed: bool
    era: int
    crc: int | None
    body: RegisterBrokerBody
    registration: Registration
    #: The body's topic table as text, for decoding the next changed body against it.
    table_text: TableText | None = None

    @property
    def size(self) -> int:
        """Bytes this memo holds beyond shared objects: the body and the table's text."""
        return len(self.data) + (len(self.table_text.text) if self.table_text else 0)

    def same_request(self, ext: FrozenMap[str, str], version: int, data: bytes,
                     channel: Hashable | None) -> bool:
        """True when a request with these parts makes exactly `registration`. O(header)
        plus a memcmp of the body (the length is compared first)."""
        return (self.version == version and self.data == data and self.channel == channel
                and self.ext == ext)


class RegistrationMemo:
    """`LastRegistration` per broker, at most ``entries`` of them and ``max_bytes`` of
    bodies and table texts; the least recently stored goes first. Thread-safe; O(1)
    amortised per call."""

    def __init__(self, entries: int, max_bytes: int) -> None:
        self.entries = entries
        self.max_bytes = max_bytes
        self.bytes = 0  # total body bytes held
        self._memos: dict[MemoKey, LastRegistration] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._memos)

    def get(self, key: MemoKey) -> LastRegistration | None:
        return self._memos.get(key) if self.entries > 0 else None

    def remember(self, key: MemoKey, memo: LastRegistration) -> None:
        """Keep ``memo`` as the broker's last request (unless it is too large to keep)."""
        size = memo.size
        if self.entries <= 0 or size > self.max_bytes // 4:
            return
        with self._lock:
            memos = self._memos
            old = memos.pop(key, None)
            if old is not None:
                self.bytes -= old.size
            memos[key] = memo
            self.bytes += size
            while len(memos) > self.entries or self.bytes > self.max_bytes:
                self.bytes -= memos.pop(next(iter(memos))).size
