"""`routing analyze --remote` without a server: the URL rules of `_connect`, the command
line's precedence over ``$SPARK_REMOTE`` and ``$SPARK_MASTER``, the token kept out of
every message, and `stop_session` on a Connect session. (With a real server:
tests/spark/test_pipeline_connect.py.)"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from routing.cli._analyze import analyze_command
from routing.pipeline._connect import _address, redacted, remote_session
from routing.pipeline._session import SparkUnavailable, stop_session


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def journals(tmp_path: Path) -> Path:
    from routing.sim import SimConfig, simulate

    root = tmp_path / "journals"
    root.mkdir()
    result = simulate(SimConfig(groups=2, slaves=0, nameservers=2, duration_ms=300_000,
                                seed=3))
    for ns, text in result.journal_texts.items():
        (root / f"{ns}.jsonl").write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize(("url", "address"), [
    ("sc://example.org", ("example.org", 15002)),
    ("sc://example.org:443", ("example.org", 443)),
    ("sc://example.org:443/;token=abc;use_ssl=true", ("example.org", 443)),
    ("sc://[::1]:15002/;user_id=me", ("::1", 15002)),
])
def test_connect_urls_parse_as_pyspark_reads_them(url: str, address: tuple[str, int]) -> None:
    assert _address(url) == address


@pytest.mark.parametrize(("url", "message"), [
    ("http://example.org:15002", "must be a Spark Connect URL"),
    ("sc://", "names no host"),
    ("sc://example.org/some/path", "only parameters may follow the host"),
    ("sc://example.org:99999/;token=SECRET", "the port is not a number"),
])
def test_a_bad_connect_url_is_a_value_error_that_names_it_without_its_token(
        url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        _address(url)
    assert "SECRET" not in str(caught.value)


def test_redacted_keeps_host_and_port_only() -> None:
    assert redacted("sc://h:1/;token=SECRET;user_id=u") == "sc://h:1"
    assert redacted("sc://h") == "sc://h:15002"
    assert redacted("sc://[::1]:9/;token=x") == "sc://[::1]:9"
    assert redacted("nonsense;token=SECRET") == "sc://…"


def test_an_unreachable_server_is_named_at_once_without_the_token() -> None:
    pytest.importorskip("pyspark")
    pytest.importorskip("grpc")
    port = _free_port()  # nothing listens there
    with pytest.raises(SparkUnavailable, match=f"127.0.0.1:{port}") as caught:
        remote_session(f"sc://127.0.0.1:{port}/;token=SECRET")
    assert "SECRET" not in str(caught.value)


@pytest.mark.parametrize("extra", [["--local"], ["--master", "local[2]"],
                                   ["--driver-memory", "2g"]])
def test_remote_excludes_the_options_of_a_local_session(
        extra: list[str], journals: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(analyze_command, [
        str(journals), "--out", str(tmp_path / "o"), "--remote", "sc://127.0.0.1:1", *extra])
    assert result.exit_code == 2
    assert "--remote runs on a Spark Connect server" in result.output


def test_spark_remote_in_the_environment_yields_to_a_local_run_asked_for(
        journals: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:1")  # nothing listens there
    result = CliRunner().invoke(analyze_command, [
        str(journals), "--out", str(tmp_path / "o"), "--local"])
    assert result.exit_code == 0, result.output
    assert "SPARK_REMOTE" not in os.environ  # pyspark's builder will not see it either
    assert (tmp_path / "o" / "sessions").is_dir()


def test_remote_wins_over_spark_master_from_the_environment(
        journals: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")
    pytest.importorskip("grpc")
    port = _free_port()
    monkeypatch.setenv("SPARK_MASTER", "local[1]")
    for args, env in ((["--remote", f"sc://127.0.0.1:{port}/;token=SECRET"], None),
                      ([], f"sc://127.0.0.1:{port}/;token=SECRET")):
        if env is not None:
            monkeypatch.setenv("SPARK_REMOTE", env)
        result = CliRunner().invoke(analyze_command, [
            str(journals), "--out", str(tmp_path / "o"), *args])
        assert result.exit_code == 1, result.output  # tried the server, not local[1]
        assert f"no Spark Connect server answered at sc://127.0.0.1:{port}" in result.output
        assert "SECRET" not in result.output


class _ConnectSession:
    """A stand-in whose class looks like pyspark's Connect session (no sparkContext)."""

    def __init__(self) -> None:
        self.stopped = 0

    def stop(self) -> None:
        self.stopped += 1

    def __getattr__(self, name: str) -> object:  # as pyspark's: no JVM attributes
        raise AttributeError(name)


_ConnectSession.__module__ = "pyspark.sql.connect.session"


def test_stop_session_just_stops_a_connect_session() -> None:
    session = _ConnectSession()
    stop_session(session)
    assert session.stopped == 1


@pytest.mark.parametrize(("text", "size"), [
    ("128MB", 128 << 20), ("64m", 64 << 20), ("1g", 1 << 30), ("134217728", 134217728),
    ("512b", 512), (" 2 KB ", 2048),
])
def test_byte_sizes_read_as_spark_reads_them(text: str, size: int) -> None:
    from routing.pipeline._spark_lines import byte_size

    assert byte_size(text) == size


@pytest.mark.parametrize("text", ["", "MB", "1.5g", "12 parsecs"])
def test_a_bad_byte_size_is_refused_naming_it(text: str) -> None:
    from routing.pipeline._spark_lines import byte_size

    with pytest.raises(ValueError, match="not a byte size"):
        byte_size(text)
