"""REGISTER_BROKER's JSON body decoded against the broker's previous one (issue 13).

A broker's changed registration usually differs from its previous one in the data version
and a few topics, yet the full decode (`RegisterBrokerBody.decode`) parses the whole
document with ``json.loads`` (about 1 ms for 1 000 topics here) and then turns each
topic's dict into a `TopicConfig` (about 1.8 µs each). `decode_against` instead reads
only what changed:

* the ``topicConfigTable`` object's text equal to the previous one (one ``startswith``):
  the previous `TopicTable` object itself;
* otherwise member by member: a member (``"name":{...}``) whose text is the previous
  body's member at the same place, or whose value text is the previous value of that
  name, is the previous `TopicConfig`; any other member is parsed by the standard JSON
  scanner and converted by the same memoised `_topic_config` as the full decode;
* the rest of the document (data version, filter servers, mappings) by ``json.loads``
  of the document with an empty table in the table's place, and once more with a probe
  table ``{"":0}``.

Exact, not a fingerprint: a JSON value is self-delimiting, so text that starts with a
previously parsed value's text *is* that value; a table assembled from members that each
parse is the one parse of its text (JSON's grammar is unambiguous); and the two small
parses prove that the slot is the document's effective ``topicConfigTable`` value (were it
inside a string or another value, the table read from both would be the same, not ``{}``
and ``{"":0}``), so substituting the table's text there gives the full document. Anything
else (the legacy dialect's bare keys, a value that fails its checks, whitespace in odd
places) returns None, and the caller runs the full decode, which also names the error.
Differential tests compare both decodes on random and adversarial bodies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, cast

from .. import _json as j
from .._errors import InvalidRequest
from .._messages import TopicTable
from .._values import TopicConfig
from ._bodies import _topic_config
from ._codes import V3_0_11

__all__ = ["TableText", "decode_against"]

_MARK = '"topicConfigTable":'
#: The standard decoder's scanner: (text, start) -> (value, end), StopIteration if none.
_scan: Callable[[str, int], tuple[Any, int]] = (
    json.JSONDecoder().scan_once)  # type: ignore[attr-defined]  # not in typeshed
#: json.decoder.WHITESPACE; it matches at any position (possibly the empty string)
_blank = cast(Callable[[str, int], "re.Match[str]"], re.compile(r"[ \t\n\r]*").match)


class TableText:
    """A decoded ``topicConfigTable``: its text (``{`` to ``}``), each member's span in it
    (key start, value start, end), name and `TopicConfig`, and the resulting table. Kept
    per broker by the processor's memo (about the size of the table's text)."""

    __slots__ = ("by_key", "configs", "keys", "spans", "table", "text")

    def __init__(self, text: str, spans: list[tuple[int, int, int]], keys: list[str],
                 configs: list[TopicConfig], table: TopicTable) -> None:
        self.text, self.spans, self.keys, self.configs, self.table = (
            text, spans, keys, configs, table)
        self.by_key: dict[str, int] | None = None  # name -> last member index, on demand

    def index_of(self, key: str) -> int | None:
        if self.by_key is None:
            self.by_key = {k: i for i, k in enumerate(self.keys)}
        return self.by_key.get(key)


def decode_against(data: bytes, version: int, previous: TableText | None,
                   build: Callable[[Mapping[str, Any], Any, TopicTable], Any],
                   ) -> tuple[Any, TableText] | None:
    """``build(wrapper, filter_servers, topics)`` for the JSON body ``data`` (see the
    module docstring), with the table read against ``previous``; None when this decode
    cannot vouch for the result (then use the full decode). O(changed topics) plus one
    pass over the text in C."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    start = text.find(_MARK)
    if start < 0:
        return None
    start += len(_MARK)
    if text[start:start + 1] != "{":
        return None
    try:
        if previous is not None and text.startswith(previous.text, start):
            table, end = previous, start + len(previous.text)
        else:
            read = _read_table(text, start, previous)
            if read is None:
                return None
            table, end = read
        head, tail = text[:start], text[end:]
        wrapper, servers = _wrapper(json.loads(head + "{}" + tail), version)
        probe, _ = _wrapper(json.loads(head + '{"":0}' + tail), version)
        if wrapper.get("topicConfigTable") != {} or probe.get("topicConfigTable") != {"": 0}:
            return None
        return build(wrapper, servers, table.table), table
    except (InvalidRequest, ValueError, RecursionError, TypeError, IndexError,
            StopIteration):
        return None


