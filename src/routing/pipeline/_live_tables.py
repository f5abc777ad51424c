"""The live watcher's output folder, and the ``routing analyze`` tables it adds up to.

The sink (``_live_spark.py``) writes each micro-batch's final rows as
``OUT/<table>/batch-<id>.parquet`` (``sessions`` that ended, ``expiries``,
``route_changes``, ``rejected``) and each name server's status (``_live.LiveReplay.status``)
as ``OUT/status/batch-<id>.jsonl``; a batch Spark runs again after a crash rewrites the same
files with the same rows (written to a hidden name, then renamed: a reader never sees half a
file). `tables_of` adds the latest status of every name server (its ``name_servers`` row,
its ``open`` sessions) and sweeps every topic's route changes as the reference does
(``_reference.sweep_into``): once the stream has consumed a folder, the result equals
`analyze_local` on the same files, row for row. All times are ms.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._answers import Change, answer_of_change
from ._live import FINAL_TABLES
from ._reference import sweep_into
from ._schema import TABLES, Row
from ._store import TableStore

__all__ = ["STATUS_DIR", "batch_name", "read_live", "tables_of", "write_atomic",
           "write_batch_tables", "write_status"]

#: The folder (under the output folder) of the name servers' status files.
STATUS_DIR = "status"


def batch_name(batch_id: int, suffix: str) -> str:
    """``batch-<id>`` zero-padded so that names sort in batch order."""
    return f"batch-{batch_id:010d}{suffix}"


def write_atomic(target: Path, data: bytes) -> None:
    """Write ``data`` to a hidden name beside ``target``, then rename it over ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    hidden = target.with_name(f".{target.name}.tmp")
    with open(hidden, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(hidden, target)


def write_batch_tables(out_dir: Path, batch_id: int, rows: Mapping[str, Sequence[Row]]) -> None:
    """One micro-batch's final rows, one Parquet file per table that has rows. O(rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for name in FINAL_TABLES:
        got = rows.get(name)
        if not got:
            continue
        table = pa.Table.from_pylist([dict(r) for r in got], schema=TABLES[name].arrow_schema())
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        write_atomic(out_dir / name / batch_name(batch_id, ".parquet"),
                     sink.getvalue().to_pybytes())


def write_status(out_dir: Path, batch_id: int, statuses: Mapping[str, Row]) -> None:
    """The status of every name server seen in the micro-batch (``{key: status}``)."""
    if statuses:
        text = "".join(json.dumps({"key": k, "status": s}, sort_keys=True) + "\n"
                       for k, s in sorted(statuses.items()))
        write_atomic(out_dir / STATUS_DIR / batch_name(batch_id, ".jsonl"), text.encode())


def read_live(out_dir: str | os.PathLike[str]
              ) -> tuple[dict[str, list[Row]], dict[str, Row]]:
    """(final rows by table, the latest status of each name server) of an output folder.
    O(rows)."""
    import pyarrow.parquet as pq

    root = Path(out_dir)
    final: dict[str, list[Row]] = {}
    for name in FINAL_TABLES:
        folder = root / name
        parts = sorted(folder.glob("batch-*.parquet")) if folder.is_dir() else []
        final[name] = [r for p in parts for r in pq.read_table(p).to_pylist()]
    statuses: dict[str, Row] = {}
    folder = root / STATUS_DIR
    for part in sorted(folder.glob("batch-*.jsonl")) if folder.is_dir() else []:
        for line in part.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            statuses[doc["key"]] = doc["status"]
    return final, statuses


def tables_of(final: Mapping[str, Iterable[Row]], statuses: Iterable[Mapping[str, Any]], *,
              at: Sequence[int] = ()) -> dict[str, list[Row]]:
    """Every ``routing analyze`` table from the live replay's final rows and the latest
    status of each name server, sorted as `analyze_local` returns them. O(rows log rows)."""
    out = TableStore()
    changes: dict[str, list[Change]] = {}
    groups: dict[tuple[str, ...], tuple[str, ...]] = {}
    for name in FINAL_TABLES:
        for row in final.get(name, ()):
            out.add(name, row)
            if name == "route_changes":
                names = tuple(row["groups"])
                changes.setdefault(row["topic"], []).append((
                    row["at_ms"], row["ns"], row["seq"],
                    answer_of_change(row, groups=groups.setdefault(names, names))))
    spans: dict[str, tuple[int, int]] = {}
    for status in statuses:
        out.extend("sessions", list(status["open_sessions"]))
        for row in status["name_servers"]:
            out.add("name_servers", row)
            spans[row["ns"]] = (row["first_ms"], row["last_ms"])
    sweep_into(out, changes, spans, at)
    return out.tables()
