"""The primary-key index staged at a checkpoint in bulk holds, key for key, what the per-key
staging held: each key changed before the checkpoint with its entry as of the checkpoint."""

from __future__ import annotations

import random
from typing import Any, cast

import pytest

from vectorlog.processors.datanode import pkindex
from vectorlog.processors.datanode.compaction import repoint
from vectorlog.processors.datanode.pkindex import (
    DELTA_PREFIX,
    ENTRY,
    Change,
    Entry,
    KeyIndex,
    decode_delta,
    pk_key,
    pk_keys,
)
from vectorlog.schemas.serde import Event
from vectorlog.state import base
from vectorlog.state.base import StateStore, Transaction
from vectorlog.state.errors import StateFormatUnsupported
from vectorlog.state.metadata import FORMAT_VERSION_KEY
from vectorlog.state.rocksdb import RocksDBStateStore
from vectorlog.streams.msgstream import StreamPosition


class Recording(Transaction):
    """A transaction that keeps its staged puts (bytes) and deletes (None) by key, a delta's
    as the per-key puts and deletes it stands for (`deltas`: how many)."""

    def __init__(self) -> None:
        super().__init__("<recording>")
        self.ops: dict[bytes, bytes | None] = {}
        self.deltas = 0

    def _stage_put(self, key: bytes, value: bytes) -> None:
        if not key.startswith(DELTA_PREFIX):
            self.ops[key] = value
            return
        self.deltas += 1
        vch = key[len(DELTA_PREFIX) : -9].decode()  # then b"\x00" and the 8-byte sequence
        pks, entries, gone = decode_delta(value)
        for pk, entry in zip(pks, entries, strict=True):
            self.ops[pk_key(vch, pk)] = ENTRY.pack(*entry)
        for pk in gone:
            self.ops[pk_key(vch, pk)] = None

    def _stage_delete(self, key: bytes) -> None:
        self.ops[key] = None

    def _stage_meta(self, key: bytes, value: bytes) -> None:
        assert key == FORMAT_VERSION_KEY, "the index stages no positions"

    def _write(self) -> None:
        pass

    def _discard(self) -> None:
        pass


def reference(
    changes: dict[int, list[Change]],
    newest: dict[str, dict[Any, Entry]],
    points: dict[int, StreamPosition],
) -> dict[bytes, bytes | None]:
    """The staging as it was written per key (the oracle)."""
    done: set[tuple[str, Any]] = set()
    as_of: dict[tuple[str, Any], Entry | None] = {}
    for p, cs in changes.items():
        point = points.get(p, StreamPosition())
        later = [c for c in cs if not c.delivered_before(point)]
        for c in cs:
            if c.delivered_before(point):
                done.update((c.vchannel, pk) for pk in c.pks)
        for c in reversed(later):
            for i, pk in enumerate(c.pks):
                as_of[(c.vchannel, pk)] = None if c.prevs is None else c.prevs[i]
    ops: dict[bytes, bytes | None] = {}
    for vch, pk in done:
        entry = as_of[(vch, pk)] if (vch, pk) in as_of else newest.get(vch, {}).get(pk)
        ops[pk_key(vch, pk)] = None if entry is None else ENTRY.pack(*entry)
    return ops


def staged_as_the_reference(
    index: KeyIndex, points: dict[int, StreamPosition]
) -> dict[bytes, bytes | None]:
    """Stages `index` at `points`, checks its ops equal the per-key oracle's (from the
    changes and entries before the staging), and returns them."""
    changes = {p: list(cs) for p, cs in index.changes.items()}
    expected = reference(changes, {v: dict(d) for v, d in index.newest.items()}, points)
    txn = Recording()
    index.stage(txn, points)
    assert txn.ops == expected
    return txn.ops


def bare_index() -> KeyIndex:
    """A data node's key index with both vchannels loaded (its state store is never read)."""
    index = KeyIndex(cast(StateStore, None))
    index.newest.update({"v0": {}, "v1": {}})
    index.seqs.update({"v0": -1, "v1": -1})
    return index


