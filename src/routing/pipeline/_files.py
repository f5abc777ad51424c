"""The read stage in this process: which files are journals, and their lines in reading order.

`expand_local` turns paths into inputs (a folder's journals by name, other files skipped);
`check_inputs` checks them before any work starts (in a few milliseconds per file: it reads
the first line of each, so ``routing analyze`` refuses a missing folder or a folder without
journals before it starts Spark, which takes seconds). A text file is a journal when its
first non-empty line is a JSON object with a ``journal`` header key or a name server and
sequence number (the journal's own lines, see ``docs/journal.md``); other files (notes,
CSV, binaries) are skipped with the reason. Parquet copies are recognised by their
``text`` column. URIs (``hdfs://``, ``s3a://``, …) are passed on unchecked: only Spark
reads them (``_spark_lines.py``).

`survey` looks at the inputs Spark is about to read (their first lines, sizes, gzip ends)
so that both engines report whole files alike and Spark can read one file per task.

`lines_of` is the reference's read stage: every line as a `Line` ``(source, line number,
text, raw, key)`` in reading order, split on ``\n`` only (as Spark splits), gzip
recognised by its magic bytes. Parquet input (``routing analyze --to-parquet``) stores the
lines themselves with their original file name and line number (`LINES_SCHEMA_DDL`), so a
Parquet copy is read with the same rules and reports the same places. `line_key` names
the name server a line belongs to, the way the reader itself looks it up.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeAlias

import attrs

from ..journal import (
    JournalEntry,
    JournalHeader,
    JournalRecord,
    JournalSnapshot,
    open_journal_bytes,
)
from ._errors import InputError, JournalNotFound, SourcesTypeError
from ._schema import Row

__all__ = ["EMPTY_REASON", "JOURNAL_SUFFIXES", "LINES_SCHEMA_DDL", "SKIPPED_REASON",
           "InputCheck", "InputFile", "Line", "Sources", "Survey", "check_inputs",
           "decode_line", "expand_local", "file_row", "first_name", "has_scheme", "is_parquet_path",
           "iter_lines", "kind_in_folder", "line_key", "lines_of", "raw_lines", "survey",
           "truncated_reason"]

#: Journal paths (files or folders; JSON Lines, gzip or Parquet copies), in-memory journals
#: as {source name: lines}, or decoded entries (`JournalHeader`/`JournalRecord`).
Sources: TypeAlias = (
    str | os.PathLike[str] | Mapping[str, Iterable[str]]
    | Sequence[str | os.PathLike[str]] | Iterable[JournalEntry]
)
#: One journal line on its way to the reader: (source, line number, text, raw, key).
#: ``raw`` holds the bytes of a line that is not UTF-8 (then ``text`` is None: the reader
#: rejects it); ``key`` is the name server the line was grouped under (Spark's read tasks),
#: None when lines are not grouped. Both engines feed these to ``_read_replay.py``.
Line: TypeAlias = tuple[str, int, str | None, bytes | None, str | None]

# --------------------------------------------------------------------------- files

#: The columns of a Parquet copy of journals.
LINES_SCHEMA_DDL = "source string, source_index long, line long, text string"

#: Inside a folder, only files whose names end in one of these are read as journals (plus
#: Parquet copies); every other file (``summary.json``, ``timeline.png``, ``NOTES.txt``) is
#: skipped and listed in ``rejected`` with stage ``skipped``. A file named explicitly is
#: always read.
JOURNAL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")


@attrs.frozen(kw_only=True)
class InputFile:
    """One input: a JSON Lines file (``text``, gzip recognised), a Parquet copy
    (``parquet``, a file or a folder), or a file of a folder that is not a journal
    (``skipped``). ``path`` is what was given (or found inside a given folder); it is also
    the ``source`` of its lines."""

    kind: str
    path: str


def file_row(source: str, line: int, stage: str, reason: str) -> Row:
    """A ``rejected`` row about a whole file (skipped, empty, or cut short)."""
    return {"source": source, "line": line, "stage": stage, "reason": reason, "ns": None,
            "seq": None, "text": None}


SKIPPED_REASON = ("not a journal file name (" + ", ".join(f"*{x}" for x in JOURNAL_SUFFIXES)
                  + ", *.parquet): skipped")
EMPTY_REASON = "empty journal file: no lines"


def kind_in_folder(name: str) -> str:
    if is_parquet_path(name):
        return "parquet"
    return "text" if name.endswith(JOURNAL_SUFFIXES) else "skipped"


def is_parquet_path(path: str) -> bool:
    return path.endswith(".parquet") or path.endswith(".parq")


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def expand_local(paths: Sequence[str | os.PathLike[str]]) -> list[InputFile]:
    """Local paths to inputs, in the order given; a folder's files are sorted by name,
    hidden and ``_``-prefixed names ignored, other names than `JOURNAL_SUFFIXES` skipped
    (kind ``skipped``). A folder holding ``*.parquet`` files is one Parquet input. Raises
    FileNotFoundError for a missing path."""
    found: list[InputFile] = []
    for given in paths:
        path = os.fspath(given)
        p = Path(path)
        if not p.exists():
            raise JournalNotFound(f"no such journal file or folder: {path}")
        if p.is_file():
            found.append(InputFile(kind="parquet" if is_parquet_path(path) else "text",
                                   path=path))
            continue
        children = sorted(c for c in p.iterdir() if not _hidden(c.name))
        if any(c.is_file() and is_parquet_path(c.name) for c in children):
            found.append(InputFile(kind="parquet", path=path))
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not _hidden(d))
            for name in sorted(files):
                if not _hidden(name):
                    found.append(InputFile(kind=kind_in_folder(name),
                                           path=os.path.join(root, name)))
    return found


# --------------------------------------------------------------------------- lines


def line_key(text: str) -> tuple[str | None, int | None]:
    """(name server, sequence number) of a line as the reader would look them up, or None
    where the line has none (it will be rejected without touching reader state)."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(doc, dict):
        return None, None
    ns = doc.get("nameserver") if "journal" in doc else doc.get("ns")
    seq = doc.get("seq")
    return (ns if isinstance(ns, str) else None,
            seq if isinstance(seq, int) and not isinstance(seq, bool) else None)


