"""A class-data-sharing archive for the driver JVM: Spark starts about 3 s sooner.

Starting a session loads some 20 000 classes into the driver JVM, and the first Python
step loads and links thousands more (Arrow, the Python runner, generated code). Java 17
can dump the classes a run loaded to a file when the JVM exits
(``-XX:ArchiveClassesAtExit``) and map that file at the next start
(``-XX:SharedArchiveFile``) instead of reading, parsing and verifying the jars again.
Measured on the 2-core machine (`research/pyspark-notes.md`): session 5.0 → 3.1 s, the
first ``mapInArrow`` job 3.7 → 2.6 s.

The archive lives in the user's cache (``$XDG_CACHE_HOME/routing``, else
``~/.cache/routing``), about 160 MB, one per pyspark installation and Java build; one not
used for a week is deleted when another is made. The first run without one pays for it
once: its JVM starts about 5 s slower while it records the classes, and writes the file
when it exits (a few seconds after the Python process ends, under a name of its own:
concurrent first runs never share a file); a later run adopts a finished one by renaming
it. A stale or damaged archive is not an error: the JVM checks it and, when it does not
match, starts as usual (its messages are turned off). ``ROUTING_SPARK_CLASS_ARCHIVE=0``
turns the whole thing off (for example in a throw-away container, where no run would
find the archive of the one before).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path

__all__ = ["ARCHIVE_ENV", "class_archive_options"]

#: Set to ``0`` to start Spark without the archive (and never write one).
ARCHIVE_ENV = "ROUTING_SPARK_CLASS_ARCHIVE"
#: A dump not touched for this long (seconds) is finished: its JVM has exited.
_FINISHED_AFTER_S = 30.0
#: An archive not used for this long (seconds) is deleted when another one is made.
_UNUSED_AFTER_S = 7 * 24 * 3600.0
#: The JVM's class-data-sharing messages off: a mismatch only means "start as usual".
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def class_archive_options(java_banner: str, *, folder: Path | None = None) -> str:
    """The driver JVM's options for the archive of ``java_banner``'s Java (its ``-version``
    line) and this pyspark: map the archive when there is one, else dump one at exit; ""
    when turned off or when the cache folder cannot be used. O(dumps left in the folder)."""
    if os.environ.get(ARCHIVE_ENV, "1") == "0":
        return ""
    import pyspark

    if folder is None:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        folder = Path(cache) / "routing"
    # the JVM checks the class path's jars: one archive per pyspark installation
    key = hashlib.sha256(f"{pyspark.__version__}\0{pyspark.__file__}\0{java_banner}"
                         .encode()).hexdigest()[:16]
    archive = folder / f"spark-classes-{key}.jsa"
    if any(c.isspace() for c in str(archive)):  # Spark splits the options on whitespace
        return ""
    if _settled(archive):
        with contextlib.suppress(OSError):
            os.utime(archive)  # used: kept by the pruning below
        return f"-XX:SharedArchiveFile={archive} {_QUIET}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return ""
    _prune(folder)
    return f"-XX:ArchiveClassesAtExit={archive}.{os.getpid()}.tmp {_QUIET}"


def _settled(archive: Path) -> bool:
    """Whether ``archive`` exists, once the finished dumps of earlier runs are dealt with:
    without an archive, one of them becomes it (renamed atomically: a run that finds it
    half-renamed finds nothing and dumps its own); the others, from runs that started
    while there was none, are deleted. A dump touched in the last `_FINISHED_AFTER_S`
    is left alone: its JVM may still be writing it."""
    exists = archive.is_file()
    now = time.time()
    for dump in sorted(archive.parent.glob(f"{archive.name}.*.tmp")):
        with contextlib.suppress(OSError):
            if now - dump.stat().st_mtime < _FINISHED_AFTER_S:
                continue
            if exists:
                dump.unlink()
            else:
                os.replace(dump, archive)
                exists = True
    return exists


def _prune(folder: Path) -> None:
    """Delete the archives and dumps of ``folder`` not used (touched) for a week."""
    now = time.time()
    for old in folder.glob("spark-classes-*.jsa*"):
        try:
            if now - old.stat().st_mtime > _UNUSED_AFTER_S:
                old.unlink()
        except OSError:
            continue
