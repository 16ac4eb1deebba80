"""Opening RocksDB where this process writes: the options every synced store opens with, and
what a failed open or write was, read from RocksDB's (or the OS's) message: the store is in use,
corrupt, cannot be written, or the disk is full. Shared by the embedded log and the state
stores, which each raise their own error for each kind."""

from __future__ import annotations

import enum
import errno

from rocksdict import Options

#: WAL files RocksDB keeps to reuse instead of creating new ones. Every append and commit syncs
#: the WAL; a sync of a file that grew also writes its new size through the file system's
#: journal, while a reused file already has its size, so the sync writes data blocks only.
#: Measured on this VM's ext4 (200 KB appends, p50 under load): 2.6-5.1 -> 0.9-1.6 ms.
#: Records in a reused file carry their log's number, so recovery stops at the old tail.
#: RocksDB reuses a WAL file only once the memtable it held is flushed, never one of an earlier
#: session: after every open the first two memtables (2 x 64 MB) of appends go to growing files
#: (same minutes, 203 KB appends: sync p50 0.32 ms growing, 0.15 reused; the GIL-held write
#: 0.20, 0.16). 16 MB memtables (L0 counts x4, same disk writes) reuse from 32 MB on, but ran
#: 1 GB of appends slower in 6 of 7 alternated pairs (~1.3x, compaction CPU +7%): not taken.
RECYCLED_WAL_FILES = 4


def synced_store_options() -> Options:
    """Returns raw-mode options for a RocksDB this process writes and syncs (the embedded log,
    the state stores): WAL files reused, see RECYCLED_WAL_FILES."""
    options = Options(raw_mode=True)
    options.set_recycle_log_file_num(RECYCLED_WAL_FILES)
    return options


class OpenFailure(enum.Enum):
    """What a RocksDB open (or write) failure was; writes are classified with the same kinds."""

    DISK_FULL = "disk full"
    IN_USE = "in use"
    CORRUPT = "corrupt"
    READ_ONLY = "read-only"
    OTHER = "other"


#: Fragments of RocksDB / OS messages (lower case) and the failure each one means, checked in
#: this order. Seen from rocksdict 0.3.29 (RocksDB 9):
#:   "Permission denied (os error 13)"; "IO error: While renaming a file to .../LOG.old...:
#:   .../LOG: Permission denied"; "IO error: lock hold by current process, acquire time ...:
#:   .../LOCK: No locks available"; "IO error: While lock file: .../LOCK: Resource
#:   temporarily unavailable"; "Corruption: CURRENT file corrupted"; "Corruption: checksum
#:   mismatch  The file .../MANIFEST-000005 may be corrupted."; "IO error: No such file or
#:   directory: While opening a file for sequentially reading: .../MANIFEST-000005: ...";
#:   "No space left on device (os error 28)"; "IO error: No space left on device: While
#:   appending to file: .../000004.log: No space left on device" (a write, or an open).
FRAGMENTS: tuple[tuple[tuple[str, ...], OpenFailure], ...] = (
    (("no space left on device", "disk quota exceeded"), OpenFailure.DISK_FULL),
    (
        ("permission denied", "read-only file system", "operation not permitted"),
        OpenFailure.READ_ONLY,
    ),
    (("lock hold by", "/lock:", "lock file"), OpenFailure.IN_USE),
    (("corruption", "no such file or directory", "checksum mismatch"), OpenFailure.CORRUPT),
)
_READ_ONLY_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
#: the OS's own answer (an OSError, never RocksDB's message) that the store's path cannot exist
#: (a parent missing where it cannot be created, or a file where a directory should be): the
#: path is wrong, nothing is corrupt, and moving the "corrupt" directory away would not help
_BAD_PATH_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR})


def classify(exc: BaseException) -> tuple[OpenFailure, str]:
    """Returns what the open (or write) failure `exc` was, and its message."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.errno in _DISK_FULL_ERRNOS:
        return OpenFailure.DISK_FULL, message
    if isinstance(exc, OSError) and exc.errno in _READ_ONLY_ERRNOS:
        return OpenFailure.READ_ONLY, message
    if isinstance(exc, OSError) and exc.errno in _BAD_PATH_ERRNOS:
        return OpenFailure.OTHER, message
    lowered = message.lower()
    for fragments, kind in FRAGMENTS:
        if any(fragment in lowered for fragment in fragments):
            return kind, message
    return OpenFailure.OTHER, message