def iter_lines(inputs: Sequence[InputFile], notes: list[Row] | None = None
               ) -> Iterator[Line]:
    """Every line of ``inputs`` as a `Line` (its text decoded, no key), in reading order.
    Parquet copies are read with pyarrow, ordered by (source index, line). Rows about whole
    files (skipped, empty, a gzip file cut short) are appended to ``notes``. O(lines), one
    line held at a time (a Parquet copy is read whole)."""
    notes = notes if notes is not None else []
    for item in inputs:
        if item.kind == "skipped":
            notes.append(file_row(item.path, 0, "skipped", SKIPPED_REASON))
        elif item.kind == "text":
            yield from _text_lines(item.path, notes)
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(item.path, columns=["source", "source_index", "line", "text"])
            rows = sorted(zip(table.column("source_index").to_pylist(),
                              table.column("line").to_pylist(),
                              table.column("source").to_pylist(),
                              table.column("text").to_pylist(), strict=True))
            for _index, number, source, text in rows:
                yield source, number, text, None, None


def decode_line(raw: bytes) -> str:
    """A line's text; bytes that are not UTF-8 become lone surrogates (``surrogateescape``)
    so that the reader rejects the line as "not valid UTF-8" (its ``text`` then shows
    U+FFFD), on both engines."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="surrogateescape")


def _text_lines(path: str, notes: list[Row]) -> Iterator[Line]:
    """Lines split on ``\\n`` only (as Spark does), gzip recognised by its magic bytes.
    A file without lines, and a gzip file that ends early (the lines read so far are
    kept), add a row to ``notes``."""
    import zlib

    number = 0
    try:
        for number, text, raw in raw_lines(path):
            yield path, number, text if text is not None else decode_line(raw or b""), None, None
    except (EOFError, OSError, zlib.error) as exc:
        notes.append(file_row(path, number + 1, "read", truncated_reason(exc)))
        return
    if number == 0:
        notes.append(file_row(path, 0, "read", EMPTY_REASON))


def raw_lines(path: str) -> Iterator[tuple[int, str | None, bytes | None]]:
    """``(number, text, None)`` per line of a local journal file, or ``(number, None, raw)``
    for a line that is not UTF-8; split on ``\n`` only (as Spark does), gzip recognised by
    its magic bytes. A damaged gzip file raises where it ends."""
    with open_journal_bytes(path) as handle:
        for number, raw in enumerate(handle, start=1):
            raw = raw.rstrip(b"\n")
            try:
                yield number, raw.decode("utf-8"), None
            except UnicodeDecodeError:
                yield number, None, raw


def truncated_reason(exc: BaseException) -> str:
    """The ``rejected`` reason for a compressed file that cannot be read to its end."""
    return (f"gzip file cut short or damaged ({type(exc).__name__}: {exc}): the lines "
            f"from here to the end of the file are lost")


def lines_of(sources: Sources, notes: list[Row] | None = None
             ) -> Iterable[Line | JournalEntry]:
    """The reference's read stage: every line of ``sources`` as a `Line` in reading order,
    or the entries themselves when given decoded entries. Rows about whole files (skipped,
    empty, cut short) go to ``notes``. Raises `JournalNotFound` for a missing path and
    `SourcesTypeError` for anything else than `Sources`. O(lines), lazily."""
    notes = notes if notes is not None else []
    if isinstance(sources, str | os.PathLike):
        return iter_lines(expand_local([sources]), notes)
    if isinstance(sources, Mapping):
        return ((name, number, text, None, None) for name, lines in sources.items()
                for number, text in enumerate(lines, start=1))
    items = list(sources)
    if all(isinstance(i, JournalHeader | JournalRecord | JournalSnapshot) for i in items) and items:
        return [i for i in items if isinstance(i, JournalHeader | JournalRecord | JournalSnapshot)]
    paths: list[str | os.PathLike[str]] = []
    for i in items:
        if not isinstance(i, str | os.PathLike):
            raise SourcesTypeError(f"expected journal paths, {{name: lines}} or journal "
                                   f"entries, got {i!r:.80}")
        paths.append(i)
    return iter_lines(expand_local(paths), notes)


# --------------------------------------------------------------------------- surveyed


def has_scheme(path: str) -> bool:
    """Whether ``path`` is a URI for Spark to read (``hdfs:``, ``s3a:``, ``file://`` …)
    rather than a local path this process reads too. O(len)."""
    return "://" in path or path.startswith(("hdfs:", "s3a:", "s3:", "gs:", "abfs:", "wasb:"))


@attrs.frozen(kw_only=True)
class Survey:
    """What the inputs hold, seen before Spark reads them (`survey`). By input number:
    ``texts`` the files Spark reads as text, ``parquets`` the Parquet copies, ``damaged``
    the readable lines of a gzip file cut short (read here, as the reference reads them);
    ``notes`` rows about whole files (skipped, empty, cut short); ``first_names`` the name
    servers the local files' first lines name (None when an input is a URI or a Parquet
    copy); ``whole`` each text file's first name server when every text input is a local
    file, none damaged, and those names all differ (the recorder's layout: one journal
    file per name server), else None. A frozen value."""

    texts: Mapping[int, str]
    parquets: Mapping[int, str]
    damaged: Mapping[int, list[Line]]
    notes: tuple[Row, ...]
    first_names: frozenset[str] | None
    whole: Mapping[int, str] | None


def survey(inputs: Sequence[InputFile]) -> Survey:
    """Look at ``inputs`` as Spark will read them: reads the first line of each local file
    and decompresses each local gzip file to its end (C speed, about 0.3 s per 100 MB).
    O(files + gzip bytes)."""
    notes: list[Row] = []
    texts: dict[int, str] = {}
    parquets: dict[int, str] = {}
    damaged: dict[int, list[Line]] = {}
    names: set[str] | None = set()
    firsts: dict[int, str | None] | None = {}
    for i, item in enumerate(inputs):
        if item.kind == "skipped":
            notes.append(file_row(item.path, 0, "skipped", SKIPPED_REASON))
            continue
        if item.kind == "parquet":
            names = firsts = None
            parquets[i] = item.path
            continue
        if has_scheme(item.path):
            names = firsts = None
            texts[i] = item.path
            continue
        if os.path.getsize(item.path) == 0:
            notes.append(file_row(item.path, 0, "read", EMPTY_REASON))
            continue
        name = first_name(item.path)
        if names is not None and name is not None:
            names.add(name)
        if firsts is not None:
            firsts[i] = name
        if item.path.endswith(".gz"):
            size, error = _gzip_state(item.path)
            if error is None and size == 0:
                notes.append(file_row(item.path, 0, "read", EMPTY_REASON))
                continue
            if error is not None:  # read what can be read, as the reference does
                firsts = None
                got = list(iter_lines([item], notes))
                if got:
                    damaged[i] = got
                continue
        texts[i] = item.path
    whole: dict[int, str] | None = None
    if firsts is not None and all(n is not None for n in firsts.values()):
        named = {i: n for i, n in firsts.items() if n is not None}
        if len(set(named.values())) == len(named):
            whole = named
    return Survey(texts=texts, parquets=parquets, damaged=damaged, notes=tuple(notes),
                  first_names=None if names is None else frozenset(names), whole=whole)


def first_name(path: str) -> str | None:
    """The name server of a local file's first line (a cheap hint for spreading tasks)."""
    try:
        with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as handle:
            first = handle.readline(1 << 20)
        return line_key(first.decode("utf-8", "replace"))[0]
    except (OSError, EOFError):
        return None


