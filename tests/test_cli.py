"""The `routing` command: lazy subcommands and the Spark-free scripted demo."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from routing.cli import main


def test_help_lists_every_command_without_importing_spark():
    code = ("import sys\nfrom click.testing import CliRunner\nfrom routing.cli import main\n"
            "out = CliRunner().invoke(main, ['--help']).output\n"
            "print(out)\nprint('pyspark' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    for command in ("analyze", "broker", "demo", "serve", "simulate"):
        assert command in out
    assert out.strip().endswith("False")


def test_unknown_command_is_a_usage_error():
    result = CliRunner().invoke(main, ["nope"])
    assert result.exit_code == 2
    assert "No such command" in result.output


def test_scripted_demo_shows_expiry_at_the_first_scan_after_the_boundary():
    result = CliRunner().invoke(main, ["demo", "--scripted"], terminal_width=200)
    assert result.exit_code == 0, result.output
    # last heartbeat 30 000 + timeout 120 000 = 150 000: alive then, found by the 155 000 scan
    assert "t=155000 ms: expired broker-a#0 10.0.0.1:10911" in result.output
    assert "check_invariants(): ok" in result.output
    assert "payments" in result.output.split("broker-b unregistered")[0]


def test_python_dash_m_routing_cli_runs_the_command() -> None:
    """``python -m routing.cli`` is the ``routing`` command (its help lists the commands)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "routing.cli", "--help"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "analyze" in done.stdout and "watch" in done.stdout
