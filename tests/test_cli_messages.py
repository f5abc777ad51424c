"""What the command line says instead of a traceback (issue 27): a missing extra is named
in one sentence, ``routing broker`` runs with the stdin of systemd, docker or nohup
(``/dev/null``), and bad ``--listen``/``--config`` values name the option. Extras are
made missing in a child process by an import hook, as in a ``[cli]``-only install."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pipeline_scenarios import play
from test_remoting_config import invoke_cli

TIMEOUT_S = 60.0

#: Runs ``routing`` with the top-level packages named in argv[1] (comma-separated) made
#: impossible to import.
_WITHOUT = """
import sys
blocked = set(filter(None, sys.argv.pop(1).split(",")))
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Missing())
sys.argv[0] = "routing"
from routing.cli import main
main()
"""


def routing_without(blocked: str, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _WITHOUT, blocked, *args], text=True,
                          capture_output=True, timeout=TIMEOUT_S,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}, **kw)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("journals")
    ops = [("register", 3, 0, g, 0, g, [0, 1], g % 4, 0, None, False, 4, True)
           for g in range(2)]
    ops += [("advance", 20_000), ("heartbeat", 3, 0, 0), ("advance", 130_000)]
    for name, lines in play(ops, nameservers=2).items():
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


def test_analyze_without_pyspark_names_the_extra(journals: Path, tmp_path: Path) -> None:
    done = routing_without("pyspark", "analyze", str(journals), "--out", str(tmp_path / "o"))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "pyspark is not installed: pip install 'rocketmq-routing[spark]' (or use --local " \
        "to run without Spark)" in done.stderr


def test_analyze_local_report_runs_without_spark(journals: Path, tmp_path: Path) -> None:
    """``--local --report`` needs neither pyspark nor pandas (only pyarrow, for Parquet)."""
    out = tmp_path / "o"
    done = routing_without("pyspark,pandas", "analyze", str(journals), "--out", str(out),
                           "--local", "--report")
    assert done.returncode == 0, done.stderr
    assert (out / "report.html").stat().st_size > 0 and (out / "timeline.png").exists()
    assert (out / "sessions" / "part-00000.parquet").exists()


def test_analyze_local_without_pyarrow_says_what_to_install(journals: Path,
                                                            tmp_path: Path) -> None:
    done = routing_without("pyspark,pandas,pyarrow", "analyze", str(journals), "--out",
                           str(tmp_path / "o"), "--local", "--report")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "Error: --local writes the tables as Parquet with pyarrow, which is not installed: "
        "pip install pyarrow (or 'rocketmq-routing[spark]', which has it)")
    assert not (tmp_path / "o").exists()  # said before anything ran


@pytest.mark.parametrize("stdin", ["devnull", "file"])
def test_broker_runs_with_a_stdin_the_event_loop_cannot_watch(tmp_path: Path,
                                                             stdin: str) -> None:
    """``routing broker ... < /dev/null`` (systemd, docker, nohup) printed an asyncio
    traceback ending in PermissionError (epoll refuses /dev/null and regular files); it
    now runs, and a file of admin commands is read to its end."""
    commands = tmp_path / "commands"
    commands.write_text("status\ncreate Fresh 4\n")
    source = open(os.devnull if stdin == "devnull" else commands, "rb")  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from routing.cli import main; main()", "broker",
             "--namesrv", "127.0.0.1:1", "--name", "broker-a", "--addr", "127.0.0.1:10911",
             "--no-listen"], stdin=source, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    finally:
        source.close()
    watchdog = threading.Timer(TIMEOUT_S, proc.kill)  # a missing line fails, not hangs
    watchdog.start()
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3 if stdin == "file" else 1)]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT_S)
    answers = [json.loads(line) for line in lines if line]
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "PermissionError" not in err, err
    assert answers[0]["event"] == "started"
    assert [a.get("command") for a in answers[1:]] == (
        ["status", "create"] if stdin == "file" else [])
    assert json.loads(out.splitlines()[-1]) == {"event": "stopped"}


# --------------------------------------------------------------------------- --listen, --config


@pytest.mark.parametrize(("args", "option"), [
    (["serve", "--listen", "127.0.0.1:99999"], "--listen"),
    (["serve", "--metrics", "127.0.0.1:70000"], "--metrics"),
    (["broker", "--namesrv", "127.0.0.1:9876;h:123456", "--name", "b", "--addr", "h:1"],
     "--namesrv"),
    (["broker", "--namesrv", "127.0.0.1:9876", "--name", "b", "--addr", "h:65536"], "--addr"),
])
def test_a_bad_address_names_its_option_and_the_ports(args: list[str], option: str) -> None:
    result = invoke_cli(args)
    assert result.exit_code == 2
    assert f"Invalid value for {option}: expected HOST:PORT with a port from 0 to 65535, " \
        "got '" in result.output


def test_a_port_in_use_is_said_once_and_nothing_stopped(tmp_path: Path) -> None:
    """Before, the server logged "stopped" for a server that never started and the error
    was asyncio's "[Errno 98] error while attempting to bind on address ..."."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke_cli(["serve", "--listen", f"127.0.0.1:{port}", "--log-json",
                             "--journal", str(tmp_path / "J")])
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        f"Error: cannot listen on 127.0.0.1:{port}: address already in use")
    events = [json.loads(line)["event"] for line in result.output.splitlines()
              if line.startswith("{")]
    assert "listen_failed" in events and "stopped" not in events and "listening" not in events
    assert list((tmp_path / "J").iterdir()) == []  # no journal of a run that never was


