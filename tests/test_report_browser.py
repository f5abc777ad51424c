"""The report page in a real browser: Debian's headless Chromium driven by Playwright.

Checks what a person would: the page loads with no console error and without the network,
every broker row is there with its address, every session of the ``sessions`` table has its
bar where its times are, hovering a session shows its end reason, and an incident in the
table takes the timelines to its place. ``make test`` installs Chromium when
it runs as root; where it is still missing the test skips, except in CI (``CI`` set), where
a missing browser is a failure.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from routing.pipeline import analyze_local
from routing.pipeline._report import axis_date, write_report
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


def _bar_count(page: Any, ns: str) -> int:
    """Bars drawn with a width on name server ``ns``'s timeline."""
    return int(page.eval_on_selector_all(
        f'[id="tl-{ns}"] .barlayer .point path',
        "ps => ps.filter(p => p.getBBox().width > 0).length"))


def _unmatched_sessions(page: Any, ns: str, sessions: list[Any],
                        rows: list[tuple[str, str]]) -> list[Any]:
    """The ``sessions`` of ``ns`` that have no bar drawn on their broker's row, inside the
    plot, from their start to their end (to a pixel). Each bar matches one session."""
    row_of = {addr: i for i, (addr, _label) in enumerate(rows)}
    bars, expected, width = page.evaluate(
        """([id, spans]) => { const gd = document.getElementById(id);
             const L = gd._fullLayout;
             const bars = [...gd.querySelectorAll('.barlayer .point path')]
               .map(p => p.getBBox()).filter(b => b.width > 0)
               .map(b => [b.x, b.x + b.width, b.y + b.height / 2]);
             const want = spans.map(([s, e, row]) =>
               [L.xaxis.l2p(s), L.xaxis.l2p(e), L.yaxis.l2p(row)]);
             return [bars, want, L.xaxis._length]; }""",
        [f"tl-{ns}", [[s["start_ms"], s["end_ms"], row_of[s["broker_addr"]]]
                      for s in sessions]])
    free = list(bars)
    missing = []
    for session, (x0, x1, y) in zip(sessions, expected, strict=True):
        assert -1 <= x0 <= x1 <= width + 1  # the session lies inside the plot
        hit = next((b for b in free if abs(b[0] - x0) <= 1.5 and abs(b[1] - x1) <= 1.5
                    and abs(b[2] - y) <= 2), None)
        if hit is None:
            missing.append(session)
        else:
            free.remove(hit)
    return missing


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

    # every session in the table has its bar, on its row, where its times are: none lost
    # (a start of 1000-9999 ms was once read by plotly as a year and drawn off the page)
    assert any(1_000 <= s["start_ms"] < 10_000 for s in rows["sessions"])
    for ns in servers:
        mine = [s for s in rows["sessions"] if s["ns"] == ns]
        assert _unmatched_sessions(page, ns, mine, broker_rows(rows["sessions"])) == [], ns
        assert _bar_count(page, ns) == len(mine), ns

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


def test_every_instant_on_the_time_axes_is_a_date_not_a_number() -> None:
    """plotly.js reads a number of 1000-9999 on a date axis as a year: no instant may be a
    number (without a browser: the figures' data)."""
    import re

    from routing.pipeline._report import _count_figure, _timeline_figure

    assert axis_date(3_169) == "1970-01-01 00:00:03.169"
    assert axis_date(1_764_000_000_000) == "2025-11-24 16:00:00.000"
    assert axis_date(-500) == "1969-12-31 23:59:59.500"
    bars = [{"ns": "ns-0", "broker_addr": "10.0.0.1:10911", "start_ms": 1_000 * k,
             "end_ms": 1_000 * k + 5_000, "end_reason": "expired", "merged": 1,
             "heartbeats": 1} for k in range(1, 10)]
    incident = {"id": 1, "start_ms": 2_000, "end_ms": 4_000}
    timeline = _timeline_figure("ns-0", bars, [("10.0.0.1:10911", "b #0 10.0.0.1:10911")],
                                [incident], 1_000, 9_999)
    count = _count_figure([{"start_ms": 1_500, "end_ms": 9_000}], 1_000, 9_999)
    instants = [*timeline.data[0].base, *timeline.data[1].x, *count.data[0].x,
                *(s[k] for s in timeline.layout.shapes for k in ("x0", "x1")),
                *timeline.layout.xaxis.range, *count.layout.xaxis.range]
    assert len(instants) == 9 + 9 + 4 + 4 + 2 + 2
    date = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$")
    assert all(isinstance(t, str) and date.match(t) for t in instants), instants
    assert list(timeline.data[0].base) == [axis_date(b["start_ms"]) for b in bars]


@given(st.integers(-10**12, 4 * 10**12))
def test_axis_dates_are_the_utc_date_times_of_the_milliseconds(ms: int) -> None:
    moment = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)
    assert axis_date(ms) == f"{moment:%Y-%m-%d %H:%M:%S}.{ms % 1000:03d}"
