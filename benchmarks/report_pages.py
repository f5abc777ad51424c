"""The report page at the demo's size and at 300 brokers: build time, file size, and a
screenshot of each in headless Chromium (what ``docs/pipeline.md`` shows).

    .venv/bin/python -m benchmarks.report_pages [--out docs] [--groups 30 150]

Simulates (6 h, default faults, 3 name servers, a master and a slave per group), analyzes
with the reference (`analyze_local`), writes ``report.html`` and ``timeline.png`` per size
under a temporary folder, prints sizes and times, and saves ``report-<N>-brokers.png``
(and the PNG timeline's top, ``timeline-<N>-brokers.png``) into ``--out``. Needs the
``browser`` extra and Debian's ``chromium``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from routing.pipeline import analyze_local
from routing.pipeline._report import write_report
from routing.pipeline._summary import summarize_rows
from routing.pipeline._timeline import draw_timeline
from routing.sim import SimConfig, simulate

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _shoot(page_path: Path, shot: Path, click_incident: bool = False) -> list[str]:
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        context = p.chromium.launch_persistent_context(
            profile, executable_path="/usr/bin/chromium", args=ARGS, headless=True,
            viewport={"width": 1600, "height": 1000}, offline=True)
        page = context.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(page_path.as_uri())
        page.wait_for_selector("#tl-ns-0 .main-svg")
        if click_incident:
            page.locator("a.incident-link").first.click()
            page.wait_for_function("document.body.dataset.incident !== undefined")
            page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(shot))
        context.close()
    return errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs"))
    parser.add_argument("--groups", type=int, nargs="+", default=[30, 150])
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        for groups in args.groups:
            brokers = 2 * groups
            folder = Path(work) / f"g{groups}"
            config = SimConfig(groups=groups, slaves=1, nameservers=3,
                               duration_ms=6 * 3_600_000, seed=2024, faults="default")
            started = time.monotonic()
            result = simulate(config, out_dir=folder / "journals")
            simulated = time.monotonic() - started
            started = time.monotonic()
            rows = analyze_local(folder / "journals")
            analyzed = time.monotonic() - started
            started = time.monotonic()
            summary = summarize_rows(rows)
            summarized = time.monotonic() - started
            started = time.monotonic()
            page = write_report(rows, summary, folder / "report.html",
                                title=f"routing report: {groups} broker groups ({brokers} "
                                      f"brokers), 3 name servers, 6 simulated hours")
            reported = time.monotonic() - started
            started = time.monotonic()
            png = draw_timeline(rows["sessions"], rows["disagreement"], rows["name_servers"],
                                folder / "timeline.png")
            drawn = time.monotonic() - started
            errors = _shoot(page, args.out / f"report-{brokers}-brokers.png",
                            click_incident=groups == args.groups[0])
            lines = sum(result.stats.journal_lines.values())
            print(f"{brokers} brokers, {lines:,} journal lines, "
                  f"{len(rows['sessions']):,} sessions, {len(summary.incidents)} incidents: "
                  f"simulate {simulated:.1f} s, analyze_local {analyzed:.1f} s, summary "
                  f"{summarized:.2f} s, report {reported:.2f} s "
                  f"({page.stat().st_size / 1e6:.2f} MB), PNG {drawn:.1f} s "
                  f"({png.stat().st_size / 1e6:.2f} MB); browser console errors: {errors}")
            from PIL import Image

            with Image.open(png) as image:
                image.crop((0, 0, image.width, min(image.height, 1100))).save(
                    args.out / f"timeline-{brokers}-brokers.png")


if __name__ == "__main__":
    main()
