"""Crash test of EmbeddedLog: every acknowledged append survives a SIGKILL of the writer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from vectorlog.core.errors import VectorlogError
from vectorlog.streams.errors import LogCorrupt, LogInUse, LogOpenError
from vectorlog.streams.log.base import Append, Record
from vectorlog.streams.log.embedded import EmbeddedLog

TOPIC, PARTITIONS, BATCH, ACKS_BEFORE_KILL = "crash", 3, 7, 50

# The writer appends batches forever and prints each batch's offsets once `append` returned.
WRITER = f"""
import json, sys
from vectorlog.streams.log.base import Append
from vectorlog.streams.log.embedded import EmbeddedLog

log = EmbeddedLog(sys.argv[1])
log.create_topic({TOPIC!r}, {PARTITIONS})
batch = 0
while True:
    records = [
        Append((batch + i) % {PARTITIONS}, f"{{batch}}:{{i}};".encode() * int(sys.argv[2]),
               key=f"k{{i}}".encode() if i % 2 else None)
        for i in range({BATCH})
    ]
    offsets = log.append({TOPIC!r}, records)
    print(json.dumps({{"batch": batch, "offsets": offsets}}), flush=True)
    batch += 1
"""


def expected_batch(batch: int, repeat: int) -> list[Append]:
    """The records the writer appended as batch number `batch`, each text `repeat` times."""
    return [
        Append(
            (batch + i) % PARTITIONS,
            f"{batch}:{i};".encode() * repeat,
            key=f"k{i}".encode() if i % 2 else None,
        )
        for i in range(BATCH)
    ]


def run_writer_until_acks(
    path: Path, acks: int, repeat: int = 20, timeout: float = 60.0
) -> list[dict]:
    """Starts the writer, reads `acks` acknowledgements, then SIGKILLs it mid-stream."""
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(repeat)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.stdout is not None and child.stderr is not None
    watchdog = threading.Timer(timeout, child.kill)  # unblocks readline() if the writer hangs
    watchdog.start()
    acked: list[dict] = []
    try:
        while len(acked) < acks:
            line = child.stdout.readline()
            if not line:
                raise AssertionError(f"writer stopped early: {child.stderr.read().decode()}")
            acked.append(json.loads(line))
    finally:
        watchdog.cancel()
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    return acked


def read_partition(log: EmbeddedLog, partition: int) -> list[Record]:
    reader = log.reader(TOPIC, {partition: 0})
    out: list[Record] = []
    while got := reader.poll(max_records=10_000, timeout=0):
        out += got
    reader.close()
    return out


def wal_files_reused(path: Path) -> int:
    """Returns how often RocksDB's info log at `path` (LOG, LOG.old.*) says it reused a WAL
    file ("reusing log 4 from recycle list")."""
    return sum(f.read_text(errors="replace").count("reusing log") for f in path.glob("LOG*"))


#: (text repeats per record, acknowledgements before the kill, WAL files reused by then):
#: small records; and ~80 KB records, 216 MB in all: RocksDB reuses a WAL file once the
#: memtable it held is flushed (64 MB memtables: from 128 MB of appends on), and the kill lands
#: in a reused one ("reusing log 8 from recycle list")
SIZES = [(20, ACKS_BEFORE_KILL, False), (16_000, 340, True)]


@pytest.mark.parametrize(
    ("repeat", "acks", "reused"), SIZES, ids=["small", "past-reused-wal-files"]
)
def test_acknowledged_appends_survive_sigkill(
    tmp_path: Path, repeat: int, acks: int, reused: bool
) -> None:
    path = tmp_path / "log"
    acked = run_writer_until_acks(path, acks, repeat)
    assert [a["batch"] for a in acked] == list(range(acks))
    assert (wal_files_reused(path) > 0) == reused

    log = EmbeddedLog(path)
    try:
        on_disk = {p: read_partition(log, p) for p in range(PARTITIONS)}
        for p, records in on_disk.items():  # dense from 0, no duplicates
            assert [r.offset for r in records] == list(range(len(records)))
            assert log.end_offset(TOPIC, p) == len(records)
        stored = {(r.partition, r.offset): (r.key, r.value) for rs in on_disk.values() for r in rs}
        for ack in acked:  # every acknowledged record, at its offset, with its content
            for a, off in zip(expected_batch(ack["batch"], repeat), ack["offsets"], strict=True):
                assert stored[(a.partition, off)] == (a.key, a.value)
        # Unacknowledged batches are all-or-nothing: the log holds whole batches 0..n-1.
        batches: dict[int, int] = {}
        for r in (r for rs in on_disk.values() for r in rs):
            batch = int(r.value.split(b":", 1)[0])
            batches[batch] = batches.get(batch, 0) + 1
        assert sorted(batches) == list(range(len(batches))) and len(batches) >= len(acked)
        assert set(batches.values()) == {BATCH}

        ends = [log.end_offset(TOPIC, p) for p in range(PARTITIONS)]
        new = log.append(TOPIC, [Append(p, b"after crash") for p in range(PARTITIONS)])
        assert new == ends
        assert [read_partition(log, p)[-1].value for p in range(PARTITIONS)] == [b"after crash"] * 3
    finally:
        log.close()


def test_an_open_log_directory_is_reported_in_use_naming_it(tmp_path: Path):
    first = EmbeddedLog(tmp_path / "log")
    try:
        with pytest.raises(LogInUse, match=f"embedded log {tmp_path / 'log'} is in use"):
            EmbeddedLog(tmp_path / "log")
    finally:
        first.close()
    EmbeddedLog(tmp_path / "log").close()  # closing released it


def test_a_damaged_log_directory_is_reported_corrupt_not_in_use(tmp_path: Path):
    EmbeddedLog(tmp_path / "log").close()
    (tmp_path / "log" / "CURRENT").write_bytes(b"garbage")
    with pytest.raises(LogCorrupt, match="is corrupt") as err:
        EmbeddedLog(tmp_path / "log")
    assert isinstance(err.value, VectorlogError) and "CURRENT" in str(err.value)


@pytest.mark.parametrize("where", ["under /proc", "under a file"])
def test_a_log_path_that_cannot_be_a_directory_is_named_not_called_corrupt(
    tmp_path: Path, where: str
):
    (tmp_path / "file").write_text("")
    parent = Path("/proc/vectorlog-no-such-dir") if where == "under /proc" else tmp_path / "file"
    with pytest.raises(LogOpenError) as err:
        EmbeddedLog(parent / "log")
    assert not isinstance(err.value, LogCorrupt), err.value
    assert str(parent / "log") in str(err.value)
