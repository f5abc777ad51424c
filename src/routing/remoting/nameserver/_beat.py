"""A connection's repeated BROKER_HEARTBEAT, recognised from its bytes: `BeatMemo`.

A broker sends the same heartbeat frame again and again (every few seconds, or as fast as
it is answered under load), differing only in its opaque, and the answer is always the
same SUCCESS frame with that opaque (or, as Java's broker sends it, oneway: no answer).
Once a heartbeat of a connection has been decoded, processed and answered plain SUCCESS
(or, oneway, nothing) the ordinary way, `learn` keeps the frame around its
opaque and the answer around the same opaque; a later read that is exactly one frame of
the same size, equal to the remembered one outside the opaque, is that heartbeat again
(`BeatMemo.opaque`), and the host answers it from the remembered bytes after the
manager's liveness update (`NameServerHost._beat`): no command, no outcome, no encoding.
About 2 µs of CPU instead of about 9 µs per heartbeat in process. No Java counterpart
(Java decodes every frame).

Exact, by construction, in both header forms:

* **ROCKETMQ binary**: the opaque is the int32 at bytes 13..17 of the frame (after the
  length prefix, the header-length word, code, language and version); a frame equal to
  the remembered one elsewhere decodes to the same command with that opaque, and the
  answer is the remembered answer with the same four bytes.
* **JSON**: the remembered frame's header has the shape `wire._header_cache` requires
  (`opaque_span`): the same prefix, other JSON integer digits and the same suffix are the
  same document with only the opaque changed. Only plain non-negative digits are taken
  (``0`` or no leading zero, in int32 range), which the answer writes identically
  (``b"%d" % opaque``); anything else (a negative opaque, ``-0``) goes the ordinary way.
  The frame's length prefix and header word are part of the remembered prefix, so the
  digits' count is fixed: a number with one more digit goes the ordinary way once and is
  remembered in its turn.
"""

from __future__ import annotations

from ..wire._codec import RemotingCommand
from ..wire._codes import SerializeType
from ..wire._header_cache import opaque_span

__all__ = ["BeatMemo", "learn"]

_INT32_MAX = 2**31 - 1
#: In a ROCKETMQ binary frame: the opaque's bytes (prefix 8, code 2, language 1, version 2).
_BINARY_OPAQUE = (13, 17)
_PREFIX = 8  # the length prefix and the header-length word


class BeatMemo:
    """One connection's remembered heartbeat: the frame (``size`` bytes) is ``head``,
    the opaque (``opaque_start``..``opaque_end``), ``tail``; its answer is
    ``answer_head``, the same opaque bytes, ``answer_tail``; ``cluster`` and ``addr``
    name the broker whose liveness it refreshes. O(1) memory per connection (two frames
    of a few hundred bytes)."""

    __slots__ = ("addr", "answer_head", "answer_tail", "cluster", "head", "json",
                 "opaque_end", "opaque_start", "size", "tail")

    def __init__(self, frame: bytes, span: tuple[int, int], answer: bytes | None,
                 answer_span: tuple[int, int], *, json: bool, cluster: str,
                 addr: str) -> None:
        self.size = len(frame)
        self.opaque_start, self.opaque_end = span
        self.head, self.tail = frame[:span[0]], frame[span[1]:]
        #: None for a oneway heartbeat (Java's broker sends them so): nothing is written.
        self.answer_head = None if answer is None else answer[:answer_span[0]]
        self.answer_tail = b"" if answer is None else answer[answer_span[1]:]
        self.json = json
        self.cluster, self.addr = cluster, addr

    def opaque(self, data: bytes) -> bytes | None:
        """The opaque's bytes of ``data`` (one whole frame of ``size`` bytes) when it is
        this heartbeat again, else None. O(size): two memcmp."""
        if not (data.startswith(self.head) and data.endswith(self.tail)):
            return None
        opaque = data[self.opaque_start:self.opaque_end]
        if self.json and not (opaque.isdigit() and (opaque[0] != 48 or len(opaque) == 1)
                              and (len(opaque) < 10 or int(opaque) <= _INT32_MAX)):
            return None  # (bytes.isdigit is ASCII only)
        return opaque

    def answer(self, opaque: bytes) -> bytes | None:
        """The answer frame to the heartbeat with ``opaque`` (`opaque`'s result), None for
        a oneway heartbeat. O(size)."""
        head = self.answer_head
        return None if head is None else head + opaque + self.answer_tail


def learn(frame: bytes, request: RemotingCommand, answer: bytes | None) -> BeatMemo | None:
    """A `BeatMemo` of ``frame`` (exactly one whole frame, length prefix included), which
    decoded to the BROKER_HEARTBEAT ``request`` and was answered with the frame ``answer``
    (plain SUCCESS; None for a oneway request, which gets no answer); None when it cannot
    be remembered exactly (module docstring), e.g. a JSON header with escapes, a negative
    opaque, a body or a missing field (each of the three the handler reads is required,
    so that a oneway request whose error was not written is not remembered).
    O(len(frame))."""
    ext = request.ext_fields
    cluster, addr = ext.get("clusterName"), ext.get("brokerAddr")
    if (request.body or cluster is None or addr is None or "brokerName" not in ext
            or (answer is None) != request.is_oneway):
        return None
    if request.serialize_type is SerializeType.ROCKETMQ:
        span = answer_span = _BINARY_OPAQUE
        json = False
    elif request.opaque < 0:
        return None
    else:
        found = opaque_span(frame[_PREFIX:], request.opaque)
        answered = found if answer is None else opaque_span(answer[_PREFIX:], request.opaque)
        if found is None or answered is None:
            return None
        span = (found[0] + _PREFIX, found[1] + _PREFIX)
        answer_span = (answered[0] + _PREFIX, answered[1] + _PREFIX)
        json = True
    if answer is not None and frame[span[0]:span[1]] != answer[answer_span[0]:answer_span[1]]:
        return None
    return BeatMemo(frame, span, answer, answer_span, json=json, cluster=cluster, addr=addr)
