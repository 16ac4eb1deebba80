"""`EmbeddedLog`: the log on RocksDB (rocksdict), fsync'd appends, for one process (embedded mode).

Key layout (all big-endian so RocksDB iterates in offset order):
    TOPIC_META + topic                                  -> partition count (4 bytes)
    RECORD + topic + SEP + partition(4) + offset(8)     -> streams/log/frame.py frame
    START + topic + SEP + partition(4)                  -> first offset still held (8 bytes;
                                                           absent: 0), set by `truncate`
    SIZE + topic + SEP + partition(4) + offset(8)       -> the record's byte position
                                                           (streams/log/sizeindex.py)
An append of any number of records across partitions is one WriteBatch, then the WAL synced
(`flush_wal(True)`, which lets go of the GIL while the disk syncs, where a write with
sync=True holds it and stalls every thread of the process): it is on disk before `append`
returns, no reader sees it before (readers stop at `_next`, moved after the sync), and it
lands whole or not at all;
concurrent appends share one such write (group commit, `group_stats`). An append wakes
only the readers of its topic (a single-row insert need not take every processor's thread
through the GIL). Once
the directory is deleted or replaced under a running process every write is refused
(`LogDirGone`) and the handle is abandoned at close, never flushed into a new database at
that path (see `streams.rocksdir`).
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from rocksdict import Rdict, WriteBatch, WriteOptions

from vectorlog.streams.batches import between_partitions
from vectorlog.streams.errors import (
    LogClosed,
    LogCorrupt,
    LogDirGone,
    LogDiskFull,
    LogError,
    LogInUse,
    LogNoSpace,
    LogOpenError,
    LogReadOnly,
    LogWriteFailed,
    LogWriteOutcomeUnknown,
    LogWriteReadOnly,
    OffsetOutOfRange,
    TopicNotFound,
    TopicPartitionNotFound,
)
from vectorlog.streams.log.base import Append, PartitionCursor, Record, check_sizes
from vectorlog.streams.log.frame import frame, unframe
from vectorlog.streams.log.groupcommit import GroupCommit, GroupStats
from vectorlog.streams.log.lease_fence import FenceState, LeaseFence, NoFence
from vectorlog.streams.log.sizeindex import backfill, position_at, size_key
from vectorlog.streams.rocksdir import PinnedDir, abandoned_note, close_or_abandon
from vectorlog.streams.rocksopen import OpenFailure, classify, synced_store_options

TOPIC_META = b"\x01t:"
RECORD = b"\x02r:"
START = b"\x03s:"
SEP = b"\x00"
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20
LOG = logging.getLogger(__name__)
#: an offset (or a position) in a key or value: big-endian u64
_OFFSET = struct.Struct(">Q")


def record_prefix(topic: str, partition: int) -> bytes:
    """Returns the key prefix of every record of one partition."""
    return RECORD + topic.encode() + SEP + struct.pack(">I", partition)


def start_key(topic: str, partition: int) -> bytes:
    """Returns the key of a partition's first held offset (written by `truncate`)."""
    return START + topic.encode() + SEP + struct.pack(">I", partition)


def record_key(topic: str, partition: int, offset: int) -> bytes:
    """Returns the RocksDB key of one record."""
    return record_prefix(topic, partition) + struct.pack(">Q", offset)


_OPEN_ERRORS: dict[OpenFailure, type[LogOpenError]] = {
    OpenFailure.DISK_FULL: LogNoSpace,
    OpenFailure.IN_USE: LogInUse,
    OpenFailure.CORRUPT: LogCorrupt,
    OpenFailure.READ_ONLY: LogReadOnly,
    OpenFailure.OTHER: LogOpenError,
}


#: What a failed write was (anything else may still be on disk: outcome unknown).
_WRITE_ERRORS: dict[OpenFailure, type[LogWriteFailed]] = {
    OpenFailure.DISK_FULL: LogDiskFull,
    OpenFailure.READ_ONLY: LogWriteReadOnly,
}


def _open(path: Path) -> tuple[Rdict, PinnedDir]:
    """Opens (creating if missing) the log's RocksDB; returns it and its pinned directory.
    Raises LogInUse, LogCorrupt, LogReadOnly, LogNoSpace or LogOpenError, naming the path and
    keeping RocksDB's message."""
    pinned = None
    try:
        path.mkdir(parents=True, exist_ok=True)
        pinned = PinnedDir(path)
        return Rdict(pinned.rocks_path, synced_store_options()), pinned
    except Exception as exc:
        if pinned is not None:
            pinned.close()
        kind, message = classify(exc)
        if kind is OpenFailure.IN_USE:
            message += abandoned_note(path)
        raise _OPEN_ERRORS[kind](str(path), message) from exc