def _gzip_state(path: str) -> tuple[int, BaseException | None]:
    """(uncompressed bytes, error) of a local gzip file, decompressed in streaming."""
    import zlib

    size = 0
    try:
        with gzip.open(path, "rb") as handle:
            while chunk := handle.read(1 << 22):
                size += len(chunk)
    except (EOFError, OSError, zlib.error) as exc:
        return size, exc
    return size, None


# --------------------------------------------------------------------------- checked first


@attrs.frozen(kw_only=True)
class InputCheck:
    """What `check_inputs` found. ``journals``: the inputs to read (local files and Parquet
    copies, in reading order); ``skipped``: (path, reason) of files that are not journals;
    ``remote``: URIs passed on unchecked; ``total_bytes``: the size of the local journals
    on disk. A frozen value: O(1) to read."""

    journals: tuple[InputFile, ...]
    skipped: tuple[tuple[str, str], ...]
    remote: tuple[str, ...]
    total_bytes: int
    #: every skipped file is a folder's file with a name that is not a journal's, which the
    #: readers skip too, listing it in ``rejected`` (stage ``skipped``): the paths as given
    #: can then be read as they are
    skipped_by_name_only: bool = True

    def paths(self) -> list[str]:
        """What to give the readers: the journals and the URIs. O(files)."""
        return [f.path for f in self.journals] + list(self.remote)

    def counted_lines(self, report: Callable[[int], object]
                      ) -> dict[str, Iterator[str]] | None:
        """The journals as ``{path: lines}`` for `analyze_local`, whose reading calls
        ``report(bytes)`` with the bytes of the journals read so far (of `total_bytes`),
        after every line; None when a Parquet copy or a URI is among them (then read the
        paths themselves). The lines and their numbers are those of the paths. O(1) until
        read; then O(1) a line besides ``report``."""
        if any(f.kind != "text" for f in self.journals):
            return None
        done = [0]

        def lines(item: InputFile) -> Iterator[str]:
            size = os.path.getsize(item.path)
            start = done[0]
            read = 0
            for _source, _number, text, _raw, _key in iter_lines([item]):
                read += len(text or "") + 1
                report(start + min(read, size))
                yield text or ""
            done[0] = start + size
            report(done[0])

        return {f.path: lines(f) for f in self.journals}


