"""Benchmarks for `routing`: the spec §5 operations against a naive port of Java's algorithm.

Run ``python -m benchmarks`` (``make bench``) for the full report, written to
``docs/benchmarks.json`` and ``docs/benchmarks.png``, or ``python -m benchmarks --quick``
(``make bench-quick``) for a smoke run with small sizes and no targets enforced.

Modules:

* `benchmarks.baseline_java_port` — the yardstick: Java 5.x ``RouteInfoManager`` ported line
  by line.
* `benchmarks.bench_core` — the §5 operations, memory and reader/writer concurrency.
* `benchmarks._harness` — timing helpers and the table/JSON/plot writers.
* any other ``benchmarks/bench_*.py`` module with a ``run(quick: bool) -> list[dict]``
  function is discovered and its rows join the report (row keys: see `benchmarks._harness`).
"""
