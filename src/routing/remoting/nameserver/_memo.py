"""A connection's repeated request, recognised from its bytes: `FrameMemo`.

Two requests come again and again on one connection with only their opaque changed: a
broker's BROKER_HEARTBEAT (every few seconds, or as fast as it is answered under load),
answered plain SUCCESS (or, oneway, not at all), and a client's GET_ROUTEINFO_BY_TOPIC for
the same topic (every 30 s per topic; a load generator repeats one), answered with the same
route body as long as the route has not changed. Once such a request of a connection has
been decoded, processed and answered the ordinary way, `learn` keeps the frame around its
opaque and the answer around the same opaque, with the request's ``code`` and a ``proof``:
what the host needs to serve it again (a heartbeat: the broker's cluster and address,
`heartbeat_proof`; a route read: the topic and the manager's route snapshot the answer was
encoded from, which the host checks is still the one served before answering from memory,
``NameServerProcessor.route_current``). A later read that is exactly one frame of the same
size, equal to the remembered one outside the opaque, is that request again
(`FrameMemo.opaque`), and the host answers it from the remembered bytes
(``NameServerHost._again``): no command, no outcome, no encoding. About 2 µs of CPU instead
of about 9 µs per heartbeat in process. No Java counterpart (Java decodes every frame).

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

__all__ = ["FrameMemo", "heartbeat_proof", "learn"]

_INT32_MAX = 2**31 - 1
#: In a ROCKETMQ binary frame: the opaque's bytes (prefix 8, code 2, language 1, version 2).
_BINARY_OPAQUE = (13, 17)
_PREFIX = 8  # the length prefix and the header-length word


class FrameMemo:
    """One connection's remembered request: the frame (``size`` bytes) is ``head``, the
    opaque (``opaque_start``..``opaque_end``), ``tail``; its answer is ``answer_head``,
    the same opaque bytes, ``answer_tail``; ``code`` is the request's code and ``proof``
    what the host needs to serve it again (module docstring). O(1) memory per connection
    (two frames: a few hundred bytes for a heartbeat, the route body for a route read)."""

    __slots__ = ("answer_head", "answer_tail", "code", "head", "json", "opaque_end",
                 "opaque_start", "proof", "size", "tail")

    def __init__(self, frame: bytes, span: tuple[int, int], answer: bytes | None,
                 answer_span: tuple[int, int], *, json: bool, code: int,
                 proof: tuple[object, ...]) -> None:
        self.size = len(frame)
        self.opaque_start, self.opaque_end = span
        self.head, self.tail = frame[:span[0]], frame[span[1]:]
        #: None for a oneway heartbeat (Java's broker sends them so): nothing is written.
        self.answer_head = None if answer is None else answer[:answer_span[0]]
        self.answer_tail = b"" if answer is None else answer[answer_span[1]:]
        self.json = json
        self.code, self.proof = code, proof

    def opaque(self, data: bytes) -> bytes | None:
        """The opaque's bytes of ``data`` (one whole frame of ``size`` bytes) when it is
        this request again, else None. O(size): two memcmp."""
        if not (data.startswith(self.head) and data.endswith(self.tail)):
            return None
        opaque = data[self.opaque_start:self.opaque_end]
        if self.json and not (opaque.isdigit() and (opaque[0] != 48 or len(opaque) == 1)
                              and (len(opaque) < 10 or int(opaque) <= _INT32_MAX)):
            return None  # (bytes.isdigit is ASCII only)
        return opaque

    def answer(self, opaque: bytes) -> bytes | None:
        """The answer frame to the request with ``opaque`` (`opaque`'s result), None for
        a oneway request. O(size)."""
        head = self.answer_head
        return None if head is None else head + opaque + self.answer_tail


def heartbeat_proof(request: RemotingCommand) -> tuple[str, str] | None:
    """``(cluster, broker address)`` of the BROKER_HEARTBEAT ``request`` to remember, or
    None when it has a body or lacks a field (each of the three the handler reads is
    required, so that a oneway request whose error was not written is not remembered).
    O(1)."""
    ext = request.ext_fields
    cluster, addr = ext.get("clusterName"), ext.get("brokerAddr")
    if request.body or cluster is None or addr is None or "brokerName" not in ext:
        return None
    return cluster, addr


def learn(frame: bytes, request: RemotingCommand, answer: bytes | None,
          proof: tuple[object, ...]) -> FrameMemo | None:
    """A `FrameMemo` of ``frame`` (exactly one whole frame, length prefix included), which
    decoded to ``request`` and was answered with the frame ``answer`` (None for a oneway
    request, which gets no answer), to be served again with ``proof``; None when it cannot
    be remembered exactly (module docstring), e.g. a JSON header with escapes or a
    negative opaque. O(len(frame) + len(answer))."""
    if (answer is None) != request.is_oneway:
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
    return FrameMemo(frame, span, answer, answer_span, json=json, code=request.code,
                     proof=proof)
