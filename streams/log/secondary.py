"""`EmbeddedFollower`: reads an `EmbeddedLog` that another process has open and appends to.

The embedded log's RocksDB is locked by the process that writes it, so other processes (Spark's
Python workers reading the dml topic) open it as a RocksDB *secondary* instance: no lock, never
writes the log's files, and `try_catch_up_with_primary()` replays the primary's new MANIFEST and
WAL entries, so appends made after the open become visible. A WriteBatch is applied whole, so a
follower sees an append entirely or not at all, and offsets stay dense. Checked here with a
primary appending 200 kB records (memtable flushes, compactions) and closing and reopening the
log three times while a follower in another process tailed it: every offset seen once, in
order, no catch-up error.

A follower that is behind only ever misses records at the end (records are never rewritten or
removed), so a reader that needs a range it cannot see catches up again, then reopens.
"""

from __future__ import annotations

import atexit
import os
import shutil
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from rocksdict import AccessType, Options, Rdict

from vectorlog.streams.errors import LogError, TopicNotFound
from vectorlog.streams.log.base import Record
from vectorlog.streams.log.embedded import TOPIC_META, record_key, record_prefix, start_key
from vectorlog.streams.log.frame import unframe

#: a follower's own RocksDB files (its info log) go to <tmp>/vectorlog-followers/<pid>-<id>
SCRATCH = Path(tempfile.gettempdir()) / "vectorlog-followers"


def scratch_dir() -> str:
    """Returns a new scratch directory; removes those of processes that are gone (Spark kills
    its Python workers without running their exit handlers)."""
    SCRATCH.mkdir(parents=True, exist_ok=True)
    for old in SCRATCH.iterdir():
        pid = old.name.partition("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=SCRATCH)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class FollowerError(LogError):
    """A follower could not open the log or find records that must exist (names both)."""


class EmbeddedFollower:
    """A read-only view of an embedded log directory written by another process."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._scratch = scratch_dir()
        atexit.register(shutil.rmtree, self._scratch, True)
        self._db = self._open()

    def _open(self) -> Rdict:
        if not (Path(self.path) / "CURRENT").exists():
            raise FollowerError(f"embedded log {self.path} does not exist (no CURRENT file)")
        opts = Options(raw_mode=True)
        opts.set_max_open_files(-1)  # RocksDB requires it of a secondary instance
        try:
            return Rdict(self.path, opts, access_type=AccessType.secondary(self._scratch))
        except Exception as exc:  # rocksdict raises plain Exceptions with RocksDB's message
            raise FollowerError(f"embedded log {self.path} could not be followed: {exc}") from exc

    def catch_up(self) -> None:
        """Makes every append the primary made before this call visible."""
        with self._lock:
            try:
                self._db.try_catch_up_with_primary()
            except Exception as exc:
                raise FollowerError(f"embedded log {self.path}: catch-up failed: {exc}") from exc

    def reopen(self) -> None:
        """Opens the log afresh (after a catch-up failed or missed records)."""
        with self._lock:
            self._db.close()
            self._db = self._open()

    def partitions(self, topic: str) -> int:
        """Returns the partition count of `topic` as of the last catch-up."""
        raw = self._db.get(TOPIC_META + topic.encode())
        if raw is None:
            raise TopicNotFound(topic)
        return int(struct.unpack(">I", bytes(raw))[0])

    def start(self, topic: str, partition: int) -> int:
        """Returns the first offset a partition still holds as of the last catch-up (0 until
        retention deleted records)."""
        raw = self._db.get(start_key(topic, partition))
        return 0 if raw is None else int(struct.unpack(">Q", bytes(raw))[0])

    def end(self, topic: str, partition: int) -> int:
        """Returns 1 + the last offset of a partition visible as of the last catch-up."""
        prefix = record_prefix(topic, partition)
        it = self._db.iter()
        it.seek_for_prev(prefix + b"\xff" * 8)
        if it.valid() and bytes(it.key()).startswith(prefix):
            return int(struct.unpack(">Q", bytes(it.key())[len(prefix) :])[0]) + 1
        return 0

    def scan(self, topic: str, partition: int, start: int, end: int) -> Iterator[Record]:
        """Yields the records of offsets [start, end) visible now; stops at the first missing
        one (the caller checks it got them all)."""
        prefix = record_prefix(topic, partition)
        it = self._db.iter()
        it.seek(record_key(topic, partition, start))
        for off in range(start, end):
            if not it.valid():
                return
            key = bytes(it.key())
            if not key.startswith(prefix) or struct.unpack(">Q", key[len(prefix) :])[0] != off:
                return
            rkey, value, headers = unframe(bytes(it.value()))
            yield Record(topic, partition, off, value, rkey, headers)
            it.next()

    def read(
        self, topic: str, partition: int, start: int, end: int, timeout: float = 30.0
    ) -> Iterator[Record]:
        """Yields every record of offsets [start, end) of a partition, which must exist (they
        were seen by some follower). Catches up, then reopens, until they are all visible.
        Raises FollowerError if they are not within `timeout`."""
        nxt, deadline, attempt = start, time.monotonic() + timeout, 0
        while nxt < end:
            for rec in self.scan(topic, partition, nxt, end):
                nxt = rec.offset + 1
                yield rec
            if nxt >= end:
                return
            if time.monotonic() > deadline:
                raise FollowerError(
                    f"embedded log {self.path}: {topic}[{partition}] offsets {nxt}..{end - 1} "
                    f"not visible after {timeout}s"
                )
            attempt += 1
            try:
                self.reopen() if attempt % 3 == 0 else self.catch_up()
            except FollowerError:
                time.sleep(0.05)

    def close(self) -> None:
        with self._lock:
            self._db.close()
        shutil.rmtree(self._scratch, ignore_errors=True)
