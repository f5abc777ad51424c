"""The one model of the manager's write calls (`routing._calls`): the journal records these
values and the test kit's operations are these values."""

from __future__ import annotations

import io
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

import routing as r
import routing.journal as journal
import routing.testing as kit
from routing._calls import CALLS, UnregisterMany
from routing.journal import JournalRecorder, read_journal
from routing.testing import strategies as rst

#: The test kit's name of each call it generates (all but the batch unregistration).
KIT_NAMES = {
    "register": "RegisterOp", "unregister": "UnregisterOp", "heartbeat": "HeartbeatOp",
    "query_data_version": "QueryDataVersionOp", "scan": "ScanOp",
    "channel_closed": "CloseChannelOp", "delete_topic": "DeleteTopicOp",
    "register_topic": "RegisterTopicOp", "wipe_write_perm": "WipeWritePermOp",
    "add_write_perm": "AddWritePermOp",
}
#: The manager method of each op name.
METHODS = {"scan": "scan_expired", "channel_closed": "on_channel_closed"}


def test_the_journal_and_the_test_kit_share_one_class_per_call() -> None:
    assert len(CALLS) == 11
    for op, cls in CALLS.items():
        assert cls.op == op
        assert getattr(journal, cls.__name__) is cls
        if op in KIT_NAMES:
            assert getattr(kit, KIT_NAMES[op]) is cls
    assert set(KIT_NAMES) == set(CALLS) - {UnregisterMany.op}


class _Spy:
    """Answers every write method with its own name and arguments."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: (name, args, kwargs)


def test_each_call_applies_the_manager_method_of_its_name() -> None:
    examples = {
        "register": {"registration": r.Registration(
            cluster="c", broker_name="b", broker_id=0, broker_addr="10.0.0.1:1")},
        "unregister": {"request": r.UnregisterRequest(
            cluster="c", broker_addr="10.0.0.1:1", broker_name="b", broker_id=0)},
        "unregister_many": {"requests": ()},
        "heartbeat": {"cluster": "c", "broker_addr": "10.0.0.1:1"},
        "query_data_version": {"cluster": "c", "broker_addr": "10.0.0.1:1",
                               "data_version": r.DataVersion()},
        "scan": {}, "channel_closed": {"channel": "ch-1"},
        "delete_topic": {"topic": "T"}, "register_topic": {"topic": "T", "queue_datas": []},
        "wipe_write_perm": {"broker_name": "b"}, "add_write_perm": {"broker_name": "b"},
    }
    assert set(examples) == set(CALLS)
    for op, fields in examples.items():
        call = CALLS[op](**fields)
        result = call.apply(_Spy())
        if op == "register_topic":
            assert result is None  # the manager's register_topic returns nothing
            continue
        assert result[0] == METHODS.get(op, op)
        assert call.describe()


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_generated_operations_record_and_read_back_as_the_same_values(data: Any) -> None:
    fleet = data.draw(rst.fleets())
    ops = data.draw(st.lists(rst.operations(fleet=fleet), max_size=12))
    clock = r.ManualClock(start_ms=0)
    sink = io.StringIO()
    recorder = JournalRecorder(r.RouteInfoManager(clock=clock), sink, nameserver_id="ns-0")
    applied = []
    for op in ops:
        if isinstance(op, kit.AdvanceOp):
            clock.advance(op.ms)
            continue
        try:
            op.apply(recorder)
        except r.InvalidRequest:
            continue  # refused: not written
        applied.append(op)
    result = read_journal(sink.getvalue().splitlines())
    assert result.ok, result.rejected
    calls = [e.call for e in result.records[1:]]
    assert len(calls) == len(applied)
    for op, call in zip(applied, calls, strict=True):
        assert type(call) is type(op)
        if isinstance(op, kit.CloseChannelOp) and isinstance(call.channel,
                                                             journal.JournalChannel):
            continue  # an opaque channel comes back as its stand-in
        assert call == op  # (a registration's channel is no part of its equality)
