"""The data node's primary-key index: per vchannel, each key's newest row (segment, ts), kept
in the state store one record per key (`pk_key`), and the changes to it staged with the
checkpoint that covers them (`stage_index`): a replay from the checkpoint redelivers the
events of every change left out."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from vectorlog.state.base import StateStore, Transaction
from vectorlog.streams.msgstream import StreamPosition

PK_PREFIX = b"pk/"

Entry = tuple[int, int]  # (segment id, ts) of a key's newest row
ENTRY = struct.Struct(">qQ")


@dataclass(frozen=True)
class Change:
    """Keys whose newest-row entries the event at (its pchannel's) `offset`, `ts` changed;
    `prevs[i]` is pks[i]'s entry before (prevs None: no key had one)."""

    offset: int
    ts: int
    vchannel: str
    pks: list[Any]
    prevs: list[Entry | None] | None

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
    raw, width = rows.tobytes(), rows.shape[1]
    return [raw[i : i + width] for i in range(0, len(raw), width)]


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
    tick that commits no change (rows still buffered) costs one pass over them."""
    done: dict[str, dict[Any, None]] = {}
    later: list[list[Change]] = []  # per stream partition, in order
    for p, changes in changes_by_p.items():
        point = points.get(p, StreamPosition())
        kept = []
        for c in changes:
            if c.delivered_before(point):
                done.setdefault(c.vchannel, {}).update(dict.fromkeys(c.pks))
            else:
                kept.append(c)
        changes_by_p[p] = kept
        later.append(kept)
    for vch, keys in done.items():
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


def stage_entries(txn: Transaction, vch: str, entries: dict[Any, Entry | None]) -> None:
    """Stages a vchannel's keys: a put of each entry, a delete of each None."""
    gone = [pk for pk, e in entries.items() if e is None] if None in entries.values() else []
    for pk in gone:
        del entries[pk]
        txn.delete(pk_key(vch, pk))
    kept = cast(dict[Any, Entry], entries)  # every None was taken out above
    packed = {entry: ENTRY.pack(*entry) for entry in set(kept.values())}
    values = map(packed.__getitem__, kept.values())
    for key, value in zip(pk_keys(vch, list(kept)), values, strict=True):
        txn.put(key, value)
