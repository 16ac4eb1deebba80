"""SnapshotKV: a timestamped, time-travelling key-value store on RocksDB (seed 000).

Seed 000 ("metaSnapShot") asks for a key-value store in which every write is stamped with
a hybrid timestamp and every read can be made "as of" a timestamp: ``load(key, ts)``,
``load_prefix(prefix, ts)``, ``save``, ``multi_save(kvs, additions)`` and
``multi_save_and_remove_prefix(saves, removals, additions)``, the writes returning the
timestamp they got. The seed builds this on etcd, whose MVCC keys every version by a
*revision*, so it writes the timestamp next to the data in one etcd Txn and keeps a circular
array mapping timestamp -> revision to translate a read timestamp into a revision. On RocksDB
no such translation is needed: the timestamp is part of the key itself,
``namespace + b"v/" + key_utf8 + b"\\x00" + ts(8 bytes, big-endian)``. A fixed-width
big-endian number sorts bytewise in numeric order and ``\\x00`` (forbidden inside user keys)
sorts before every other byte, so all versions of one user key are contiguous and ordered
by time, and a single ``seek_for_prev(key + \\x00 + T)`` lands on the version that was current
at T. The value is ``b"\\x01" + value`` for a put and ``b"\\x00"`` for a deletion (tombstone).
Atomicity, which the seed gets from an etcd Txn, comes from one state-store ``Transaction``
(one synced RocksDB ``WriteBatch``): all saves, removals and ``additions`` of one call land
in one commit at one timestamp, together with the store's ``last_ts`` record and, if the
caller passes its own transaction, whatever else it stages there (e.g. the log position the
write was derived from, so that the write is applied exactly once).

Reads and write semantics, precisely:

* Keys are ``str`` (stored as UTF-8, without ``"\\x00"``), values are ``bytes``. Results of
  ``load_prefix`` are sorted by key (UTF-8 byte order, which equals ``str`` order).
* A read at ``ts`` sees exactly the writes with timestamp ``<= ts``; ``ts=None`` means the
  latest state. Reads never see writes still staged in a caller's uncommitted ``batch``.
* Write timestamps come from ``clock`` (the timestamp oracle) or, when replaying the log,
  from an explicit ``ts=``; either way each must be strictly greater than the previous one.
* Old versions are pruned by ``gc()`` when ``retention_ms`` is set; reads older than the
  persisted GC horizon raise ``SnapshotTooOld`` instead of returning a wrong answer.

The store does not own the ``StateStore``: the caller opens it, writes its own keys into it
outside ``namespace``, and closes it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence

from vectorlog.core.errors import VectorlogError
from vectorlog.state.base import StateIterator, StateStore, Transaction

# --------------------------------------------------------------------------- key layout

#: Width of an encoded timestamp in a version key (big-endian, so bytes sort like numbers).
TS_BYTES = 8
#: Largest encodable timestamp; also the "latest" read timestamp.
MAX_TS = (1 << (8 * TS_BYTES)) - 1
#: Hybrid timestamps: physical milliseconds << LOGICAL_BITS | logical counter.
LOGICAL_BITS = 18
#: Separator between the user key and its timestamp; forbidden inside user keys.
KEY_SEP = b"\x00"
#: Seek target just past every version of a user key (``key + KEY_SEP + ts`` < ``key + END``).
KEY_END = b"\x01"
#: Sub-namespace of the version records: ``namespace + VERSIONS + key + KEY_SEP + ts``.
VERSIONS = b"v/"
#: Record holding the timestamp of the last write (8 bytes big-endian).
LAST_TS_RECORD = b"last_ts"
#: Record holding the GC horizon: reads below it are refused (8 bytes big-endian).
GC_HORIZON_RECORD = b"gc_horizon"
#: First byte of a version value: a put (followed by the value) or a tombstone (alone).
PUT_MARK = b"\x01"
TOMBSTONE = b"\x00"
#: GC works in chunks of about this many version records scanned, each chunk under the write
#: lock and in one commit, so writes go on between chunks.
GC_CHUNK = 10_000


def encode_ts(ts: int) -> bytes:
    """Encode a timestamp as 8 bytes big-endian; ``ValueError`` if out of range."""
    if not 0 <= ts <= MAX_TS:
        raise ValueError(f"timestamp {ts!r} is outside [0, 2**64)")
    return ts.to_bytes(TS_BYTES, "big")


def decode_ts(raw: bytes) -> int:
    """Decode an 8-byte big-endian timestamp."""
    return int.from_bytes(raw, "big")


def physical_ms(ts: int) -> int:
    """The physical (millisecond) part of a hybrid timestamp."""
    return ts >> LOGICAL_BITS


def versions_prefix(namespace: bytes) -> bytes:
    """Prefix of every version record in ``namespace``."""
    return namespace + VERSIONS


def encode_user_key(key: str) -> bytes:
    """UTF-8 bytes of a user key (or prefix); ``InvalidKey`` if it is not storable."""
    if not isinstance(key, str):
        raise InvalidKey(key, f"keys are str, got {type(key).__name__}")
    if "\x00" in key:
        raise InvalidKey(key, "keys must not contain '\\x00' (it separates key and timestamp)")
    try:
        return key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidKey(key, f"not encodable as UTF-8: {exc.reason}") from None


def version_key(namespace: bytes, key: bytes, ts: int) -> bytes:
    """The record key of the version of (UTF-8) ``key`` written at ``ts``."""
    return versions_prefix(namespace) + key + KEY_SEP + encode_ts(ts)


def split_version_key(namespace: bytes, record: bytes) -> tuple[bytes, int]:
    """Inverse of :func:`version_key`: ``(utf8_user_key, ts)``."""
    start = len(versions_prefix(namespace))
    return record[start : -TS_BYTES - 1], decode_ts(record[-TS_BYTES:])


def last_ts_key(namespace: bytes) -> bytes:
    """Record key holding the timestamp of the last write."""
    return namespace + LAST_TS_RECORD


def gc_horizon_key(namespace: bytes) -> bytes:
    """Record key holding the persisted GC horizon."""
    return namespace + GC_HORIZON_RECORD


# --------------------------------------------------------------------------- errors


class SnapshotKVError(VectorlogError):
    """Base class of every error raised by :class:`SnapshotKV`."""


class KeyNotFound(SnapshotKVError, KeyError):
    """The key does not exist (never written, or deleted) as of ``ts`` (None = latest)."""

    def __init__(self, key: str, ts: int | None) -> None:
        super().__init__(key, ts)
        self.key, self.ts = key, ts

    def __str__(self) -> str:
        when = "at the latest timestamp" if self.ts is None else f"as of ts {self.ts}"
        return f"key {self.key!r} not found {when}"


class SnapshotTooOld(SnapshotKVError):
    """A read asked for a timestamp older than the GC horizon: those versions are gone."""

    def __init__(self, ts: int, horizon: int) -> None:
        super().__init__(ts, horizon)
        self.ts, self.horizon = ts, horizon

    def __str__(self) -> str:
        return (
            f"cannot read as of ts {self.ts}: versions older than the GC horizon "
            f"{self.horizon} (physical ms {physical_ms(self.horizon)}) have been pruned"
        )


class TimestampNotIncreasing(SnapshotKVError):
    """A write's timestamp is not greater than the previous write's."""

    def __init__(self, ts: int, last_ts: int, source: str = "explicit ts") -> None:
        super().__init__(ts, last_ts, source)
        self.ts, self.last_ts, self.source = ts, last_ts, source

    def __str__(self) -> str:
        return (
            f"write timestamp {self.ts} ({self.source}) must be greater than the last "
            f"write's timestamp {self.last_ts}"
        )


class InvalidKey(SnapshotKVError, ValueError):
    """A key (or prefix, or caller's extra record key) cannot be used."""

    def __init__(self, key: object, reason: str) -> None:
        super().__init__(key, reason)
        self.key, self.reason = key, reason

    def __str__(self) -> str:
        return f"invalid key {self.key!r}: {self.reason}"


Addition = Callable[[int], tuple[str, bytes]]
"""Called with the write's timestamp; returns one ``(key, value)`` to save at that ts."""


# --------------------------------------------------------------------------- the store


class SnapshotKV:
    """Timestamped key-value store over an open ``StateStore`` (see module docstring).

    ``clock`` returns a fresh, strictly increasing hybrid timestamp (the timestamp oracle);
    it is called once per write that has no explicit ``ts=``, and by ``gc()`` without
    ``now_ts``. ``namespace`` prefixes every record this store writes; the caller must not
    write under it. ``retention_ms`` (None = keep every version) is how much history
    ``gc()`` keeps. The store is safe to share between threads (writes are serialised).
    """

    def __init__(
        self,
        store: StateStore,
        clock: Callable[[], int],
        namespace: bytes = b"meta/",
        retention_ms: int | None = None,
    ) -> None:
        if not isinstance(namespace, bytes) or not namespace:
            raise ValueError(f"namespace must be non-empty bytes, got {namespace!r}")
        if retention_ms is not None and retention_ms < 0:
            raise ValueError(f"retention_ms must be >= 0 or None, got {retention_ms}")
        self._store, self._clock, self._ns = store, clock, namespace
        self._retention_ms = retention_ms
        self._vp = versions_prefix(namespace)
        self._last_ts_key, self._horizon_key = last_ts_key(namespace), gc_horizon_key(namespace)
        self._last_ts = self._read_record(self._last_ts_key)
        self._horizon = self._read_record(self._horizon_key)
        self._lock = threading.Lock()

    def refresh(self) -> None:
        """Re-reads ``last_ts`` from the store. Call it when a ``batch`` this store staged
        into was aborted or its commit failed, so that ``last_ts`` is what is on disk."""
        with self._lock:
            self._last_ts = self._read_record(self._last_ts_key)

    def _read_record(self, record: bytes) -> int:
        raw = self._store.get(record)
        return 0 if raw is None else decode_ts(raw)

    # ------------------------------------------------------------------ properties

    @property
    def last_ts(self) -> int:
        """Timestamp of the last write (0 if none). Advances when a write is staged, also
        into a caller's ``batch``; it is recovered from disk on construction."""
        return self._last_ts

    @property
    def gc_horizon(self) -> int:
        """Oldest readable timestamp (0 = everything is readable)."""
        return self._horizon

    @property
    def namespace(self) -> bytes:
        return self._ns

    @property
    def retention_ms(self) -> int | None:
        return self._retention_ms

    # ------------------------------------------------------------------ writes

    def save(
        self,
        key: str,
        value: bytes,
        *,
        ts: int | None = None,
        batch: Transaction | None = None,
        extra: Sequence[tuple[bytes, bytes]] = (),
    ) -> int:
        """Set ``key`` to ``value``; return the write's timestamp.

        ``ts``: explicit timestamp (log replay) instead of calling ``clock``; it must exceed
        ``last_ts`` (else :class:`TimestampNotIncreasing`). ``batch``: a ``Transaction`` of
        the store the records are staged into; the caller commits it (nothing is written
        here). ``extra``: raw ``(key, value)`` records outside ``namespace`` staged in the
        same transaction. Without ``batch`` the store commits its own transaction (one
        synced write).
        """
        return self._write({key: value}, (), (), (), ts=ts, batch=batch, extra=extra)

    def multi_save(
        self,
        kvs: Mapping[str, bytes],
        additions: Sequence[Addition] = (),
        *,
        ts: int | None = None,
        batch: Transaction | None = None,
        extra: Sequence[tuple[bytes, bytes]] = (),
    ) -> int:
        """Save every item of ``kvs`` plus one item per addition, atomically at one ts.

        Each addition is called with the write's timestamp and returns ``(key, value)``
        (so a record can hold its own creation time). An addition's key overrides the same
        key in ``kvs``. If an addition raises, nothing is written and ``last_ts`` does not
        move. ``ts``, ``batch`` and ``extra`` are as in :meth:`save`.
        """
        return self._write(kvs, (), (), additions, ts=ts, batch=batch, extra=extra)

    def multi_save_and_remove_prefix(
        self,
        saves: Mapping[str, bytes],
        removal_prefixes: Sequence[str],
        additions: Sequence[Addition] = (),
        *,
        ts: int | None = None,
        batch: Transaction | None = None,
        extra: Sequence[tuple[bytes, bytes]] = (),
    ) -> int:
        """Delete, as of the write's ts, every key live (at ``last_ts``) under each prefix,
        and save ``saves`` and the additions, all atomically at one ts.

        A key both saved and under a removed prefix ends up saved (saves win). Reads as of
        an earlier ts still see the removed keys. In ``batch`` mode the live keys are taken
        from what is written in the database, not from records pending in ``batch``.
        """
        return self._write(saves, removal_prefixes, (), additions, ts=ts, batch=batch, extra=extra)

    def multi_save_and_remove(
        self,
        saves: Mapping[str, bytes],
        removals: Sequence[str],
        additions: Sequence[Addition] = (),
        *,
        ts: int | None = None,
        batch: Transaction | None = None,
        extra: Sequence[tuple[bytes, bytes]] = (),
    ) -> int:
        """Like :meth:`multi_save_and_remove_prefix` with exact keys: tombstone each key of
        ``removals`` (live or not) and save ``saves`` and the additions, atomically at one ts.
        A key both saved and removed ends up saved."""
        return self._write(saves, (), removals, additions, ts=ts, batch=batch, extra=extra)

    def remove(
        self,
        key: str,
        *,
        ts: int | None = None,
        batch: Transaction | None = None,
        extra: Sequence[tuple[bytes, bytes]] = (),
    ) -> int:
        """Delete ``key`` as of the write's ts (a tombstone, written even if the key is not
        live, so that replaying the same event always writes the same records)."""
        return self._write({}, (), (key,), (), ts=ts, batch=batch, extra=extra)

    def _write(
        self,
        saves: Mapping[str, bytes],
        removal_prefixes: Sequence[str],
        removals: Sequence[str],
        additions: Sequence[Addition],
        *,
        ts: int | None,
        batch: Transaction | None,
        extra: Sequence[tuple[bytes, bytes]],
    ) -> int:
        """Stage one atomic write: prefix removals, then removals, saves, additions
        (later ones win on the same key), plus ``last_ts`` and ``extra``."""
        staged: dict[bytes, bytes | None] = {encode_user_key(k): None for k in removals}
        staged.update({encode_user_key(k): _as_bytes(k, v) for k, v in saves.items()})
        prefixes = [encode_user_key(p) for p in removal_prefixes]
        extra_records = self._check_extra(extra)
        with self._lock:
            wts = self._next_ts(ts)
            ops: dict[bytes, bytes | None] = dict.fromkeys(self._live_keys_under(prefixes))
            ops.update(staged)
            ops.update(_run_additions(additions, wts))
            target = self._store.transaction() if batch is None else batch
            self._fill(target, ops, wts, extra_records)
            if batch is None:
                target.commit()
            self._last_ts = wts
        return wts

    def _next_ts(self, ts: int | None) -> int:
        """The timestamp of the next write; it must exceed ``last_ts``."""
        source = "explicit ts"
        if ts is None:
            ts, source = self._clock(), "from the clock"
        encode_ts(ts)  # range check
        if ts <= self._last_ts:
            raise TimestampNotIncreasing(ts, self._last_ts, source)
        return ts

    def _check_extra(self, extra: Sequence[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        """Caller records must be raw bytes outside this store's namespace."""
        records = []
        for key, value in extra:
            if not isinstance(key, bytes):
                raise InvalidKey(key, "extra record keys are raw bytes")
            if key.startswith(self._ns):
                raise InvalidKey(key, f"extra records must not be under namespace {self._ns!r}")
            records.append((key, _as_bytes(key, value)))
        return records

    def _fill(
        self,
        batch: Transaction,
        ops: Mapping[bytes, bytes | None],
        ts: int,
        extra: Sequence[tuple[bytes, bytes]],
    ) -> None:
        """Add the version records (None = tombstone), ``last_ts`` and ``extra``."""
        suffix = KEY_SEP + encode_ts(ts)
        for key, value in ops.items():
            batch.put(self._vp + key + suffix, TOMBSTONE if value is None else PUT_MARK + value)
        batch.put(self._last_ts_key, encode_ts(ts))
        for record, value in extra:
            batch.put(record, value)

    def _live_keys_under(self, prefixes: Sequence[bytes]) -> list[bytes]:
        """UTF-8 user keys live at the latest timestamp under any of ``prefixes``."""
        live: list[bytes] = []
        for prefix in prefixes:
            live.extend(key for key, _ in self._scan_prefix(prefix, MAX_TS))
        return live

    # ------------------------------------------------------------------ reads

    def load(self, key: str, ts: int | None = None) -> bytes:
        """The value of ``key`` as of ``ts`` (None = latest).

        Raises :class:`KeyNotFound` if the key was never written or was deleted as of
        ``ts``, :class:`SnapshotTooOld` if ``ts`` is older than the GC horizon.
        """
        raw_key = encode_user_key(key)
        read_ts = self._read_ts(ts)
        value = self._value_at(self._store.iter(), raw_key, read_ts)
        self._read_ts(ts)  # re-check: a concurrent gc() may have raised the horizon
        if value is None:
            raise KeyNotFound(key, ts)
        return value

    def load_prefix(self, prefix: str, ts: int | None = None) -> tuple[list[str], list[bytes]]:
        """``(keys, values)`` of every key starting with ``prefix`` live as of ``ts``
        (None = latest), sorted by key. ``""`` matches every key.
        Raises :class:`SnapshotTooOld` if ``ts`` is older than the GC horizon."""
        raw_prefix = encode_user_key(prefix)
        read_ts = self._read_ts(ts)
        found = list(self._scan_prefix(raw_prefix, read_ts))
        self._read_ts(ts)  # re-check: a concurrent gc() may have raised the horizon
        return [k.decode("utf-8") for k, _ in found], [v for _, v in found]

    def version_count(self, prefix: str = "") -> int:
        """Number of stored version records (puts and tombstones) of keys under ``prefix``."""
        start = self._vp + encode_user_key(prefix)
        it, count = self._store.iter(), 0
        it.seek(start)
        while it.valid() and it.key().startswith(start):
            count += 1
            it.next()
        return count

    def history(self, prefix: str) -> dict[str, list[tuple[int, bytes | None]]]:
        """Returns, for every key under ``prefix`` with a version still stored (live or
        deleted), its versions oldest first: ``(ts, value)``, value None for a deletion.
        Versions below the GC horizon may be gone."""
        start = self._vp + encode_user_key(prefix)
        out: dict[str, list[tuple[int, bytes | None]]] = {}
        it = self._store.iter()
        it.seek(start)
        while it.valid() and it.key().startswith(start):
            raw_key, ts = split_version_key(self._ns, it.key())
            value: bytes = it.value()
            versions = out.setdefault(raw_key.decode("utf-8"), [])
            versions.append((ts, value[1:] if value[:1] == PUT_MARK else None))
            it.next()
        return out

    def _read_ts(self, ts: int | None) -> int:
        """The timestamp to read at; refuses timestamps below the GC horizon."""
        if ts is None:
            return MAX_TS
        encode_ts(ts)  # range check
        if ts < self._horizon:
            raise SnapshotTooOld(ts, self._horizon)
        return ts

    def _value_at(self, it: StateIterator, raw_key: bytes, ts: int) -> bytes | None:
        """Value of the version of ``raw_key`` current at ``ts``; None if absent/deleted."""
        head = self._vp + raw_key + KEY_SEP
        it.seek_for_prev(head + encode_ts(ts))
        if not it.valid():
            return None
        record = it.key()
        if len(record) != len(head) + TS_BYTES or not record.startswith(head):
            return None
        value: bytes = it.value()
        return value[1:] if value[:1] == PUT_MARK else None

    def _scan_prefix(self, raw_prefix: bytes, ts: int) -> Iterator[tuple[bytes, bytes]]:
        """``(utf8_key, value)`` of keys under ``raw_prefix`` live at ``ts``, in key order.

        Skip-scan: for each distinct user key, one seek_for_prev to its version at ``ts``
        and one seek past its last version, whatever the number of versions."""
        start = self._vp + raw_prefix
        it = self._store.iter()
        it.seek(start)
        while it.valid():
            record = it.key()
            if not record.startswith(start):
                return
            raw_key = record[len(self._vp) : -TS_BYTES - 1]
            value = self._value_at(it, raw_key, ts)
            if value is not None:
                yield raw_key, value
            it.seek(self._vp + raw_key + KEY_END)

    # ------------------------------------------------------------------ garbage collection

    def gc(
        self,
        now_ts: int | None = None,
        chunk: int = GC_CHUNK,
        on_chunk: Callable[[int], None] | None = None,
    ) -> int:
        """Prune versions no read at or after the horizon can see; return how many.

        horizon = ``(physical_ms(now) - retention_ms) << 18`` (``now`` = ``now_ts`` or the
        clock); it never moves backwards and is persisted with the deletions. For each
        key, every version older than the newest version ``<= horizon`` is deleted; that
        version is kept (it is the value as of the horizon) unless it is a tombstone.
        Afterwards reads at ``ts >= horizon`` answer exactly as before; reads below raise
        :class:`SnapshotTooOld`. No-op (returns 0) when ``retention_ms`` is None.

        The work is done in chunks of at most about ``chunk`` version records scanned, each
        under the write lock and committed on its own: writes go on between chunks (each
        chunk's deletions are decided from the store as it is then, so a write between
        chunks is seen like one made before the GC). ``on_chunk(deleted)`` runs after each
        chunk, without the lock held.
        """
        if self._retention_ms is None:
            return 0
        now = self._clock() if now_ts is None else now_ts
        encode_ts(now)  # range check
        horizon_ms = max(0, physical_ms(now) - self._retention_ms)
        with self._lock:
            horizon = max(self._horizon, horizon_ms << LOGICAL_BITS)
            # Raised before anything is deleted: reads re-check it after reading.
            self._horizon = horizon
        start: bytes | None = self._vp
        deleted = 0
        while start is not None:
            with self._lock:
                doomed, start = self._doomed_chunk(start, horizon, max(1, chunk))
                self._delete_versions(doomed, horizon)
            deleted += len(doomed)
            if on_chunk is not None:
                on_chunk(len(doomed))
        return deleted

    def _delete_versions(self, doomed: list[bytes], horizon: int) -> None:
        """Delete the records in one commit that also persists the horizon."""
        txn = self._store.transaction()
        txn.put(self._horizon_key, encode_ts(horizon))
        for record in doomed:
            txn.delete(record)
        txn.commit()

    def _doomed_chunk(
        self, start: bytes, horizon: int, chunk: int
    ) -> tuple[list[bytes], bytes | None]:
        """Scans version records from ``start`` (a key's first version to decide) until
        about ``chunk`` were scanned; returns those invisible to every read at ``ts >=
        horizon`` and where the next chunk starts (None: the scan is complete)."""
        it = self._store.iter()
        it.seek(start)
        doomed: list[bytes] = []
        head: bytes | None = None
        older: list[bytes] = []  # versions <= horizon of the current key, oldest first
        newest_is_tombstone, scanned = False, 0
        while it.valid():
            record = it.key()
            if not record.startswith(self._vp):
                break
            old = decode_ts(record[-TS_BYTES:]) <= horizon
            if record[:-TS_BYTES] != head:
                doomed += _obsolete(older, newest_is_tombstone)
                head, older = record[:-TS_BYTES], []
                if scanned >= chunk:
                    return doomed, record
            elif scanned >= chunk:  # in the middle of one key's versions
                if not old:  # every version <= horizon of this key was seen
                    return doomed + _obsolete(older, newest_is_tombstone), head[:-1] + KEY_END
                return doomed + older, record  # all older than this one, which is <= horizon
            if old:
                older.append(record)
                newest_is_tombstone = it.value()[:1] == TOMBSTONE
            scanned += 1
            it.next()
        return doomed + _obsolete(older, newest_is_tombstone), None

    def __repr__(self) -> str:
        return (
            f"SnapshotKV(namespace={self._ns!r}, last_ts={self._last_ts}, "
            f"gc_horizon={self._horizon}, retention_ms={self._retention_ms})"
        )


# --------------------------------------------------------------------------- helpers


def _as_bytes(key: object, value: object) -> bytes:
    """Values are bytes (bytes-like accepted and copied)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"value of {key!r} must be bytes, got {type(value).__name__}")


def _run_additions(additions: Sequence[Addition], ts: int) -> dict[bytes, bytes]:
    """Call each addition with the write's timestamp; return its validated records."""
    records: dict[bytes, bytes] = {}
    for addition in additions:
        key, value = addition(ts)
        records[encode_user_key(key)] = _as_bytes(key, value)
    return records


def _obsolete(older: list[bytes], newest_is_tombstone: bool) -> list[bytes]:
    """Of one key's versions ``<= horizon`` (oldest first), those no longer needed: all
    but the newest, and the newest too when it is a tombstone."""
    return older if newest_is_tombstone else older[:-1]
