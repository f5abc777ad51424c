"""The driver JVM's class-data-sharing archive (`_class_archive`): which options a session
gets, and how a finished dump of an earlier run becomes the archive (no JVM needed)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from routing.pipeline._class_archive import ARCHIVE_ENV, class_archive_options

BANNER = 'openjdk version "17.0.9" 2023-10-17'


def _archive_in(options: str) -> Path:
    (flag,) = [o for o in options.split() if o.startswith("-XX:")]
    return Path(flag.split("=", 1)[1])


def test_a_first_run_dumps_its_own_file_and_a_later_one_maps_the_archive(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ARCHIVE_ENV, raising=False)
    folder = tmp_path / "cache" / "routing"
    first = class_archive_options(BANNER, folder=folder)
    assert first.startswith("-XX:ArchiveClassesAtExit=") and "-Xlog:cds=off" in first
    dump = _archive_in(first)
    assert folder.is_dir() and dump.parent == folder
    assert dump.name.endswith(f".{os.getpid()}.tmp")  # its own name: no shared writes
    # while the dump is fresh (its JVM may still be writing), nobody adopts it
    dump.write_bytes(b"classes")
    assert class_archive_options(BANNER, folder=folder).startswith("-XX:ArchiveClassesAtExit=")
    # once finished, the next run renames it to the archive and maps it
    old = time.time() - 120
    os.utime(dump, (old, old))
    second = class_archive_options(BANNER, folder=folder)
    archive = _archive_in(second)
    assert second.startswith("-XX:SharedArchiveFile=") and archive.read_bytes() == b"classes"
    assert not dump.exists()
    assert class_archive_options(BANNER, folder=folder) == second


def test_each_java_build_has_its_own_archive(tmp_path: Path) -> None:
    one = _archive_in(class_archive_options(BANNER, folder=tmp_path))
    other = _archive_in(class_archive_options('openjdk version "21.0.1"', folder=tmp_path))
    assert one.name.split(".")[0] != other.name.split(".")[0]


def test_turned_off_or_unusable_means_no_options(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ARCHIVE_ENV, "0")
    assert class_archive_options(BANNER, folder=tmp_path) == ""
    assert list(tmp_path.iterdir()) == []
    monkeypatch.delenv(ARCHIVE_ENV)
    # Spark splits the options on whitespace: a path with a space is not used
    assert class_archive_options(BANNER, folder=tmp_path / "my cache") == ""
    # a folder that cannot be made (a file is in the way)
    (tmp_path / "file").write_text("")
    assert class_archive_options(BANNER, folder=tmp_path / "file" / "routing") == ""


def test_archives_unused_for_a_week_go_when_another_is_made(tmp_path: Path) -> None:
    stale, recent = tmp_path / "spark-classes-aaaa.jsa", tmp_path / "spark-classes-bbbb.jsa"
    for path, age in ((stale, 8 * 24 * 3600), (recent, 3600)):
        path.write_bytes(b"x")
        os.utime(path, (time.time() - age, time.time() - age))
    assert class_archive_options(BANNER, folder=tmp_path).startswith("-XX:ArchiveClassesAtExit=")
    assert not stale.exists() and recent.exists()


def test_dumps_of_runs_that_raced_the_first_one_are_dropped(tmp_path: Path) -> None:
    """Two first runs each dump; the next run adopts one and drops the other."""
    options = class_archive_options(BANNER, folder=tmp_path)
    dump = _archive_in(options)
    other = dump.with_name(dump.name.replace(f".{os.getpid()}.", ".1.", 1))
    old = time.time() - 120
    for path in (dump, other):
        path.write_bytes(b"classes")
        os.utime(path, (old, old))
    assert class_archive_options(BANNER, folder=tmp_path).startswith("-XX:SharedArchiveFile=")
    assert [p.name.endswith(".jsa") for p in tmp_path.iterdir()] == [True]