def drive(index: KeyIndex, seed: int, keys: list[Any]) -> None:
    """Applies random inserts (upserts of known keys among them) and deletes to the index."""
    rng = random.Random(seed)
    for offset in range(40):
        vch, ts = rng.choice(["v0", "v1"]), 1000 + offset
        event = Event("RowsInserted", ts, {}, 1, vch, source=(offset % 2, offset))
        pks = list(dict.fromkeys(rng.sample(keys, rng.randrange(1, 12))))
        if rng.random() < 0.25:
            newest = index.newest.setdefault(vch, {})
            gone = [pk for pk in pks if pk in newest]
            index.record(event, gone, [newest.pop(pk) for pk in gone])
        else:
            index.index(event, pks, rng.randrange(3))


@pytest.mark.parametrize("seed", range(12))
def test_bulk_staging_equals_the_per_key_staging(seed: int) -> None:
    keys: list[Any] = list(range(-5, 30)) if seed % 3 else [f"k{i}" for i in range(30)]
    index = bare_index()
    drive(index, seed, keys)
    points = {0: StreamPosition(20 + seed, 1000 + seed, 30), 1: StreamPosition(10 + 2 * seed)}
    changes = {p: list(cs) for p, cs in index.changes.items()}
    staged_as_the_reference(index, points)
    kept = {p: [c for c in cs if not c.delivered_before(points[p])] for p, cs in changes.items()}
    assert index.changes == kept


def test_pk_keys_are_the_per_key_state_keys() -> None:
    ints = [0, -1, 1, 255, 256, 2**63 - 1, -(2**63)]
    assert pk_keys("vch", ints) == [pk_key("vch", pk) for pk in ints]
    others: list[Any] = ["a", "", "é€", True, 3]
    assert pk_keys("v", others) == [pk_key("v", pk) for pk in others]
    assert pk_keys("v", []) == []


def test_a_vchannel_index_is_read_from_the_state_store_at_its_first_use(tmp_path):
    store = RocksDBStateStore(tmp_path / "dn")
    try:
        with store.transaction() as txn:
            txn.put(pk_key("v0", 7), ENTRY.pack(11, 1000))
            txn.put(pk_key("v0", "s"), ENTRY.pack(12, 1001))
            txn.put(pk_key("v01", 8), ENTRY.pack(13, 1002))  # another vchannel, same prefix
        index = KeyIndex(store)
        assert index.of("v0") == {7: (11, 1000), "s": (12, 1001)}
        assert index.of("v01") == {8: (13, 1002)}
        assert index.of("v2") == {}
    finally:
        store.close()


def insert_new_keys(index: KeyIndex, seed: int, str_keys: bool) -> None:
    """Applies inserts of keys never seen (inserts only, as a bulk load's) to both
    vchannels: every change is `fresh`."""
    rng = random.Random(seed)
    fresh = iter(range(10_000))
    for offset in range(30):
        vch, ts = rng.choice(["v0", "v1"]), 1000 + offset
        event = Event("RowsInserted", ts, {}, 1, vch, source=(offset % 2, offset))
        pks: list[Any] = [next(fresh) for _ in range(rng.randrange(1, 40))]
        index.index(event, [f"k{pk}" for pk in pks] if str_keys else pks, rng.randrange(3))


@pytest.mark.parametrize("seed", range(8))
def test_staging_of_inserted_keys_equals_the_per_key_staging(seed: int) -> None:
    index = bare_index()
    insert_new_keys(index, seed, str_keys=seed % 4 == 3)
    assert all(c.fresh for cs in index.changes.values() for c in cs)
    if seed % 2:  # a later upsert of a key a committed change gave: not fresh
        event = Event("RowsInserted", 2000, {}, 1, "v0", source=(0, 99))
        index.index(event, list(index.newest["v0"])[:3], 5)
    points = {0: StreamPosition(10 + seed, 1000 + seed, 20), 1: StreamPosition(5 + 2 * seed)}
    ops = staged_as_the_reference(index, points)
    assert ops and None not in ops.values()