def _is_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _first_line(path: str) -> bytes:
    with open_journal_bytes(path) as handle:
        for _ in range(1000):
            raw = handle.readline(1 << 20)
            if not raw:
                return b""
            if raw.strip():
                return raw.strip()
    return b""


def _why_not_journal(path: str) -> str | None:
    try:
        line = _first_line(path)
    except (OSError, EOFError) as exc:
        return f"unreadable: {exc.strerror or exc}" if isinstance(exc, OSError) \
            else f"unreadable: {exc}"
    if not line:
        return None  # an empty journal: harmless, read as nothing
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError):
        if _one_json_document(path):
            return ("not a journal: one JSON document over several lines (a journal has one "
                    "JSON object per line)")
        return "not a journal: the first line is not JSON"
    if not isinstance(doc, dict) or not ("journal" in doc or ("ns" in doc and "seq" in doc)):
        return "not a journal: the first line is neither a journal header nor a record"
    return None


#: The largest file `_one_json_document` parses whole.
_DOCUMENT_MAX_BYTES = 16 << 20


def _one_json_document(path: str) -> bool:
    """Whether ``path`` holds one JSON value spread over several lines (``summary.json``
    as ``routing simulate`` writes it, pretty-printed); only files up to 16 MiB are parsed."""
    try:
        if os.path.getsize(path) > _DOCUMENT_MAX_BYTES:
            return False
        with open_journal_bytes(path) as handle:
            json.loads(handle.read(_DOCUMENT_MAX_BYTES + 1))
    except (OSError, EOFError, ValueError, RecursionError):
        return False
    return True


