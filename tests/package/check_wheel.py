"""The package as users get it (run by ``make package-check``, part of ``make test``).

Builds the wheel and the sdist from this checkout, installs the wheel (not editable) with its
``testing`` and ``cli`` extras into a fresh virtual environment outside the checkout, and
checks there that ``import routing``, ``routing --help``, the pytest plugin's fixtures
(autoloaded, no conftest; ``nameserver_on_wire`` answering over TCP, under ``-W error`` and
``--strict-markers``) and ``st.from_type(routing.TopicConfig)`` work; and that the wheel
holds ``py.typed`` and no tests or benchmarks. Exits non-zero with the reason on failure.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PLUGIN_TEST = '''
def test_fixtures_are_autoloaded(fake_nameserver, routing_clock):
    broker = fake_nameserver.broker(name="broker-a", topics=["TopicTest"])
    fake_nameserver.assert_route("TopicTest", brokers=["broker-a"])
    broker.go_quiet()
    routing_clock.advance(200_000)
    fake_nameserver.assert_no_route("TopicTest")
'''

WIRE_TEST = '''
import socket

import pytest

from routing.remoting import FrameDecoder, RemotingCommand, RequestCode, decode_route, encode


@pytest.mark.routing(heartbeat_timeout_ms=10_000)
def test_a_fake_on_the_wire(nameserver_on_wire, nameservers_on_wire):
    ns = nameserver_on_wire
    broker = ns.broker(name="broker-a", topics=["TopicTest"], queues=4)
    host, port = ns.wire.address.rsplit(":", 1)
    request = RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=1,
                              ext_fields={"topic": "TopicTest"})
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(encode(request))
        decoder, frames = FrameDecoder(), []
        while not frames:
            frames = decoder.feed(sock.recv(65536))
    assert decode_route(frames[0].body).queue_datas[0].write_queue_nums == 4
    ns.wire.faults.add("busy", count=1)
    broker.go_quiet()
    ns.tick(15_000)
    ns.assert_no_route("TopicTest")
    ns1, ns2 = nameservers_on_wire(2)
    assert ns1.clock is ns2.clock and ns1.wire.port != ns2.wire.port
'''

FROM_TYPE = '''
from hypothesis import given, settings, strategies as st
import routing

@settings(max_examples=20)
@given(st.from_type(routing.TopicConfig))
def check(value):
    assert isinstance(value, routing.TopicConfig)

check()
print("from_type ok")
'''


def run(cmd: list[str], cwd: Path) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"package check failed: {' '.join(cmd)}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def main() -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="routing-package-") as tmp:
        work = Path(tmp)
        dist = work / "dist"
        run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(dist),
             str(ROOT)], cwd=work)
        wheels = sorted(dist.glob("rocketmq_routing-*.whl"))
        sdists = sorted(dist.glob("rocketmq_routing-*.tar.gz"))
        if len(wheels) != 1 or len(sdists) != 1:
            found = sorted(p.name for p in dist.iterdir())
            sys.exit(f"expected one wheel and one sdist, got {found}")
        names = zipfile.ZipFile(wheels[0]).namelist()
        if "routing/py.typed" not in names:
            sys.exit("routing/py.typed is missing from the wheel")
        stray = [n for n in names if n.startswith(("tests/", "benchmarks/", "docs/"))]
        if stray:
            sys.exit(f"the wheel carries files that are not the package: {stray[:5]}")

        env_dir = work / "venv"
        venv.EnvBuilder(with_pip=True).create(env_dir)
        python = env_dir / "bin" / "python"
        run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             f"{wheels[0]}[testing,cli]"], cwd=work)
        run([str(python), "-c", "import routing, routing.heartbeat, routing.testing; "
             "assert 'site-packages' in routing.__file__, routing.__file__"], cwd=work)
        # one version everywhere: pip's metadata, routing.__version__, routing --version
        versions = run([str(python), "-c", "import importlib.metadata as m, routing; "
                        "print(m.version('rocketmq-routing'), routing.__version__)"],
                       cwd=work).split()
        shown = run([str(env_dir / "bin" / "routing"), "--version"], cwd=work).split()[-1]
        if len(set(versions)) != 1 or shown != versions[0] or wheels[0].name.split("-")[1] \
                != versions[0]:
            sys.exit(f"versions disagree: metadata/__version__ {versions}, routing --version "
                     f"{shown}, wheel {wheels[0].name}")
        helped = run([str(env_dir / "bin" / "routing"), "--help"], cwd=work)
        for command in ("analyze", "broker", "demo", "fake", "route", "serve", "simulate"):
            if command not in helped:
                sys.exit(f"`routing --help` does not list {command}:\n{helped}")
        project = work / "user-project"
        project.mkdir()
        (project / "test_user.py").write_text(PLUGIN_TEST, encoding="utf-8")
        (project / "test_wire.py").write_text(WIRE_TEST, encoding="utf-8")
        run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
            cwd=project)
        run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error",
             "--strict-markers", "test_wire.py"], cwd=project)
        out = run([str(python), "-c", FROM_TYPE], cwd=project)
        if "from_type ok" not in out:
            sys.exit("st.from_type(routing.TopicConfig) did not run")
    print(f"package check: wheel and sdist built, installed outside the checkout, "
          f"import/CLI/plugin/wire fixture/from_type ok ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