def _wrapper(doc: Any, version: int) -> tuple[Mapping[str, Any], Any]:
    """The topic-config wrapper and the filter servers, as `RegisterBrokerBody.decode`
    reads them."""
    doc = j.document(doc, "RegisterBrokerBody")
    if version < V3_0_11:
        return doc, None
    wrapper = j.as_mapping(j.get(doc, "topicConfigSerializeWrapper"),
                           "topicConfigSerializeWrapper")
    return wrapper, j.get(doc, "filterServerList")


def _run(text: str, pos: int, prev_text: str, prev_spans: list[tuple[int, int, int]],
         at: int) -> int:
    """How many of the previous members from ``at`` on ``text`` repeats from ``pos`` (with
    the separators between them): a block of members is compared as one text, the
    longest found by bisection (a block matches only if every shorter one does).
    O(log T) comparisons in C."""
    k0 = prev_spans[at][0]
    last = len(prev_spans) - at
    if text.startswith(prev_text[k0:prev_spans[-1][2]], pos):
        return last
    low, high = 0, last - 1  # low members match; high + 1 do not
    while low < high:
        mid = (low + high + 1) // 2
        if text.startswith(prev_text[k0:prev_spans[at + mid - 1][2]], pos):
            low = mid
        else:
            high = mid - 1
    return low


def _after_member(text: str, pos: int) -> tuple[int, bool] | None:
    """After a member's value at ``pos``: (where the next member starts, False), or (just
    past the object's ``}``, True); None if neither a ``,`` nor a ``}`` follows."""
    pos = _blank(text, pos).end()
    if text[pos] == "}":
        return pos + 1, True
    if text[pos] != ",":
        return None
    return _blank(text, pos + 1).end(), False


def _read_table(text: str, start: int, previous: TableText | None
                ) -> tuple[TableText, int] | None:
    """The object at ``text[start] == "{"``, member by member (see the module docstring);
    None if it is not a well-formed table of topic configs."""
    prev_text = previous.text if previous is not None else ""
    prev_spans = previous.spans if previous is not None else []
    prev_keys = previous.keys if previous is not None else []
    prev_configs = previous.configs if previous is not None else []
    count = len(prev_spans)
    spans: list[tuple[int, int, int]] = []
    keys: list[str] = []
    configs: list[TopicConfig] = []
    members: dict[str, TopicConfig] = {}
    startswith = text.startswith
    pos = _blank(text, start + 1).end()
    at = 0  # the previous member expected here
    if text[pos] == "}":
        end = pos + 1
    else:
        while True:
            key_at = pos
            run = _run(text, pos, prev_text, prev_spans, at) if at < count else 0
            if run:  # the previous body's next `run` members, repeated here
                k0, e0 = prev_spans[at][0], prev_spans[at + run - 1][2]
                shift = key_at - start - k0
                spans.extend([(k + shift, v + shift, e + shift)
                              for k, v, e in prev_spans[at:at + run]])
                same_keys, same = prev_keys[at:at + run], prev_configs[at:at + run]
                keys.extend(same_keys)
                configs.extend(same)
                members.update(zip(same_keys, same, strict=True))
                pos += e0 - k0
                at += run
            else:
                if text[pos] != '"':
                    return None
                key, pos = _scan(text, pos)
                pos = _blank(text, pos).end()
                if text[pos] != ":":
                    return None
                pos = value_at = _blank(text, pos + 1).end()
                if at < count and prev_keys[at] == key:  # a changed value at the same place
                    index: int | None = at
                else:
                    index = previous.index_of(key) if previous is not None else None
                config: TopicConfig | None = None
                if index is not None:
                    _, v0, e0 = prev_spans[index]
                    if startswith(prev_text[v0:e0], pos):  # this name's previous value
                        config = prev_configs[index]
                        pos += e0 - v0
                    at = index + 1
                if config is None:
                    value, pos = _scan(text, pos)
                    config = _topic_config(value)
                members[key] = config
                spans.append((key_at - start, value_at - start, pos - start))
                keys.append(key)
                configs.append(config)
            after = _after_member(text, pos)
            if after is None:
                return None
            pos, last = after
            if last:
                end = pos
                break
    table = TopicTable.of_configs(list(members.values()))
    return TableText(text[start:end], spans, keys, configs, table), end
