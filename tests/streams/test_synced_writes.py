"""Every acknowledged write of the embedded log and of the RocksDB state store was synced to
disk before it returned: a writer child runs under strace, which shows an fsync/fdatasync
between each acknowledgement and the one before (both now sync the WAL with flush_wal, which
lets go of the GIL while the disk syncs, instead of a write with sync=True)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WRITES = 20

# Marks each acknowledgement with a getppid() system call, which neither Python nor RocksDB
# makes otherwise, so the trace shows where each write returned.
CHILD = f"""
import os, sys
from vectorlog.streams.log.base import Append
from vectorlog.streams.log.embedded import EmbeddedLog
from vectorlog.state.rocksdb import RocksDBStateStore

kind, path = sys.argv[1], sys.argv[2]
if kind == "log":
    log = EmbeddedLog(path)
    log.create_topic("t", 2)
    os.getppid()
    for i in range({WRITES}):
        log.append("t", [Append(i % 2, b"x" * 600)])
        os.getppid()
    log.close()
else:
    store = RocksDBStateStore(path)
    os.getppid()
    for i in range({WRITES}):
        with store.transaction() as txn:
            txn.put(b"k%d" % i, b"x" * 600)
            txn.set_position("t", 0, i + 1)
        os.getppid()
    store.close()
"""


def traced_calls(kind: str, path: Path) -> list[str]:
    """Runs the child writing `kind` ("log" or "state") at `path` under strace; returns the
    names of its sync and marker system calls, in order. Fails, naming it, without strace
    (.ci/run installs it: apt-get install strace)."""
    assert shutil.which("strace") is not None, "strace is not installed: apt-get install strace"
    out = path.parent / f"{kind}.trace"
    done = subprocess.run(
        ["strace", "-f", "-qq", "-o", str(out), "-e", "trace=fsync,fdatasync,getppid"]
        + [sys.executable, "-c", CHILD, kind, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]  # also when ptrace is not permitted
    calls = []
    for line in out.read_text().splitlines():
        name = line.split(None, 1)[1].split("(", 1)[0] if " " in line else ""
        if name in ("fsync", "fdatasync", "getppid"):
            calls.append(name)
    return calls


def unsynced_acknowledgements(calls: list[str]) -> list[int]:
    """Returns the numbers of the acknowledgements (marker 1 on: writes) that no sync
    preceded since the marker before."""
    marks = [i for i, name in enumerate(calls) if name == "getppid"]
    return [
        n
        for n, (a, b) in enumerate(zip(marks, marks[1:], strict=False), start=1)
        if not any(name != "getppid" for name in calls[a + 1 : b])
    ]


@pytest.mark.parametrize("kind", ["log", "state"])
def test_every_acknowledged_write_was_synced_before_it_returned(tmp_path: Path, kind: str) -> None:
    calls = traced_calls(kind, tmp_path / kind)
    assert calls.count("getppid") == WRITES + 1
    assert unsynced_acknowledgements(calls) == []