def test_inserted_int_keys_are_staged_as_one_record() -> None:
    """A checkpoint of 80k inserted keys put 80k records in one RocksDB write, ~40 ms with
    the GIL held (issue 28); a vchannel of int keys puts one delta a checkpoint."""
    rng = random.Random(5)
    pool = rng.sample(range(-(2**40), 2**40), 3000)  # random ids, negative ones among them
    index = bare_index()
    for offset in range(30):
        event = Event("RowsInserted", 1000 + offset, {}, 1, "v0", source=(0, offset))
        index.index(event, pool[offset * 100 : (offset + 1) * 100], offset % 3)
    staged_as_the_reference(index, {0: StreamPosition(40)})
    txn = Recording()
    index.index(Event("RowsInserted", 2000, {}, 1, "v0", source=(0, 50)), pool[:5], 4)
    index.stage(txn, {0: StreamPosition(60)})
    assert txn.deltas == 1 and len(txn.ops) == 5


def test_the_index_reads_back_as_committed_per_key_records_then_deltas(tmp_path) -> None:
    """Per-key records (a store written before) are read first, then each delta in order:
    a later delta's puts and deletes win, across restarts (the sequence goes on)."""
    store = RocksDBStateStore(tmp_path / "dn")
    try:
        with store.transaction() as txn:
            txn.put(pk_key("v0", 1), ENTRY.pack(9, 900))
            txn.put(pk_key("v0", 2), ENTRY.pack(9, 900))
        for life in range(4):
            index = KeyIndex(store)
            for vch in ("v0", "v1"):
                if life == 2:  # a takeover's index, read back from binlogs instead
                    index.newest[vch] = dict(KeyIndex(store).of(vch))
                index.of(vch)
            drive(index, life, list(range(-3, 12)))
            expected = {vch: dict(index.newest[vch]) for vch in ("v0", "v1")}
            with store.transaction() as txn:
                index.stage(txn, {0: StreamPosition(10**6), 1: StreamPosition(10**6)})
            assert not any(index.changes.values())
            read = KeyIndex(store)
            assert {vch: read.of(vch) for vch in ("v0", "v1")} == expected
    finally:
        store.close()


def upsert_compact_delete(index: KeyIndex, life: int, offset: int) -> None:
    """Upserts keys of a small pool, deletes some, and compacts segments 0-1 into 7."""
    rng = random.Random(life * 1000 + offset)
    ts = 10_000 * life + 10 * offset
    source = (0, 1000 * life + offset)
    newest = index.of("v0")
    pks = rng.sample(range(200), 40)
    index.index(Event("RowsInserted", ts, {}, 1, "v0", source=source), pks, rng.randrange(3))
    gone = [pk for pk in rng.sample(range(200), 10) if pk in newest]
    index.record(
        Event("RowsDeleted", ts + 1, {}, 1, "v0", source=source),
        gone,
        [newest.pop(pk) for pk in gone],
    )
    if offset % 7 == 6:
        event = Event("SegmentsCompacted", ts + 2, {}, 1, "v0", source=source)
        index.record(event, *repoint(newest, {0, 1}, 7))


def deltas_in(store: StateStore) -> list[bytes]:
    return [key for key, _ in store.items(DELTA_PREFIX + b"v0\x00")]


def test_an_upserted_vchannel_keeps_a_bounded_number_of_deltas_read_back_alike(tmp_path):
    """Deltas were never merged: 100 checkpoints of upserts left 100 records, and a restart
    read every change ever made. Now a checkpoint past MERGE_AFTER replaces them by the net
    state (its deletes dropped, its compactions' segments kept): the same index read back,
    and the int per-key records of an older store folded in."""
    store = RocksDBStateStore(tmp_path / "dn")
    try:
        with store.transaction() as txn:
            txn.put(pk_key("v0", 500), ENTRY.pack(0, 1))  # a store written before deltas
        for life in range(2):
            index = KeyIndex(store)
            for offset in range(60):
                upsert_compact_delete(index, life, offset)
                with store.transaction() as txn:
                    index.stage(txn, {0: StreamPosition(10**6)})
                assert len(deltas_in(store)) <= pkindex.MERGE_AFTER + 1
                assert KeyIndex(store).of("v0") == index.newest["v0"]
            assert 500 in index.newest["v0"] and (0, 1) not in index.newest["v0"].values()
        assert list(store.items(pk_key("v0", 500))) == []  # folded into the merged delta
        merged = decode_delta(next(store.items(DELTA_PREFIX))[1])  # the first: the merge
        assert merged[2] == [] and len(merged[0]) <= 201
    finally:
        store.close()


