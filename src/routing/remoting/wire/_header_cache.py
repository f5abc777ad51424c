"""A connection's recent JSON headers, decoded, told apart by everything but the opaque;
and its last body.

A broker re-sends the same request header again and again (REGISTER_BROKER every 30 s,
heartbeats every few seconds) with one difference: ``opaque``, the request number. Java's
fastjson writes the header's fields in alphabetical order, so the number sits between a
fixed prefix (``{"code":103,"extFields":{...},"flag":0,"language":"JAVA","opaque":``)
and a fixed suffix. `HeaderCache` keeps, per prefix, the suffix and what the whole header
decoded to; a header with a known prefix, a plain integer and the same suffix decodes to
the remembered fields with the new opaque: about 1 µs instead of about 5 µs (the JSON
scan of a dozen strings and the checks of every field). No Java counterpart.

Exact, by construction: a header is remembered only when it holds no backslash (every
key and string is written literally), the literal ``"opaque"`` occurs exactly once, as
``,"opaque":`` followed by the top-level opaque's digits and then ``,`` or ``}``. Then
that occurrence is the top-level key (the decoded document has one, and it can only be
written literally), and a header made of the same prefix, other digits (``-?(0|[1-9]…)``,
a JSON integer) and the same suffix is the same document with only that number changed.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["HeaderCache", "opaque_span"]

_KEY = b',"opaque":'
_DIGITS = re.compile(rb"-?(?:0|[1-9][0-9]*)(?=[,}])").match
#: Headers remembered per connection (distinct prefixes: one per request kind it sends).
_ENTRIES = 8


def opaque_span(header: bytes, opaque: int) -> tuple[int, int] | None:
    """Where the top-level opaque's digits sit in ``header`` (a JSON header that decoded
    to opaque ``opaque``): ``(start, end)`` when ``header`` has the shape the module
    docstring requires, so that any header made of ``header[:start]``, other JSON integer
    digits and ``header[end:]`` is the same document with only the opaque changed; else
    None. O(len(header))."""
    if b"\\" in header or header.count(b'"opaque"') != 1:
        return None
    start = header.find(_KEY)
    if start < 0:
        return None
    start += len(_KEY)
    digits = _DIGITS(header, start)
    if digits is None or int(digits.group()) != opaque:
        return None
    return start, digits.end()


class HeaderCache:
    """Per connection: header prefix -> (suffix, decoded fields). Not thread-safe (one per
    `FrameDecoder`); at most ``_ENTRIES`` headers of a few hundred bytes."""

    __slots__ = ("_entries", "_last_body")

    def __init__(self) -> None:
        self._entries: dict[bytes, tuple[bytes, Any]] = {}
        self._last_body = b""

    def body(self, view: memoryview) -> bytes:
        """``bytes(view)``, but the connection's previous body object itself when ``view``
        holds the same bytes (one memcmp, no allocation): a broker re-sends its body
        unchanged, and the processor's registration cache then sees the very object it
        keeps (``processor/_register_broker.py``), so its comparison is an identity test.
        Holds one body per connection, which that cache holds too in the steady state.
        O(len(view))."""
        last = self._last_body
        if len(last) == len(view) and last and last.startswith(view):
            return last
        body = self._last_body = bytes(view)
        return body

    def find(self, header: bytes) -> tuple[Any, int] | None:
        """(the remembered fields, this header's opaque) if ``header`` is a remembered one
        but for its opaque; else None. O(len(header))."""
        start = header.find(_KEY)
        if start < 0:
            return None
        start += len(_KEY)
        entry = self._entries.get(header[:start])
        if entry is None:
            return None
        digits = _DIGITS(header, start)
        if digits is None or header[digits.end():] != entry[0]:
            return None
        return entry[1], int(digits.group())

    def remember(self, header: bytes, opaque: int, fields: Any) -> None:
        """Keep ``fields`` (what ``header`` decoded to, its top-level opaque ``opaque``)
        when ``header`` has the shape the module docstring requires. O(len(header))."""
        span = opaque_span(header, opaque)
        if span is None:
            return
        entries = self._entries
        if len(entries) >= _ENTRIES:
            entries.clear()
        entries[header[:span[0]]] = (header[span[1]:], fields)