class EmbeddedLog:
    """A durable, partitioned log in one RocksDB directory."""

    def __init__(
        self,
        path: str | Path,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        fsync: bool = True,
    ) -> None:
        self.path = str(path)
        self.max_message_bytes = max_message_bytes
        self._db, self._dir = _open(Path(path))
        self._fsync = fsync
        self._wopts = WriteOptions()  # unsynced: `_write` syncs the WAL without the GIL
        self._wopts.sync = False
        self._lock = threading.Lock()
        #: per topic, woken by its appends: a reader of one topic sleeps through the others'
        self._appended: dict[str, threading.Condition] = {}
        self._group: GroupCommit[tuple[str, Sequence[Append]], list[int]] = GroupCommit(
            self._commit
        )
        self._topics: dict[str, int] = {}
        self._next: dict[tuple[str, int], int] = {}
        self._start: dict[tuple[str, int], int] = {}
        self._pos: dict[tuple[str, int], int] = {}  # byte position of the next append
        self._closed = False
        self._recover()

    def _recover(self) -> None:
        it = self._db.iter()
        it.seek(TOPIC_META)
        while it.valid() and bytes(it.key()).startswith(TOPIC_META):
            topic = bytes(it.key())[len(TOPIC_META) :].decode()
            (n,) = struct.unpack(">I", bytes(it.value()))
            self._topics[topic] = n
            it.next()
        for topic, n in self._topics.items():
            for p in range(n):
                raw = self._db.get(start_key(topic, p))
                self._start[(topic, p)] = struct.unpack(">Q", raw)[0] if raw else 0
                # every record deleted: the end is the start, never back at offset 0
                self._next[(topic, p)] = max(self._end_on_disk(topic, p), self._start[(topic, p)])
                self._pos[(topic, p)] = self._end_position(topic, p)

    def _end_on_disk(self, topic: str, partition: int) -> int:
        prefix = record_prefix(topic, partition)
        it = self._db.iter()
        it.seek_for_prev(prefix + b"\xff" * 8)
        if it.valid() and bytes(it.key()).startswith(prefix):
            (last,) = struct.unpack(">Q", bytes(it.key())[len(prefix) :])
            return int(last) + 1
        return 0

    def _end_position(self, topic: str, partition: int) -> int:
        """Returns the byte position of the partition's next append, first writing the size
        index of a partition that has none (a data dir from before it). Raises LogWriteFailed."""
        start, end = self._start[(topic, partition)], self._next[(topic, partition)]
        if end <= start:
            return 0
        last = position_at(self._db, topic, partition, end - 1)
        if last is not None:
            return last + len(self._db.get(record_key(topic, partition, end - 1)) or b"")
        LOG.info("embedded log %s: indexing the sizes of %s[%d]", self.path, topic, partition)
        sizes = self._stored_sizes(topic, partition, start)
        return backfill(lambda wb: self._write(wb, topic), topic, partition, sizes)

    def _stored_sizes(self, topic: str, partition: int, start: int) -> Iterator[tuple[int, int]]:
        """Yields (offset, stored length) of the partition's records from `start` on."""
        prefix, it = record_prefix(topic, partition), self._db.iter()
        it.seek(record_key(topic, partition, start))
        while it.valid() and bytes(it.key()).startswith(prefix):
            (offset,) = struct.unpack(">Q", bytes(it.key())[len(prefix) :])
            yield offset, len(bytes(it.value()))
            it.next()

    def create_topic(
        self,
        topic: str,
        partitions: int,
        compacted: bool = False,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
    ) -> None:
        if partitions < 1 or SEP.decode() in topic:
            raise LogError(f"invalid topic {topic!r} with {partitions} partitions")
        with self._lock:
            self._check_open()
            have = self._topics.get(topic)
            if have is not None:
                if have != partitions:
                    raise LogError(
                        f"topic {topic!r} exists with {have} partitions, not {partitions}"
                    )
                return
            wb = WriteBatch(raw_mode=True)
            wb.put(TOPIC_META + topic.encode(), struct.pack(">I", partitions))
            self._write(wb, topic)
            self._topics[topic] = partitions
            for p in range(partitions):
                self._next[(topic, p)] = 0
                self._start[(topic, p)] = 0
                self._pos[(topic, p)] = 0

    def _write(self, wb: WriteBatch, topic: str) -> None:
        """Writes one batch (synced when fsync is on); nothing is acknowledged if it raises.
        Raises LogDirGone (the directory was deleted or replaced: nothing written),
        LogDiskFull, LogWriteReadOnly, or LogWriteOutcomeUnknown (it shows on the next open)."""
        gone = self._dir.gone()
        if gone is not None:
            raise LogDirGone(self.path, topic, gone)
        try:
            self._db.write(wb, self._wopts)
            if self._fsync:
                self._db.flush_wal(True)
        except Exception as exc:  # rocksdict raises plain Exceptions with RocksDB's message
            raise self._write_error(topic, exc) from exc

    def _write_error(self, topic: str, exc: Exception) -> LogWriteFailed:
        """Returns the error a failed write of `topic` raises."""
        gone = self._dir.gone()
        if gone is not None:
            return LogDirGone(self.path, topic, f"{gone}; {exc}")
        kind, message = classify(exc)
        return _WRITE_ERRORS.get(kind, LogWriteOutcomeUnknown)(self.path, topic, message)

    def partitions(self, topic: str) -> int:
        try:
            return self._topics[topic]
        except KeyError:
            raise TopicNotFound(topic) from None

    def append(self, topic: str, records: Sequence[Append]) -> list[int]:
        """See `Log.append`. Concurrent appends are group-committed: one synced write carries
        every append queued while the previous write ran (`streams.log.groupcommit`)."""
        check_sizes(records, self.max_message_bytes)
        n = self.partitions(topic)
        for r in records:
            if not 0 <= r.partition < n:
                raise TopicPartitionNotFound(topic, r.partition)
        return self._group.submit((topic, records))

    def _commit(self, appends: Sequence[tuple[str, Sequence[Append]]]) -> list[list[int]]:
        """Writes every append of a group in one batch; returns each one's offsets. Raises
        LogClosed or LogWriteFailed (then none of them was written)."""
        with self._lock:
            self._check_open()
            wb = WriteBatch(raw_mode=True)
            nxt: dict[tuple[str, int], int] = {}
            pos: dict[tuple[str, int], int] = {}
            out = [self._stage(wb, topic, records, nxt, pos) for topic, records in appends]
            if nxt:
                self._write(wb, appends[0][0])
                self._next.update(nxt)
                self._pos.update(pos)
                for topic in {topic for topic, _ in appends}:
                    self._appended_to(topic).notify_all()
            return out

    def _stage(
        self,
        wb: WriteBatch,
        topic: str,
        records: Sequence[Append],
        nxt: dict[tuple[str, int], int],
        pos: dict[tuple[str, int], int],
    ) -> list[int]:
        """Puts one append's records into `wb` after what `nxt`/`pos` staged so far; returns
        their offsets."""
        offsets: list[int] = []
        put, offset_bytes = wb.put, _OFFSET.pack
        last = -1  # the partition of the records before (their keys' prefixes below)
        for i, r in enumerate(records):
            if r.partition != last:
                between_partitions(records, i)  # nothing is written before the whole batch
                last, tp = r.partition, (topic, r.partition)
                off, at = nxt.get(tp, self._next[tp]), pos.get(tp, self._pos[tp])
                records_at = record_key(topic, last, 0)[:-8]
                sizes_at = size_key(topic, last, 0)[:-8]
            stored = frame(r.key, r.value, r.headers)
            put(records_at + offset_bytes(off), stored)
            put(sizes_at + offset_bytes(off), offset_bytes(at))
            offsets.append(off)
            off, at = off + 1, at + len(stored)
            nxt[tp], pos[tp] = off, at
        return offsets

    @property
    def group_stats(self) -> GroupStats:
        """Returns how many appends were written in how many synced writes."""
        return self._group.stats

    def end_offset(self, topic: str, partition: int) -> int:
        """Returns the offset the next append to this partition gets."""
        self.partitions(topic)
        return self._next[(topic, partition)]

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Returns {partition: the offset its next append gets} (exact). Raises TopicNotFound."""
        n = self.partitions(topic)
        with self._lock:
            return {p: self._next[(topic, p)] for p in range(n)}

    def reader(self, topic: str, positions: dict[int, int]) -> EmbeddedReader:
        n = self.partitions(topic)
        for p in positions:
            if not 0 <= p < n:
                raise TopicPartitionNotFound(topic, p)
        return EmbeddedReader(self, topic, positions)

    def start_offsets(self, topic: str) -> dict[int, int]:
        """Returns {partition: its first offset still held} (0 until `truncate` deleted
        records). Raises TopicNotFound."""
        n = self.partitions(topic)
        with self._lock:
            return {p: self._start[(topic, p)] for p in range(n)}

    def truncate(self, topic: str, partition: int, before: int) -> int:
        """Deletes the partition's records below offset `before` (at most up to its end), in
        one synced write with its new start; offsets of the others never change. Returns the
        new start. Raises TopicPartitionNotFound, LogWriteFailed."""
        if not 0 <= partition < self.partitions(topic):
            raise TopicPartitionNotFound(topic, partition)
        with self._lock:
            self._check_open()
            start = self._start[(topic, partition)]
            before = min(before, self._next[(topic, partition)])
            if before <= start:
                return start
            wb = WriteBatch(raw_mode=True)
            wb.delete_range(
                record_key(topic, partition, start), record_key(topic, partition, before)
            )
            wb.delete_range(size_key(topic, partition, start), size_key(topic, partition, before))
            wb.put(start_key(topic, partition), struct.pack(">Q", before))
            self._write(wb, topic)
            self._start[(topic, partition)] = before
            return before

    def bytes_from(self, topic: str, partition: int, offset: int) -> int:
        """Returns the stored bytes (frames: value, key, headers) of the partition's records
        at `offset` (or its start, if later) and after: one point read. Raises
        TopicPartitionNotFound, LogClosed."""
        if not 0 <= partition < self.partitions(topic):
            raise TopicPartitionNotFound(topic, partition)
        with self._lock:
            self._check_open()
            offset = max(offset, self._start[(topic, partition)])
            if offset >= self._next[(topic, partition)]:
                return 0
            at = position_at(self._db, topic, partition, offset)
            return self._pos[(topic, partition)] - (at or 0)

    def _read(self, topic: str, partition: int, offset: int, limit: int) -> list[Record]:
        """Returns up to `limit` records from `offset`. Raises OffsetOutOfRange if `offset`
        is below the partition's start (its records were deleted by retention)."""
        start = self._start[(topic, partition)]
        if offset < start:
            raise OffsetOutOfRange(topic, partition, offset, start)
        end = min(self._next[(topic, partition)], offset + limit)
        if offset >= end:
            return []
        out, it = [], self._db.iter()
        prefix = record_prefix(topic, partition)
        it.seek(record_key(topic, partition, offset))
        for off in range(offset, end):
            if not it.valid() or bytes(it.key()) != prefix + struct.pack(">Q", off):
                if off == offset:  # truncated between the check and the seek
                    raise OffsetOutOfRange(
                        topic, partition, offset, self._start[(topic, partition)]
                    )
                break
            key, value, headers = unframe(bytes(it.value()))
            out.append(Record(topic, partition, off, value, key, headers))
            it.next()
        return out

    def _wait(self, topic: str, positions: dict[int, int], timeout: float) -> None:
        """Waits up to `timeout` for an append, unless a partition of `topic` already holds
        records at or past `positions` (checked under the append lock: no wakeup is lost)."""
        with self._lock:
            self._check_open()
            if any(self._next[(topic, p)] > off for p, off in positions.items()):
                return
            self._appended_to(topic).wait(timeout)

    def _appended_to(self, topic: str) -> threading.Condition:
        """Returns the condition `topic`'s appends notify (on the append lock; held)."""
        cond = self._appended.get(topic)
        if cond is None:
            cond = self._appended[topic] = threading.Condition(self._lock)
        return cond

    def _wake_all(self) -> None:
        """Wakes every waiting reader, whatever its topic (the append lock held)."""
        for cond in self._appended.values():
            cond.notify_all()

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosed(f"embedded log at {self.path}")

    def wake_readers(self) -> None:
        """See WakesReaders: a woken `poll` returns what is there, as after its timeout."""
        with self._lock:
            self._wake_all()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._wake_all()
            try:
                if not close_or_abandon(self._dir, self._db):
                    LOG.warning("embedded log %s: directory gone, handle abandoned", self.path)
            except Exception as exc:  # a failed flush: everything acknowledged is in the WAL
                LOG.warning("embedded log %s: close failed: %s", self.path, exc)


class EmbeddedReader(PartitionCursor):
    """Reads partitions of one topic of an `EmbeddedLog`, waking on appends."""

    def __init__(self, log: EmbeddedLog, topic: str, positions: dict[int, int]) -> None:
        super().__init__(topic, positions)
        self._log = log
        self._closed = False
        self._fence = LeaseFence()  # hides a fenced leader's late appends (lease_fence)

    def poll(self, max_records: int = 1000, timeout: float = 0.1) -> list[Record]:
        out = self._collect(max_records)
        if not out and timeout > 0 and not self._closed:
            self._log._wait(self._topic, self._pos, timeout)
            out = self._collect(max_records)
        return self._fence.admit(out)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        super().seek(topic, partition, offset)
        self._fence.forget(partition)

    def seed_fence(self, state: FenceState) -> None:
        """Gives the fence the state at this reader's start (lease_fence.seeded)."""
        self._fence.seed(state)

    def drop_fence(self) -> None:
        """Returns every record as it is on the log from now on (lease_fence.Unfenceable)."""
        self._fence = NoFence()

    def _read(self, partition: int, offset: int, max_records: int) -> list[Record]:
        return self._log._read(self._topic, partition, offset, max_records)

    def close(self) -> None:
        self._closed = True
