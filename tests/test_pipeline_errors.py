"""Every error the pipeline raises on purpose is a `routing.RoutingError`, and keeps the
built-in base its callers catch: each public error path, one test each (no Spark: the
Spark paths fail before a session is touched), and a scan of every ``raise`` in
``routing.pipeline``."""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import pytest

import routing.pipeline as p
from pipeline_scenarios import play
from routing import InvalidRequest, InvariantViolation, RoutingError
from routing.journal import JournalReader
from routing.pipeline._answers import Answer
from routing.pipeline._availability import TopicLife
from routing.pipeline._errors import SourcesTypeError
from routing.pipeline._groups import replay_entry
from routing.pipeline._spark_lines import byte_size
from routing.pipeline._sweep import TopicSweep, sweep_changes

PIPELINE = Path(p.__file__).parent


@pytest.mark.parametrize(("error", "also"), [
    (p.InputError, ValueError), (p.JournalNotFound, FileNotFoundError),
    (p.JournalNotFound, p.InputError), (SourcesTypeError, TypeError),
    (p.RejectedRecords, ValueError), (p.SparkUnavailable, RuntimeError)])
def test_every_public_error_is_a_routing_error_and_keeps_its_builtin_base(
        error: type[Exception], also: type[Exception]) -> None:
    assert issubclass(error, RoutingError)
    assert issubclass(error, also)


def test_a_missing_journal_is_named_and_caught_as_a_file_not_found(tmp_path: Path) -> None:
    gone = tmp_path / "nosuchdir"
    for call in (lambda: p.check_inputs([gone]), lambda: p.analyze_local(gone),
                 lambda: p.analyze_local_to(tmp_path / "out", [gone])):
        with pytest.raises(p.JournalNotFound, match=f"no such journal file or folder: {gone}"):
            call()
    with pytest.raises(FileNotFoundError):  # what callers caught before
        p.analyze_local(gone)
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_folder_without_journals_is_an_input_error_naming_the_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(p.InputError, match=r"no journal found in .*notes\.txt") as caught:
        p.check_inputs([tmp_path])
    assert not isinstance(caught.value, FileNotFoundError)


def test_sources_of_another_kind_are_a_type_error_naming_the_value() -> None:
    with pytest.raises(SourcesTypeError, match="got 42") as caught:
        p.analyze_local([42])  # type: ignore[list-item]
    assert isinstance(caught.value, TypeError)
    assert isinstance(caught.value, p.InputError)


def test_strict_names_the_rejected_lines_and_the_gaps() -> None:
    journals = play([("register", 1, 0, 0, 0, 0, [0, 1], 0, 0, None, False, 4, True),
                     ("advance", 1_000), ("heartbeat", 1, 0, 0)], nameservers=1)
    (name, lines), = journals.items()
    damaged = {name: [*lines[:2], "not json", *lines[3:]]}  # seq 2 lost: a gap too
    with pytest.raises(p.RejectedRecords) as caught:
        p.analyze_local(damaged, strict=True)
    error = caught.value
    assert isinstance(error, ValueError) and isinstance(error, RoutingError)
    assert error.total == 1 and [r["line"] for r in error.rows] == [3]
    assert f"{name}:3: malformed JSON" in str(error)
    assert len(error.gaps) == 1 and "missing" in error.gaps[0]
    assert p.analyze_local(damaged)["rejected"]  # without strict: rows, no error


def test_a_partition_that_is_neither_ns_nor_group_fails_before_spark_is_touched() -> None:
    with pytest.raises(InvalidRequest,
                       match="partition must be 'ns', 'ns-whole' or 'group'") as caught:
        p.analyze(None, [], partition="topic")
    assert (caught.value.field, caught.value.value) == ("partition", "topic")
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("remote", ["http://host:15002", "sc://", "sc://host/path",
                                    "sc://host:99999/;token=s3cret"])
def test_a_remote_that_is_not_spark_connect_is_an_invalid_request_without_its_token(
        remote: str) -> None:
    pytest.importorskip("pyspark")
    with pytest.raises(InvalidRequest) as caught:
        p.remote_session(remote)
    assert caught.value.field == "remote"
    assert "s3cret" not in str(caught.value) and "s3cret" not in str(caught.value.value)


def test_a_byte_size_spark_would_not_read_is_an_invalid_request() -> None:
    assert byte_size("128MB") == 128 << 20
    with pytest.raises(InvalidRequest, match="not a byte size: '12 parsecs'") as caught:
        byte_size("12 parsecs")
    assert isinstance(caught.value, ValueError)


def test_the_sweep_refuses_answers_from_a_name_server_it_has_no_span_for() -> None:
    spans = {"ns-0": (0, 10)}
    answer = Answer.of(None, 5)
    with pytest.raises(InvalidRequest, match="'ns-9' without a span") as caught:
        list(sweep_changes("T", [(5, "ns-9", 1, answer)], spans, removals=frozenset()))
    assert caught.value.field == "ns"
    sweep = TopicSweep("T", spans, removals=frozenset())
    sweep.feed_changes([(5, "ns-0", 1, answer)])
    with pytest.raises(InvalidRequest, match="out of order"):
        sweep.feed_changes([(4, "ns-0", 2, answer)])
    with pytest.raises(InvalidRequest, match="'ns-9' without a span"):
        TopicLife("T", spans, frozenset()).change("ns-9", 5, True, True, ("g",))


def test_a_component_reader_that_rejects_an_accepted_line_is_an_invariant_violation() -> None:
    with pytest.raises(InvariantViolation, match=r"j\.jsonl:3 was accepted") as caught:
        replay_entry(JournalReader(), "ns-0", 1, 0, "register", "j.jsonl", 3, "not json")
    assert isinstance(caught.value, AssertionError)


def test_every_raise_in_the_pipeline_raises_a_routing_error() -> None:
    """Scan every ``raise Name(...)`` of ``routing.pipeline``: the class it names (in its
    module) must be a `RoutingError`. Re-raises (``raise``, ``raise exc``, ``raise
    type(exc)(...)``, which hand on another library's error with more words) and the module
    protocol's `AttributeError` in ``__getattr__`` are not ours."""
    wrong = []
    for path in sorted(PIPELINE.glob("*.py")):
        module = importlib.import_module(f"routing.pipeline.{path.stem}"
                                         if path.stem != "__init__" else "routing.pipeline")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        getattr_nodes = {n for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                         and f.name == "__getattr__" for n in ast.walk(f)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or node in getattr_nodes:
                continue
            call = node.exc
            target = call.func if isinstance(call, ast.Call) else call
            if not isinstance(target, ast.Name) or not isinstance(call, ast.Call):
                continue  # a re-raise: ``raise``, ``raise exc``, ``raise type(exc)(...)``
            raised = getattr(module, target.id, None) or getattr(builtins, target.id, None)
            if not (isinstance(raised, type) and issubclass(raised, RoutingError)):
                wrong.append(f"{path.name}:{node.lineno}: raise {target.id}")
    assert wrong == []