def test_deltas_are_merged_when_their_entries_pass_twice_the_keys(tmp_path, monkeypatch):
    monkeypatch.setattr(pkindex, "MERGE_SLACK", 0)
    store = RocksDBStateStore(tmp_path / "dn")
    try:
        index = KeyIndex(store)
        for offset in range(12):  # 40 upserts of 200 keys a checkpoint: ~5 deltas, then 1
            upsert_compact_delete(index, 0, offset)
            with store.transaction() as txn:
                index.stage(txn, {0: StreamPosition(10**6)})
            sizes = [sum(pkindex.DELTA_HEAD.unpack_from(v)) for _, v in store.items(DELTA_PREFIX)]
            assert sum(sizes[:-1]) <= 2 * len(index.newest["v0"]) + 10  # 10: this one's deletes
            assert KeyIndex(store).of("v0") == index.newest["v0"]
    finally:
        store.close()


def test_a_store_with_deltas_is_refused_by_a_build_that_ignores_them(tmp_path, monkeypatch):
    """A build without deltas read only the per-key records: an incomplete index, upserts
    not deleting old rows, no error. A store with deltas has format version 2 now, which
    such a build (knowing version 1 only) refuses on open; one without stays at 1."""
    for keys, version in (([1, 2, 3], 2), (["a", "b"], 1)):
        path = tmp_path / str(version)
        with RocksDBStateStore(path) as store:
            index = KeyIndex(store)
            event = Event("RowsInserted", 1000, {}, 1, "v0", source=(0, 1))
            index.index(event, list(keys), 3)
            with store.transaction() as txn:
                index.stage(txn, {0: StreamPosition(10)})
        with RocksDBStateStore(path) as store:
            assert store.format_version == version
        with monkeypatch.context() as old:
            old.setattr(base, "FORMAT_VERSIONS", (1,))
            if version == 1:
                RocksDBStateStore(path).close()
                continue
            with pytest.raises(StateFormatUnsupported):
                RocksDBStateStore(path)


def test_a_run_of_small_deltas_after_a_large_one_merges_keeping_its_deletes(tmp_path, monkeypatch):
    """Only the trailing small deltas are merged (a large one reads back as fast alone):
    the merged one keeps their deletes of keys the large one holds."""
    monkeypatch.setattr(pkindex, "MERGE_ENTRIES", 50)
    monkeypatch.setattr(pkindex, "MERGE_AFTER", 3)
    store = RocksDBStateStore(tmp_path / "dn")
    try:
        index = KeyIndex(store)
        index.of("v0")
        ops = [("put", list(range(100)))] + [("del", [5]), ("put", [5, 200]), ("del", [6])] * 2
        for offset, (op, pks) in enumerate(ops):
            event = Event("RowsInserted", 1000 + offset, {}, 1, "v0", source=(0, offset))
            if op == "put":
                index.index(event, pks, offset)
            else:
                gone = [pk for pk in pks if pk in index.newest["v0"]]
                index.record(event, gone, [index.newest["v0"].pop(pk) for pk in gone])
            with store.transaction() as txn:
                index.stage(txn, {0: StreamPosition(10**6)})
            assert KeyIndex(store).of("v0") == index.newest["v0"]
        deltas = [decode_delta(raw) for _, raw in store.items(DELTA_PREFIX)]
        assert len(deltas) < len(ops) and len(deltas[0][0]) == 100  # the large one as it was
        assert any(6 in gone for _, _, gone in deltas[1:])  # a merged delete of its key
    finally:
        store.close()
