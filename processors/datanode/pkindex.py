"""The data node's primary-key index: per vchannel, each key's newest row (segment, ts), kept
in the state store one record per key (`pk_key`), and the changes to it staged with the
checkpoint that covers them (`stage_index`): a replay from the checkpoint redelivers the
events of every change left out. `KeyIndex` is the node's copy in memory."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from itertools import chain
from typing import Any, cast

import numpy as np

from vectorlog.schemas.serde import Event
from vectorlog.state.base import StateStore, Transaction
from vectorlog.streams.msgstream import StreamPosition

PK_PREFIX = b"pk/"

Entry = tuple[int, int]  # (segment id, ts) of a key's newest row
ENTRY = struct.Struct(">qQ")


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


def read_index(state: StateStore, vchannel: str) -> dict[Any, Entry]:
    """Returns a vchannel's primary-key index as the state store holds it."""
    index: dict[Any, Entry] = {}
    for key, raw in state.items(PK_PREFIX + vchannel.encode() + b"\x00"):
        index[pk_of(key[len(PK_PREFIX) + len(vchannel.encode()) + 1 :])] = ENTRY.unpack(raw)
    return index


def stage_index(
    txn: Transaction,
    changes_by_p: dict[int, list[Change]],
    newest: dict[str, dict[Any, Entry]],
    points: dict[int, StreamPosition],
) -> None:
    """Stages each key changed before the checkpoint with its entry as of the checkpoint
    (a later change's previous entry, else the current one); keeps the later changes.
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
            stage_fresh(txn, vch, changed)
            continue
        keys: dict[Any, None] = {}
        for c in changed:
            keys.update(dict.fromkeys(c.pks))
        entries = dict(zip(keys, map(newest.get(vch, {}).get, keys), strict=True))
        earlier = entries_before(vch, later)
        for pk in earlier.keys() & entries.keys():
            entries[pk] = earlier[pk]
        stage_entries(txn, vch, entries)


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


def stage_fresh(txn: Transaction, vch: str, changes: list[Change]) -> None:
    """Stages the keys of `fresh` changes of vchannel `vch`, each with its change's entry
    (a checkpoint after a write of inserted rows: ~90k keys took 26 ms of CPU with the
    GIL held looking each one up, the data node's longest hold)."""
    pks: list[Any] = list(chain.from_iterable(c.pks for c in changes))
    packed = [ENTRY.pack(*cast(Entry, c.entry)) for c in changes]
    order = key_order(pks)
    values: list[bytes] = []
    if order is None:
        for c, value in zip(changes, packed, strict=True):
            values += [value] * len(c.pks)
    else:  # in key order: RocksDB puts 90k keys in ~10 ms so, 50-100 ms shuffled
        which = np.repeat(np.arange(len(changes)), [len(c.pks) for c in changes])[order]
        pks = [pks[i] for i in order.tolist()]
        values = [packed[i] for i in which.tolist()]
    txn.put_many(pk_keys(vch, pks), values)


def key_order(pks: list[Any]) -> np.ndarray | None:
    """Returns the permutation that puts int keys in the byte order of their state keys
    (`pk_key`: big-endian two's complement), None if they are in it already or are not all
    ints (then they are staged as they come)."""
    if not pks or set(map(type, pks)) != {int}:
        return None
    bits = np.array(pks, np.int64).view(np.uint64)
    if bool(np.all(bits[1:] >= bits[:-1])):
        return None
    return np.argsort(bits, kind="stable")


def stage_entries(txn: Transaction, vch: str, entries: dict[Any, Entry | None]) -> None:
    """Stages a vchannel's keys: a put of each entry, a delete of each None."""
    gone = [pk for pk, e in entries.items() if e is None] if None in entries.values() else []
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

    def of(self, vchannel: str) -> dict[Any, Entry]:
        """Returns a vchannel's primary-key index (key -> its newest row's segment and ts),
        read from the state store at its first use: one record per key, seconds for
        millions, so a restart waits for none of it and a vchannel without writes never
        loads it."""
        index = self.newest.get(vchannel)
        if index is None:
            index = self.newest[vchannel] = read_index(self.state, vchannel)
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
        """Stages the primary-key index as of the checkpoint `points` (`stage_index`)."""
        stage_index(txn, self.changes, self.newest, points)
