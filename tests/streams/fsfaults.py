"""Helpers of the data-directory fault tests (here, in tests/processors/state and
tests/vectorlog): a small tmpfs to fill, and a child process that opens a NEW embedded log or
state store at a path (a database the test process never had open), writes or reads it.

Run as a child: `python fsfaults.py log|state PATH write|read`; prints {"count": n}.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROWS = 300


def in_child(kind: str, path: Path, mode: str) -> int:
    """Runs this module as a child on `path`; returns the count it printed. Fails the test
    with the child's stderr if it failed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, __file__, kind, str(path), mode],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    if done.returncode != 0:
        pytest.fail(f"child {kind} {mode} on {path} failed:\n{done.stderr[-3000:]}")
    return int(json.loads(done.stdout.splitlines()[-1])["count"])


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str = "8m") -> Iterator[Path]:
    """Yields a directory on a fresh tmpfs of `size`, unmounted after. Skips the test when
    mounting is not permitted here (not root, no mount, a container without the capability)."""
    where.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError as exc:
        pytest.skip(f"cannot mount a tmpfs to fill: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill: {done.stderr.strip() or done.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def fill(directory: Path) -> Path:
    """Writes a file in `directory` until the file system is full; returns it (delete it to
    free the space)."""
    filler = directory / f"filler-{uuid.uuid4().hex[:8]}"
    with open(filler, "wb", buffering=0) as out:
        chunk = b"\0" * 65536
        while True:
            try:
                out.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    return filler
                chunk = chunk[: len(chunk) // 2]


def _child(kind: str, path: Path, mode: str) -> int:
    if kind == "log":
        return _log_child(path, mode)
    return _state_child(path, mode)


def _log_child(path: Path, mode: str) -> int:
    from vectorlog.streams.log.base import Append
    from vectorlog.streams.log.embedded import EmbeddedLog
    from vectorlog.streams.scan import read_to_end

    log = EmbeddedLog(path)
    try:
        if mode == "write":
            log.create_topic("t", 2)
            for i in range(ROWS):
                log.append("t", [Append(i % 2, b"n%d" % i + b"." * 1000)])
            return ROWS
        return len(list(read_to_end(log, "t")))
    finally:
        log.close()


def _state_child(path: Path, mode: str) -> int:
    from vectorlog.state.rocksdb import RocksDBStateStore

    store = RocksDBStateStore(path)
    try:
        if mode == "write":
            for i in range(ROWS):
                with store.transaction() as txn:
                    txn.put(b"new%05d" % i, b"." * 1000)
                    txn.set_position("t", 0, i + 1)
                if i == ROWS // 2:
                    store.flush()
            return ROWS
        assert store.position("t", 0) == ROWS, store.position("t", 0)
        return len(list(store.items()))
    finally:
        store.close()


if __name__ == "__main__":
    print(json.dumps({"count": _child(sys.argv[1], Path(sys.argv[2]), sys.argv[3])}))