def _parquet_ok(path: str) -> str | None:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - the spark extra brings pyarrow
        return None
    try:
        first = path
        if os.path.isdir(path):
            first = next(os.path.join(path, n) for n in sorted(os.listdir(path))
                         if n.endswith((".parquet", ".parq")) and not n.startswith((".", "_")))
        names = pq.read_schema(first).names
    except Exception as exc:
        return f"unreadable Parquet: {exc}"
    return None if "text" in names else "not a journal copy: no 'text' column"


def check_inputs(paths: Sequence[str | os.PathLike[str]]) -> InputCheck:
    """Check ``paths`` (files or folders) as `routing analyze` reads them; raise
    `InputError` for a missing or unreadable path (`JournalNotFound` when it does not
    exist), or when no file is a journal. Reads the first line of each file: O(files)."""
    local: list[str] = []
    remote: list[str] = []
    for given in paths:
        path = os.fspath(given)
        if _is_uri(path):
            remote.append(path)
            continue
        path = path.removeprefix("file://")
        if not os.path.exists(path):
            raise JournalNotFound(f"no such journal file or folder: {path}")
        if not os.access(path, os.R_OK | (os.X_OK if os.path.isdir(path) else 0)):
            raise InputError(f"cannot read {path}: permission denied")
        local.append(path)
    try:
        found = expand_local(local)
    except OSError as exc:
        raise InputError(f"cannot list the journals: {exc}") from None
    journals: list[InputFile] = []
    skipped: list[tuple[str, str]] = []
    size = 0
    by_name_only = True
    for item in found:
        if not os.access(item.path, os.R_OK):
            raise InputError(f"cannot read {item.path}: permission denied")
        if item.kind == "skipped":  # a folder's file with another name (`JOURNAL_SUFFIXES`)
            why: str | None = _why_not_journal(item.path) or SKIPPED_REASON
        elif item.kind == "parquet":
            why = _parquet_ok(item.path)
        else:
            why = _why_not_journal(item.path)
        if why is None:
            journals.append(item)
            size += _size(item.path)
        else:
            skipped.append((item.path, why))
            by_name_only = by_name_only and item.kind == "skipped"
    if not journals and not remote:
        detail = "; ".join(f"{p}: {why}" for p, why in skipped[:5])
        where = ", ".join(os.fspath(p) for p in paths)
        raise InputError(f"no journal found in {where}" + (f" ({detail})" if detail else ""))
    return InputCheck(journals=tuple(journals), skipped=tuple(skipped), remote=tuple(remote),
                      total_bytes=size, skipped_by_name_only=by_name_only)


def _size(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(root, n))
                   for root, _dirs, files in os.walk(path) for n in files)
    return os.path.getsize(path)
