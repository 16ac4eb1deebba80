"""The data node's primary-key index: per vchannel, each key's newest row (segment, ts), and the
changes to it staged with the checkpoint that covers them (`stage_index`): a replay from the
checkpoint redelivers the events of every change left out. `KeyIndex` is the node's copy in
memory.

In the state store, a vchannel of int keys gets one record per checkpoint (`delta_key`: its
puts and deletes as arrays, applied in sequence order when read); other keys, and stores
written before, one record per key (`pk_key`), read first. A checkpoint of 80k inserted keys
put 80k records in one RocksDB write, ~40 ms with the GIL held; it puts one now (issue 28).
A checkpoint merges a vchannel's deltas in the same transaction (`merge_start`,
`merge_deltas`): all of them, with its int per-key records, into one delta of its live keys
(deletes dropped) once their entries pass twice its keys (upserts); a trailing run of small
deltas (few changes a checkpoint) into one once it counts more than MERGE_AFTER. The store and
a restart's read grow with the keys, not with the changes, and each change is merged a few
times at most. A transaction that writes a delta stages state format 2 (DELTA_FORMAT), which
a build that ignores deltas refuses to open."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain
from typing import Any, cast

import numpy as np

from vectorlog.schemas.serde import Event
from vectorlog.state.base import StateStore, Transaction
from vectorlog.streams.msgstream import StreamPosition

PK_PREFIX = b"pk/"
DELTA_PREFIX = b"pkd/"

Entry = tuple[int, int]  # (segment id, ts) of a key's newest row
ENTRY = struct.Struct(">qQ")
DELTA_HEAD = struct.Struct(">QQ")  # keys put, keys deleted
#: the state store format of a store with deltas (vectorlog/state/metadata.py)
DELTA_FORMAT = 2
#: all of a vchannel's deltas are merged once their entries pass twice its keys plus this
MERGE_SLACK = 10_000
#: its trailing deltas smaller than MERGE_ENTRIES are merged once there are more than
#: MERGE_AFTER, or they hold MERGE_ENTRIES entries (`merge_start`)
MERGE_AFTER = 32
MERGE_ENTRIES = 1 << 16


@dataclass(frozen=True)
class Change:
    """Keys whose newest-row entries the event at (its pchannel's) `offset`, `ts` changed;
    `prevs[i]` is pks[i]'s entry before (prevs None: no key had one); `entry` the one entry
    every key got (None: not one for all, or none: a delete)."""

    offset: int
    ts: int
    vchannel: str
    pks: list[Any]
    prevs: list[Entry | None] | None
    entry: Entry | None = None

    @property
    def fresh(self) -> bool:
        """Whether every key of the change had no entry before it and got `entry`: such a
        key is in no other change of its vchannel (a change of it after this one holds
        prevs)."""
        return self.prevs is None and self.entry is not None

    def delivered_before(self, point: StreamPosition) -> bool:
        """Whether a replay from `point` would not redeliver the change's event."""
        return self.offset < point.offset or (
            self.ts <= point.tick and self.offset < point.tick_offset
        )


def pk_key(vchannel: str, pk: Any) -> bytes:
    """Returns the state key of a primary key's newest-row entry in a vchannel."""
    raw = (
        b"i" + int(pk).to_bytes(8, "big", signed=True)
        if isinstance(pk, int)
        else b"s" + str(pk).encode()
    )
    return PK_PREFIX + vchannel.encode() + b"\x00" + raw


def pk_keys(vchannel: str, pks: list[Any]) -> list[bytes]:
    """Returns `pk_key(vchannel, pk)` of each pk, built in one numpy pass if all are ints."""
    if not pks or set(map(type, pks)) != {int}:
        return [pk_key(vchannel, pk) for pk in pks]
    head = PK_PREFIX + vchannel.encode() + b"\x00i"
    rows = np.empty((len(pks), len(head) + 8), np.uint8)
    rows[:, : len(head)] = np.frombuffer(head, np.uint8)
    rows[:, len(head) :] = np.array(pks, ">i8").view(np.uint8).reshape(-1, 8)
    return cast(list[bytes], rows.view(f"V{rows.shape[1]}").ravel().tolist())  # bytes each


def pk_of(raw: bytes) -> Any:
    """Returns the primary key a state key ends with (the part after `pk_key`'s vchannel)."""
    kind, body = raw[:1], raw[1:]
    return int.from_bytes(body, "big", signed=True) if kind == b"i" else body.decode()


def read_index(state: StateStore, vchannel: str) -> tuple[dict[Any, Entry], int, list[int]]:
    """Returns a vchannel's primary-key index as the state store holds it (its per-key
    records, then its deltas in sequence order), its last delta's sequence number (-1:
    none), and each delta's entries (puts and deletes)."""
    index: dict[Any, Entry] = {}
    head = vchannel.encode() + b"\x00"
    for key, raw in state.items(PK_PREFIX + head):
        index[pk_of(key[len(PK_PREFIX) + len(head) :])] = ENTRY.unpack(raw)
    seq, sizes = -1, []
    for key, raw in state.items(DELTA_PREFIX + head):
        apply_delta(index, raw)
        seq = int.from_bytes(key[len(DELTA_PREFIX) + len(head) :], "big")
        sizes.append(sum(DELTA_HEAD.unpack_from(raw)))
    return index, seq, sizes


def delta_sizes(state: StateStore, vchannel: str) -> list[int]:
    """Returns the entries (puts and deletes) of each of a vchannel's deltas in the store."""
    head = DELTA_PREFIX + vchannel.encode() + b"\x00"
    return [sum(DELTA_HEAD.unpack_from(raw)) for _, raw in state.items(head)]


def merge_start(sizes: list[int], live: int) -> int | None:
    """Returns where a vchannel's deltas (their entries: `sizes`, in sequence order) are to
    be merged from, None if not yet: 0 (all of them, deletes dropped) once they hold more
    than twice its `live` keys (plus MERGE_SLACK); else the start of the trailing run of
    deltas smaller than MERGE_ENTRIES once it counts more than MERGE_AFTER of them, or
    MERGE_ENTRIES entries. Larger deltas are not merged for their number: a checkpoint after
    a buffer write (~80k keys) reads back as fast in its own record."""
    if len(sizes) > 1 and sum(sizes) > 2 * live + MERGE_SLACK:
        return 0
    start = len(sizes)
    while start > 0 and sizes[start - 1] < MERGE_ENTRIES:
        start -= 1
    run = sizes[start:]
    if len(run) > MERGE_AFTER or (len(run) > 1 and sum(run) >= MERGE_ENTRIES):
        return start
    return None


def merge_deltas(
    txn: Transaction, state: StateStore, vchannel: str, seq: int, live: int
) -> list[int] | None:
    """Stages the replacement of a vchannel's deltas in the store from `merge_start` on by
    one delta numbered `seq` (after theirs) with their net puts and deletes: read back, the
    same index. Merging from the first, its int per-key records are folded in and the deletes
    dropped (the live keys with their entries). Returns the entries of each delta after the
    merge, None if none is due."""
    head = vchannel.encode() + b"\x00"
    deltas = list(state.items(DELTA_PREFIX + head))
    sizes = [sum(DELTA_HEAD.unpack_from(raw)) for _, raw in deltas]
    start = merge_start(sizes, live)
    if start is None:
        return None
    parts: tuple[list[np.ndarray], ...] = ([], [], [], [])  # keys, segments, ts, put or not
    full = start == 0 and fold_records(txn, state, vchannel, parts)
    for key, raw in deltas[start:]:
        n, g = DELTA_HEAD.unpack_from(raw)
        cols = np.frombuffer(raw, ">i8", 3 * n + g, DELTA_HEAD.size).astype(np.int64)
        none = np.zeros(g, np.int64)
        puts = (cols[:n], cols[n : 2 * n], cols[2 * n : 3 * n], np.ones(n, bool))
        deletes = (cols[3 * n :], none, none, np.zeros(g, bool))
        for part, put, delete in zip(parts, puts, deletes, strict=True):
            part += [put, delete]
        txn.delete(key)
    return sizes[:start] + [stage_net(txn, vchannel, seq, parts, keep_deletes=not full)]


def fold_records(
    txn: Transaction, state: StateStore, vchannel: str, parts: tuple[list[np.ndarray], ...]
) -> bool:
    """Stages the deletion of a vchannel's per-key records (a store written before deltas)
    and adds them to `parts` (as `merge_deltas`'s) if every key is an int. Returns whether
    it did (False: a key a delta cannot hold; nothing staged)."""
    head = PK_PREFIX + vchannel.encode() + b"\x00"
    records = [(key, pk_of(key[len(head) :]), raw) for key, raw in state.items(head)]
    if not all(type(pk) is int for _, pk, _ in records):
        return False
    for key, _, _ in records:
        txn.delete(key)
    entries = np.array([ENTRY.unpack(raw) for _, _, raw in records], np.uint64).reshape(-1, 2)
    parts[0].append(np.array([pk for _, pk, _ in records], np.int64))
    parts[1].append(entries[:, 0].view(np.int64))
    parts[2].append(entries[:, 1].view(np.int64))
    parts[3].append(np.ones(len(records), bool))
    return True


def stage_net(
    txn: Transaction,
    vchannel: str,
    seq: int,
    parts: tuple[list[np.ndarray], ...],
    keep_deletes: bool,
) -> int:
    """Stages delta `seq` of the net state of puts and deletes (`parts`: keys, segments, ts
    as int64, whether a put; in order, each key's last one wins), its deletes dropped unless
    `keep_deletes` (deltas before it may hold their keys). Returns its entries."""
    keys, segs, tss, put = (np.concatenate(p) for p in parts)
    order = np.argsort(keys)  # not stable: 1/6 of the CPU of a stable sort of 500k keys
    ordered = keys[order]
    starts = np.flatnonzero(np.append(True, ordered[1:] != ordered[:-1]))
    last = np.maximum.reduceat(order, starts) if len(keys) else order  # each key's last op
    gone = keys[last[~put[last]]] if keep_deletes else np.zeros(0, np.int64)
    last = last[put[last]]
    cols = (segs[last], tss[last].view(np.uint64))
    txn.put(delta_key(vchannel, seq), encode_delta(keys[last], *cols, gone))
    return len(last) + len(gone)


def last_seq(state: StateStore, vchannel: str) -> int:
    """Returns the sequence number of a vchannel's last delta in the state store (-1: none)."""
    it = state.iter()
    it.seek_for_prev(delta_key(vchannel, 2**64 - 1))
    head = DELTA_PREFIX + vchannel.encode() + b"\x00"
    if not it.valid() or not it.key().startswith(head) or len(it.key()) != len(head) + 8:
        return -1
    return int.from_bytes(it.key()[len(head) :], "big")


def delta_key(vchannel: str, seq: int) -> bytes:
    """Returns the state key of a vchannel's `seq`th delta (in sequence order as bytes)."""
    return DELTA_PREFIX + vchannel.encode() + b"\x00" + seq.to_bytes(8, "big")


def encode_delta(
    pks: list[int] | np.ndarray,
    segs: np.ndarray,
    tss: np.ndarray,
    gone: list[int] | np.ndarray,
) -> bytes:
    """Returns a delta record: int keys `pks` get entries (segs[i], tss[i]), keys `gone`
    lose theirs (no key in both)."""
    return b"".join(
        (
            DELTA_HEAD.pack(len(pks), len(gone)),
            np.array(pks, ">i8").tobytes(),
            np.asarray(segs, ">i8").tobytes(),
            np.asarray(tss, ">u8").tobytes(),
            np.array(gone, ">i8").tobytes(),
        )
    )


def decode_delta(raw: bytes) -> tuple[list[int], list[Entry], list[int]]:
    """Returns a delta record's (`encode_delta`) keys put, their entries, keys deleted."""
    n, g = DELTA_HEAD.unpack_from(raw)
    cols = np.frombuffer(raw, ">i8", 3 * n + g, DELTA_HEAD.size)
    tss = cols[2 * n : 3 * n].view(">u8").tolist()
    entries = list(zip(cols[n : 2 * n].tolist(), tss, strict=True))
    return cols[:n].tolist(), entries, cols[3 * n :].tolist()


def apply_delta(index: dict[Any, Entry], raw: bytes) -> None:
    """Applies a delta record (`encode_delta`) to `index`."""
    pks, entries, gone = decode_delta(raw)
    index.update(zip(pks, entries, strict=True))
    for pk in gone:
        index.pop(pk, None)


def all_int(pks: Iterable[Any]) -> bool:
    """Whether every key is an int (not a bool), and there is one."""
    types = set(map(type, pks))
    return types == {int}


def stage_index(
    txn: Transaction,
    changes_by_p: dict[int, list[Change]],
    newest: dict[str, dict[Any, Entry]],
    points: dict[int, StreamPosition],
    seqs: dict[str, int],
    sizes: dict[str, list[int]],
) -> None:
    """Stages each key changed before the checkpoint with its entry as of the checkpoint
        (a later change's previous entry, else the current one); keeps the later changes.
        A vchannel of int keys gets one delta (numbered from `seqs`, each vchannel's next; its
    entries appended to `sizes`).
        Per vchannel, in bulk: no Python loop per key when every changed key is an int. A
        tick that commits no change (rows still buffered) costs one pass over them. A vchannel
        whose changes are all `fresh` (new keys only: inserts) stages each change's keys with
        its entry, looking no key up (`stage_fresh`)."""
    done: dict[str, list[Change]] = {}
    later: list[list[Change]] = []  # per stream partition, in order
    for p, changes in changes_by_p.items():
        point = points.get(p, StreamPosition())
        kept = []
        for c in changes:
            if c.delivered_before(point):
                done.setdefault(c.vchannel, []).append(c)
            else:
                kept.append(c)
        changes_by_p[p] = kept
        later.append(kept)
    for vch, changed in done.items():
        if all(c.fresh for c in changed) and all(
            c.prevs is None for kept in later for c in kept if c.vchannel == vch
        ):  # no key in two changes: each one's entry is its keys' entry as of the point
            stage_fresh(txn, vch, changed, seqs, sizes)
            continue
        keys: dict[Any, None] = {}
        for c in changed:
            keys.update(dict.fromkeys(c.pks))
        entries = dict(zip(keys, map(newest.get(vch, {}).get, keys), strict=True))
        earlier = entries_before(vch, later)
        for pk in earlier.keys() & entries.keys():
            entries[pk] = earlier[pk]
        stage_entries(txn, vch, entries, seqs, sizes)


def entries_before(vch: str, later: list[list[Change]]) -> dict[Any, Entry | None]:
    """Returns the entries of the keys of vchannel `vch` that the `later` changes (per
    stream partition, in order) changed, as before the first of them in each partition (a
    later partition's taking precedence, as the per-partition staging had it)."""
    as_of: dict[Any, Entry | None] = {}
    for kept in later:
        for c in reversed(kept):  # the first later change holds the entry as of the point
            if c.vchannel == vch:
                prevs = c.prevs if c.prevs is not None else [None] * len(c.pks)
                as_of.update(zip(c.pks, prevs, strict=True))
    return as_of


def stage_delta(
    txn: Transaction,
    vch: str,
    seqs: dict[str, int],
    sizes: dict[str, list[int]],
    pks: list[int],
    entries: tuple[np.ndarray, np.ndarray],
    gone: list[int],
) -> None:
    """Stages vchannel `vch`'s next delta: int keys `pks` get `entries` (their segments,
    their ts), keys `gone` lose theirs."""
    if pks or gone:
        seq = seqs[vch] = seqs.get(vch, -1) + 1
        txn.put(delta_key(vch, seq), encode_delta(pks, *entries, gone))
        sizes.setdefault(vch, []).append(len(pks) + len(gone))


def columns(
    entries: list[Entry], repeats: list[int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Returns the segments and the ts of `entries` (each `repeats[i]` times if given)."""
    segs = np.array([e[0] for e in entries], np.int64)
    tss = np.array([e[1] for e in entries], np.uint64)
    if repeats is not None:
        return segs.repeat(repeats), tss.repeat(repeats)
    return segs, tss


def stage_fresh(
    txn: Transaction,
    vch: str,
    changes: list[Change],
    seqs: dict[str, int],
    sizes: dict[str, list[int]],
) -> None:
    """Stages the keys of `fresh` changes of vchannel `vch`, each with its change's entry
    (a checkpoint after a write of inserted rows: ~90k keys took 26 ms of CPU with the
    GIL held looking each one up, the data node's longest hold): int keys as one delta."""
    pks: list[Any] = list(chain.from_iterable(c.pks for c in changes))
    if all_int(pks):
        entries = [cast(Entry, c.entry) for c in changes]
        repeats = [len(c.pks) for c in changes]
        stage_delta(txn, vch, seqs, sizes, pks, columns(entries, repeats), [])
        return
    values: list[bytes] = []
    for c in changes:
        values += [ENTRY.pack(*cast(Entry, c.entry))] * len(c.pks)
    txn.put_many(pk_keys(vch, pks), values)


def stage_entries(
    txn: Transaction,
    vch: str,
    entries: dict[Any, Entry | None],
    seqs: dict[str, int],
    sizes: dict[str, list[int]],
) -> None:
    """Stages a vchannel's keys: a put of each entry, a delete of each None (int keys: as
    one delta)."""
    gone = [pk for pk, e in entries.items() if e is None] if None in entries.values() else []
    if all_int(entries):
        kept_int = {pk: e for pk, e in entries.items() if e is not None} if gone else entries
        kept_entries = cast(list[Entry], list(kept_int.values()))
        stage_delta(txn, vch, seqs, sizes, list(kept_int), columns(kept_entries), gone)
        return
    for pk in gone:
        del entries[pk]
        txn.delete(pk_key(vch, pk))
    kept = cast(dict[Any, Entry], entries)  # every None was taken out above
    packed = {entry: ENTRY.pack(*entry) for entry in set(kept.values())}
    txn.put_many(pk_keys(vch, list(kept)), list(map(packed.__getitem__, kept.values())))


class KeyIndex:
    """The primary-key index in memory: per vchannel, each key's newest row (segment, ts),
    read from the state store at its first use, and the changes to it not yet committed."""

    def __init__(self, state: StateStore) -> None:
        self.state = state
        self.newest: dict[str, dict[Any, Entry]] = {}  # vch -> pk -> (seg, ts)
        self.changes: dict[int, list[Change]] = {}  # per pchannel, not yet committed
        self.seqs: dict[str, int] = {}  # vch -> its last delta's sequence number
        self.sizes: dict[str, list[int]] = {}  # vch -> each delta's entries, in the store

    def of(self, vchannel: str) -> dict[Any, Entry]:
        """Returns a vchannel's primary-key index (key -> its newest row's segment and ts),
        read from the state store at its first use: one record per key, seconds for
        millions, so a restart waits for none of it and a vchannel without writes never
        loads it."""
        index = self.newest.get(vchannel)
        if index is None:
            index, self.seqs[vchannel], self.sizes[vchannel] = read_index(self.state, vchannel)
            self.newest[vchannel] = index
        return index

    def index(self, event: Event, pks: list[Any], sid: int) -> list[tuple[int, Any]]:
        """Records each key's newest row. Returns (segment, key) of each older row a key had:
        an upsert, that row's segment gets a delete record at the event's ts. Keys never seen
        (the common case) take a path without a Python loop per row."""
        newest = self.of(event.vchannel)
        entry = (sid, event.ts)
        if newest.keys().isdisjoint(pks):
            self.record(event, pks, None, entry)
            newest.update(dict.fromkeys(pks, entry))
            return []
        changed, prevs, superseded = [], [], []
        for pk in pks:
            prev = newest.get(pk)
            if prev is not None and prev[1] >= event.ts:
                continue  # a replayed older row
            if prev is not None:
                superseded.append((prev[0], pk))
            changed.append(pk)
            prevs.append(prev)
            newest[pk] = entry
        self.record(event, changed, prevs, entry)
        return superseded

    def record(
        self,
        event: Event,
        pks: list[Any],
        prevs: list[Entry | None] | None,
        entry: Entry | None = None,
    ) -> None:
        """Remembers that an event changed these keys' entries (from `prevs`; None: none had
        one; to `entry` if it gave them all that one) until the change is committed with the
        checkpoint."""
        if pks:
            p, offset = event.source or (-1, -1)
            change = Change(offset, event.ts, event.vchannel, list(pks), prevs, entry)
            self.changes.setdefault(p, []).append(change)

    def stage(self, txn: Transaction, points: dict[int, StreamPosition]) -> None:
        """Stages the primary-key index as of the checkpoint `points` (`stage_index`): a
        vchannel's deltas go on from its last in the state store (also when its index was
        not read from there: a takeover's, rebuilt from binlogs)."""
        changed = {c.vchannel for cs in self.changes.values() for c in cs}
        for vch in changed - self.seqs.keys():
            self.seqs[vch] = last_seq(self.state, vch)
            self.sizes[vch] = delta_sizes(self.state, vch)
        self.merge(txn, changed)
        stage_index(txn, self.changes, self.newest, points, self.seqs, self.sizes)
        if any(self.sizes.get(vch) for vch in changed):  # 4 bytes, idempotent: no flag
            txn.set_format_version(DELTA_FORMAT)

    def merge(self, txn: Transaction, vchannels: set[str]) -> None:
        """Stages the merge of the deltas of each of `vchannels` that has one due
        (`merge_start`: the sizes kept here say when; the store's, which merge)."""
        for vch in sorted(vchannels):
            live = len(self.newest.get(vch, ()))
            if merge_start(self.sizes.get(vch, []), live) is not None:
                merged = merge_deltas(txn, self.state, vch, self.seqs[vch] + 1, live)
                if merged is not None:
                    self.seqs[vch], self.sizes[vch] = self.seqs[vch] + 1, merged