def _listening_port(args: list[str]) -> int:
    """Start ``routing serve ARGS --log-json``, return the port it listens on, stop it."""
    proc = subprocess.Popen([sys.executable, "-c", "from routing.cli import main; main()",
                             "serve", "--log-json", *args], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    watchdog = threading.Timer(TIMEOUT_S, proc.kill)
    watchdog.start()
    try:
        assert proc.stderr is not None
        event: dict[str, object] = {}
        while event.get("event") != "listening":
            line = proc.stderr.readline()
            assert line, "the server exited early"
            event = json.loads(line)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=TIMEOUT_S) == 0
        return int(str(event["port"]))
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT_S)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_listen_port_in_the_config_file_is_used_unless_listen_is_given(tmp_path: Path) -> None:
    """Java's ``listenPort``/``bindAddress`` in ``--config`` were kept and silently ignored
    (the server listened on 9876); they now say where to listen, and ``--listen`` on the
    command line wins over them."""
    in_file, on_command_line = _free_port(), _free_port()
    config = tmp_path / "namesrv.properties"
    config.write_text(f"bindAddress=127.0.0.1\nlistenPort={in_file}\n")
    assert _listening_port(["--config", str(config)]) == in_file
    assert _listening_port(["--config", str(config), "--listen",
                            f"127.0.0.1:{on_command_line}"]) == on_command_line
    config.write_text("listenPort=99999\n")
    result = invoke_cli(["serve", "--config", str(config)])
    assert result.exit_code == 2
    assert f"Invalid value for --config: listenPort=99999 in {config}: expected a port from " \
        "0 to 65535" in result.output


# --------------------------------------------------------------------------- skipped files


def test_a_pretty_printed_json_file_in_a_folder_is_skipped_and_listed(journals: Path,
                                                                      tmp_path: Path) -> None:
    """docs/pipeline.md: a folder's file that is not a journal by name (the ``summary.json``
    that ``routing simulate --out`` writes) is skipped and listed in ``rejected`` with stage
    ``skipped``. Before, the table was empty and stderr called the valid, pretty-printed
    JSON "not JSON"."""
    import shutil

    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from routing.cli._analyze import analyze_command

    folder = tmp_path / "sim"
    shutil.copytree(journals, folder)
    (folder / "summary.json").write_text(json.dumps({"groups": 2, "faults": []}, indent=1))
    out = tmp_path / "tables"
    result = CliRunner().invoke(analyze_command, [str(folder), "--out", str(out), "--local"])
    assert result.exit_code == 0, result.output
    assert f"skipped {folder / 'summary.json'}: not a journal: one JSON document over several " \
        "lines (a journal has one JSON object per line)" in result.stderr
    assert "not JSON" not in result.stderr
    rows = pq.read_table(out / "rejected").to_pylist()
    assert [(Path(r["source"]).name, r["line"], r["stage"]) for r in rows] == [
        ("summary.json", 0, "skipped")]
    (row,) = rows
    assert row["reason"].startswith("not a journal file name")
