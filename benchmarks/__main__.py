"""``python -m benchmarks [--quick] [--out DIR]``: run every suite and write the report.

The core suite (`benchmarks.bench_core`) always runs. Every other ``benchmarks/bench_*.py``
module that defines ``run(quick: bool) -> list[dict]`` is imported and run after it; a
module that is missing is simply not there, and one that fails is reported (the run goes on,
and the exit status is 1).

Outputs: a rich table on stdout, ``<out>/benchmarks.json`` and ``<out>/benchmarks.png``.
``--out`` defaults to ``docs/`` for a full run and to ``build/benchmarks-quick/`` for
``--quick``, so a smoke run never overwrites the published numbers. ``--core-only`` runs the
core suite alone and, where the report exists, keeps its other suites' rows.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from . import _harness as h
from . import bench_core

ROOT = Path(__file__).resolve().parent.parent


def discover() -> list[str]:
    """Names of the optional ``bench_*`` modules beside this one, sorted."""
    here = Path(__file__).resolve().parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)])
                  if m.name.startswith("bench_") and m.name != "bench_core")


def run_optional(name: str, quick: bool) -> tuple[list[h.Row], str | None]:
    """Import ``benchmarks.<name>`` and call its ``run(quick)``: (rows, error text or None)."""
    try:
        module = importlib.import_module(f"{__package__}.{name}")
        run = getattr(module, "run", None)
        if not callable(run):
            return [], None
        rows = list(run(quick))
        for row in rows:
            row.setdefault("suite", name.removeprefix("bench_"))
        return rows, None
    except Exception:
        return [], traceback.format_exc()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; 0 on success, 1 if an optional module failed."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few iterations (a smoke run, ~30 s)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where to write benchmarks.json and benchmarks.png")
    parser.add_argument("--core-only", action="store_true",
                        help="skip the optional bench_* modules")
    args = parser.parse_args(argv)
    out_dir: Path = args.out or (ROOT / ("build/benchmarks-quick" if args.quick else "docs"))
    started = time.perf_counter()
    machine = h.machine_info()
    print(f"machine: {machine}", flush=True)

    core = bench_core.run_core(args.quick, log=lambda line: print(line, flush=True))
    rows: list[h.Row] = list(core.rows)
    errors: dict[str, str] = {}
    modules: list[str] = []
    if not args.core_only:
        for name in discover():
            t0 = time.perf_counter()
            extra, error = run_optional(name, args.quick)
            modules.append(name)
            rows.extend(extra)
            if error:
                errors[name] = error
                print(f"{name}: FAILED\n{error}", file=sys.stderr, flush=True)
            else:
                print(f"{name}: {len(extra)} rows, {time.perf_counter() - t0:.1f} s", flush=True)

    elapsed = time.perf_counter() - started
    command = "python -m benchmarks" + (" --quick" if args.quick else "")
    h.print_table(rows, f"routing vs the naive Java port ({command})")
    print_extras(core, quick=args.quick)
    document: dict[str, Any] = {
        "command": command, "quick": args.quick, "machine": machine,
        "elapsed_s": round(elapsed, 1), "modules": ["bench_core", *modules],
        "rows": rows, "targets": core.targets, "memory": core.memory,
        "concurrency": core.concurrency, "profiles": core.profiles, "errors": errors,
    }
    machine["loadavg_1m_end"] = h.machine_info()["loadavg_1m"]
    if args.core_only:
        keep_other_suites(out_dir / "benchmarks.json", document)
        rows = document["rows"]
    h.write_json(out_dir / "benchmarks.json", document)
    plotted = h.write_plot(out_dir / "benchmarks.png", rows,
                           f"cost per call vs size ({machine['nproc']} cores, "
                           f"Python {machine['python']})")
    if not args.quick and args.out is None and h.replace_block(
            ROOT / "docs" / "performance.md", "bench:core", bench_core.render_markdown(document)):
        print("updated the generated section of docs/performance.md")
    print(f"wrote {out_dir / 'benchmarks.json'}"
          + (f" and {out_dir / 'benchmarks.png'}" if plotted else "") + f" in {elapsed:.0f} s")
    return 1 if errors else 0


def keep_other_suites(path: Path, document: dict[str, Any]) -> None:
    """``--core-only`` refreshes the core suite in a report that exists: the rows of the
    other suites already in ``path`` are kept (and their modules listed), so publishing the
    core numbers does not drop, say, the pipeline's 10 M rows published with
    ``bench_pipeline --publish``. The machine and elapsed time are this run's."""
    if not path.exists():
        return
    old = json.loads(path.read_text())
    others = [r for r in old.get("rows", []) if r.get("suite") != "core"]
    document["rows"] = document["rows"] + others
    document["modules"] = ["bench_core", *(m for m in old.get("modules", ())
                                           if m != "bench_core")]
    document["command"] = "python -m benchmarks --core-only (other suites: earlier runs)"


def print_extras(core: bench_core.CoreReport, *, quick: bool = False) -> None:
    """Targets, memory and concurrency, as plain lines. A quick run uses toy sizes and
    budgets, so its target lines are printed as "not judged"."""
    print("\nspec §5 targets" + (" (quick run: sizes and budgets too small to judge; "
                                  "run `make bench`)" if quick else "") + ":")
    for t in core.targets:
        verdict = ("not judged" if quick else "info" if t["met"] is None
                   else "met" if t["met"] else "MISSED")
        print(f"  [{verdict}] {t['target']}: {t['requirement']}"
              f" — measured {t['measured']}")
    mem = core.memory
    if mem:
        print(f"\nmemory (tracemalloc, {mem['brokers']:,} brokers / {mem['rows']:,} rows):")
        for side in ("routing", "baseline"):
            m = mem[side]
            print(f"  {side:8s} {m['bytes_per_broker']:8.0f} B per broker"
                  f" {m['bytes_per_row']:8.0f} B per (topic, group) row")
    conc = core.concurrency
    if conc:
        print(f"\npickup_route, 4 readers + 1 writer ({conc['topics_in_total']:,} topics):")
        for side in ("routing", "baseline"):
            c = conc[side]
            print(f"  {side:8s} single thread {h.fmt_rate(c['single_thread_pickups_per_s'])}/s;"
                  f" 4 readers {h.fmt_rate(c['reader_pickups_per_s'])}/s in total"
                  f" while the writer did {h.fmt_rate(c['writer_registers_per_s'])} registers/s")


if __name__ == "__main__":
    sys.exit(main())
