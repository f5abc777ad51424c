"""The report page in a real browser: Debian's headless Chromium driven by Playwright.

Checks what a person would: the page loads with no console error and without the network,
every broker row is there with its address, hovering a session shows its end reason, and an
incident in the table takes the timelines to its place. ``make test`` installs Chromium when
it runs as root; where it is still missing the test skips, except in CI (``CI`` set), where
a missing browser is a failure.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from routing.pipeline import analyze_local
from routing.pipeline._report import write_report
from routing.pipeline._summary import summarize_rows
from routing.pipeline._timeline import broker_rows
from routing.sim import SimConfig, simulate

CHROMIUM = os.environ.get("ROUTING_CHROMIUM", "/usr/bin/chromium")
ADDR_NS = "10.0.0.9:9876"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing (pip install 'rocketmq-routing[browser]')"
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    why = _missing()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the browser test cannot run in CI: {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=ARGS, headless=True,
            viewport={"width": 1600, "height": 1000}, offline=True)
        yield context
        context.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], Any]:
    folder = tmp_path_factory.mktemp("report")
    config = SimConfig(groups=5, slaves=1, nameservers=3, duration_ms=3_600_000, seed=7,
                       faults="heavy")
    result = simulate(config)
    # one name server named as `routing serve` names them (dots and a colon in the page's
    # element ids)
    rows = analyze_local({ns: text.replace('"ns-0"', f'"{ADDR_NS}"').splitlines()
                          for ns, text in result.journal_texts.items()})
    assert ADDR_NS in {r["ns"] for r in rows["name_servers"]}
    summary = summarize_rows(rows)
    assert summary.incidents and any(s["end_reason"] == "expired" for s in rows["sessions"])
    return write_report(rows, summary, folder / "report.html"), rows, summary


def test_the_report_works_in_a_real_browser(browser: Any, report: tuple[Path, Any, Any]
                                            ) -> None:
    path, rows, summary = report
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    servers = sorted({r["ns"] for r in rows["name_servers"]})
    for ns in servers:
        page.wait_for_selector(f'[id="tl-{ns}"] .main-svg')
    assert errors == []

    # every broker row, labelled with group, id and address, on every name server
    expected = [label for _addr, label in broker_rows(rows["sessions"])]
    assert all(":" in label for label in expected)  # an address is in each label
    for ns in servers:
        shown = page.eval_on_selector_all(f'[id="tl-{ns}"] .ytick text',
                                          "ts => ts.map(t => t.textContent)")
        assert shown == expected, ns

    # hovering a session shows its address and how it ended
    session = max((s for s in rows["sessions"] if s["ns"] == servers[0]
                   and s["end_reason"] == "expired"), key=lambda s: s["duration_ms"])
    row = [a for a, _label in broker_rows(rows["sessions"])].index(session["broker_addr"])
    middle = (session["start_ms"] + session["end_ms"]) // 2
    x, y = page.evaluate(
        """([id, x, y]) => { const gd = document.getElementById(id);
             const L = gd._fullLayout, r = gd.getBoundingClientRect();
             return [r.left + L._size.l + L.xaxis.l2p(x), r.top + L._size.t + L.yaxis.l2p(y)]; }""",
        [f"tl-{servers[0]}", middle, row])
    page.mouse.move(x, y)
    page.wait_for_selector(f'[id="tl-{servers[0]}"] .hovertext')
    hover = page.text_content(f'[id="tl-{servers[0]}"] .hovertext') or ""
    assert "end reason expired" in hover and session["broker_addr"] in hover

    # an incident in the table takes every timeline to its place
    link = page.locator("a.incident-link").first
    incident = next(i for i in summary.incidents if i["id"] == int(link.get_attribute(
        "data-incident")))
    link.click()
    page.wait_for_function("document.body.dataset.incident !== undefined")
    for ns in servers:
        lo, hi = page.evaluate(
            """id => { const ax = document.getElementById(id)._fullLayout.xaxis;
                       return ax.range.map(v => ax.r2l(v)); }""", f"tl-{ns}")
        assert lo <= incident["start_ms"] and incident["end_ms"] <= hi, ns
        assert hi - lo < 0.5 * 3_600_000  # zoomed in, not the whole hour
    target = (incident["name_servers"] or servers)[0]
    assert target == ADDR_NS  # the link followed is the id with dots and a colon
    assert page.evaluate("location.hash") == f"#tl-{target}"
    top, height = page.evaluate(f"""[document.getElementById('tl-{target}')
        .getBoundingClientRect().top, window.innerHeight]""")
    assert -1 <= top < height / 2  # scrolled to it: its timeline is in view
    assert page.locator("tr.active a.incident-link").get_attribute("data-incident") == str(
        incident["id"])
    assert errors == []
    page.close()


def test_a_300_broker_page_keeps_every_row_labelled(browser: Any, tmp_path: Path) -> None:
    servers = ["ns-0", "ns-1", "ns-2"]
    sessions = [{"ns": ns, "cluster": "c", "broker_name": f"broker-{g:03d}", "broker_id": b,
                 "broker_addr": f"10.1.{g}.{b + 1}:10911", "start_ms": 0,
                 "end_ms": 3_600_000 if (g + b) % 7 else 1_800_000,
                 "end_reason": "open" if (g + b) % 7 else "expired",
                 "duration_ms": 0, "heartbeats": 120, "last_heartbeat_ms": 0,
                 "largest_gap_ms": 30_000}
                for ns in servers for g in range(150) for b in range(2)]
    rows: dict[str, Any] = {
        "name_servers": [{"ns": ns, "first_ms": 0, "last_ms": 3_600_000, "records": 1,
                          "restarts": 0, "gaps": 0, "rejected": 0} for ns in servers],
        "sessions": sessions, "expiries": [], "route_changes": [], "availability": [],
        "rejected": [],
        "disagreement": [{"topic": "T", "start_ms": 1_800_000, "end_ms": 1_805_000,
                          "out_of_step": ["ns-1"], "open_at_end": False, "variants": 2,
                          "duration_ms": 5_000}]}
    path = write_report(rows, summarize_rows(rows), tmp_path / "report.html")
    assert path.stat().st_size < 10_000_000
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    expected = [label for _addr, label in broker_rows(sessions)]
    assert len(expected) == 300
    for ns in servers:
        page.wait_for_selector(f'[id="tl-{ns}"] .main-svg')
        shown = page.eval_on_selector_all(f'[id="tl-{ns}"] .ytick text',
                                          "ts => ts.map(t => t.textContent)")
        assert shown == expected, ns
        # the labels do not overlap: each row's label sits below the previous one
        tops = page.eval_on_selector_all(
            f'[id="tl-{ns}"] .ytick text', "ts => ts.map(t => t.getBoundingClientRect())"
            ".map(r => [r.top, r.bottom])")
        assert all(b[0] >= a[1] - 0.5 for a, b in itertools.pairwise(tops))
    assert errors == []
    page.close()
