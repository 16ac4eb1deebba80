"""The embedded log when its directory is deleted or replaced under it, or its disk fills:
writes fail with an error saying so, and the old handle never touches a new log at the path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.streams.fsfaults import ROWS, fill, in_child, small_tmpfs
from vectorlog.core.errors import DataDirGone, DiskFull
from vectorlog.streams.errors import LogDirGone, LogDiskFull, LogInUse, LogNoSpace
from vectorlog.streams.log.base import Append
from vectorlog.streams.log.embedded import EmbeddedLog
from vectorlog.streams.scan import read_to_end


def opened(path: Path, records: int = 200) -> EmbeddedLog:
    """An embedded log at `path` with `records` records (in its memtable) on topic t."""
    log = EmbeddedLog(path)
    log.create_topic("t", 2)
    for i in range(records):
        log.append("t", [Append(i % 2, b"old%d" % i + b"." * 1000)])
    return log


def test_appends_fail_once_the_directory_is_deleted(tmp_path: Path) -> None:
    log = opened(tmp_path / "log")
    ends = (log.end_offset("t", 0), log.end_offset("t", 1))
    shutil.rmtree(tmp_path / "log")
    with pytest.raises(LogDirGone, match="deleted or moved away") as raised:
        log.append("t", [Append(0, b"after")])
    assert isinstance(raised.value, DataDirGone)
    assert str(tmp_path / "log") in str(raised.value)
    with pytest.raises(LogDirGone):
        log.create_topic("u", 1)
    assert (log.end_offset("t", 0), log.end_offset("t", 1)) == ends  # nothing acknowledged
    log.close()


def test_appends_fail_once_the_directory_is_replaced(tmp_path: Path) -> None:
    log = opened(tmp_path / "log", records=3)
    (tmp_path / "log").rename(tmp_path / "moved")
    (tmp_path / "log").mkdir()
    with pytest.raises(LogDirGone, match="replaced by another one"):
        log.append("t", [Append(0, b"after")])
    log.close()


def test_the_old_handle_never_writes_into_a_new_log_at_the_path(tmp_path: Path) -> None:
    path = tmp_path / "log"
    old = opened(path)
    shutil.rmtree(path)
    assert in_child("log", path, "write") == ROWS  # another process creates a new log there
    old.close()  # a plain close flushes its memtable into files named by path
    assert in_child("log", path, "read") == ROWS
    reopened = EmbeddedLog(path)  # this process opens the new log too (issue 31 item 6)
    try:
        values = [r.value for r in read_to_end(reopened, "t")]
        assert sum(v.startswith(b"n") for v in values) == ROWS  # the child's rows
        assert not [v for v in values if v.startswith(b"old")]  # none of the old handle's
        with pytest.raises(LogInUse):  # but not twice at once
            EmbeddedLog(path).close()
    finally:
        reopened.close()


@pytest.mark.slow
def test_a_full_disk_is_reported_as_such(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "fs") as fs:
        log = opened(fs / "log", records=3)
        filler = fill(fs)
        for _ in range(2):  # RocksDB refuses every write after a failed one
            with pytest.raises(LogDiskFull, match="No space left on device") as raised:
                log.append("t", [Append(0, b"x" * 4000)])
            assert isinstance(raised.value, DiskFull) and str(fs / "log") in str(raised.value)
        assert log.end_offset("t", 0) == 2
        log.close()
        with pytest.raises(LogNoSpace, match="disk is full"):
            EmbeddedLog(fs / "another")
        filler.unlink()
        reopened = EmbeddedLog(fs / "log")
        assert reopened.end_offset("t", 0) == 2  # the failed append left nothing
        assert reopened.append("t", [Append(0, b"after")]) == [2]
        reopened.close()
