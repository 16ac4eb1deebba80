"""Tests of processors.rootcoord.snapshotkv.SnapshotKV (seed 000, metaSnapShot)."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vectorlog.processors.rootcoord.snapshotkv import (
    LOGICAL_BITS,
    InvalidKey,
    KeyNotFound,
    SnapshotKV,
    SnapshotKVError,
    SnapshotTooOld,
    TimestampNotIncreasing,
)
from vectorlog.state.rocksdb import RocksDBStateStore


class Clock:
    """A test timestamp oracle: hybrid timestamps at a settable physical time."""

    def __init__(self, ms: int = 1_000) -> None:
        self.ms, self.logical = ms, 0

    def __call__(self) -> int:
        self.logical += 1
        return (self.ms << LOGICAL_BITS) | self.logical


def hts(ms: int, logical: int = 0) -> int:
    """A hybrid timestamp."""
    return (ms << LOGICAL_BITS) | logical


def open_db(path: Path) -> RocksDBStateStore:
    return RocksDBStateStore(path)


def put_raw(db: RocksDBStateStore, key: bytes, value: bytes) -> None:
    """A caller's own record, committed outside any SnapshotKV write."""
    with db.transaction() as txn:
        txn.put(key, value)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[RocksDBStateStore]:
    database = open_db(tmp_path / "meta")
    yield database
    database.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def kv(db: RocksDBStateStore, clock: Clock) -> SnapshotKV:
    return SnapshotKV(db, clock)


def seed_table(kv: SnapshotKV) -> None:
    """The timeline of seed 000."""
    kv.save("A", b"1", ts=100)
    kv.save("B", b"2", ts=200)
    kv.save("C", b"3", ts=300)
    kv.save("A", b"10", ts=400)
    kv.remove("B", ts=500)
    kv.remove("C", ts=600)


# --------------------------------------------------------------------------- seed 000


def test_seed_table_as_of_450(kv: SnapshotKV) -> None:
    seed_table(kv)
    assert kv.load("A", 450) == b"10"
    assert kv.load("B", 450) == b"2"
    assert kv.load("C", 450) == b"3"
    assert kv.load_prefix("", 450) == (["A", "B", "C"], [b"10", b"2", b"3"])


def test_seed_table_as_of_700(kv: SnapshotKV) -> None:
    seed_table(kv)
    assert kv.load("A", 700) == b"10"
    for key in ("B", "C"):
        with pytest.raises(KeyNotFound) as err:
            kv.load(key, 700)
        assert err.value.key == key and err.value.ts == 700
    assert kv.load_prefix("", 700) == (["A"], [b"10"])
    assert kv.load_prefix("") == (["A"], [b"10"])
    assert kv.load("A") == b"10"


def test_seed_table_as_of_50(kv: SnapshotKV) -> None:
    seed_table(kv)
    for key in ("A", "B", "C"):
        with pytest.raises(KeyNotFound):
            kv.load(key, 50)
    assert kv.load_prefix("", 50) == ([], [])


def test_seed_table_at_exact_write_timestamps(kv: SnapshotKV) -> None:
    seed_table(kv)
    assert kv.load("A", 100) == b"1"
    assert kv.load("A", 399) == b"1"
    assert kv.load("A", 400) == b"10"
    assert kv.load("B", 499) == b"2"
    with pytest.raises(KeyNotFound):
        kv.load("B", 500)
    assert kv.load_prefix("", 300) == (["A", "B", "C"], [b"1", b"2", b"3"])
    assert kv.last_ts == 600


# --------------------------------------------------------------------------- writes


def test_writes_return_clock_timestamps(kv: SnapshotKV, clock: Clock) -> None:
    t1 = kv.save("a", b"1")
    t2 = kv.multi_save({"b": b"2", "c": b"3"})
    t3 = kv.remove("a")
    assert t1 == hts(1_000, 1) and t2 == hts(1_000, 2) and t3 == hts(1_000, 3)
    assert kv.last_ts == t3
    assert kv.load("a", t2) == b"1"
    assert kv.load_prefix("", t2) == (["a", "b", "c"], [b"1", b"2", b"3"])
    assert kv.load_prefix("") == (["b", "c"], [b"2", b"3"])


def test_additions_get_the_write_ts_and_land_atomically(kv: SnapshotKV) -> None:
    def collection_record(ts: int) -> tuple[str, bytes]:
        return "collection/7", json.dumps({"id": 7, "create_ts": ts}).encode()

    kv.save("other", b"x", ts=10)
    ts = kv.multi_save({"collection-name/c7": b"7"}, [collection_record], ts=20)
    assert ts == 20
    assert json.loads(kv.load("collection/7", ts)) == {"id": 7, "create_ts": 20}
    assert kv.load("collection-name/c7", ts) == b"7"
    assert kv.load_prefix("collection", 19) == ([], [])
    assert kv.load_prefix("collection", 20)[0] == ["collection-name/c7", "collection/7"]


def test_addition_overrides_a_save_of_the_same_key(kv: SnapshotKV) -> None:
    kv.multi_save({"k": b"from kvs"}, [lambda ts: ("k", b"from addition")], ts=5)
    assert kv.load("k") == b"from addition"


def test_failing_addition_writes_nothing(kv: SnapshotKV, db: RocksDBStateStore) -> None:
    kv.save("a", b"1", ts=10)

    def broken(ts: int) -> tuple[str, bytes]:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        kv.multi_save({"b": b"2"}, [lambda ts: ("c", b"3"), broken], ts=20)
    assert kv.last_ts == 10
    assert kv.load_prefix("") == (["a"], [b"1"])
    with pytest.raises(InvalidKey):
        kv.multi_save({"b": b"2"}, [lambda ts: ("bad\x00key", b"3")], ts=20)
    assert kv.last_ts == 10 and kv.version_count() == 1
    assert kv.save("b", b"2", ts=20) == 20  # the timestamp was not consumed


def test_multi_save_and_remove_prefix(kv: SnapshotKV) -> None:
    kv.multi_save({"p/1": b"1", "p/2": b"2", "p": b"root", "q/1": b"q", "p/3": b"3"}, ts=10)
    kv.remove("p/3", ts=15)
    ts = kv.multi_save_and_remove_prefix(
        {"p/2": b"new", "r": b"r"},
        ["p/", "nothing/"],
        [lambda t: ("log/ts", str(t).encode())],
        ts=20,
    )
    assert ts == 20
    assert kv.load_prefix("", 20) == (
        ["log/ts", "p", "p/2", "q/1", "r"],
        [b"20", b"root", b"new", b"q", b"r"],
    )
    assert kv.load_prefix("p/", 19) == (["p/1", "p/2"], [b"1", b"2"])
    assert kv.load("p/1", 19) == b"1"
    with pytest.raises(KeyNotFound):
        kv.load("p/1")
    # Only the live keys got a tombstone: p/1 (p/2 was saved, p/3 already dead).
    assert kv.version_count("p/") == 2 + 2 + 2


def test_remove_prefix_everything(kv: SnapshotKV) -> None:
    kv.multi_save({"a": b"1", "b": b"2"}, ts=1)
    kv.multi_save_and_remove_prefix({}, [""], ts=2)
    assert kv.load_prefix("") == ([], [])
    assert kv.load_prefix("", 1) == (["a", "b"], [b"1", b"2"])


def test_prefix_reads_do_not_mix_keys_sharing_bytes(kv: SnapshotKV) -> None:
    kv.multi_save({"a": b"1", "a/b": b"2", "ab": b"3", "a0": b"4", "b": b"5", "é": b"6"}, ts=1)
    kv.remove("a", ts=2)
    with pytest.raises(KeyNotFound):
        kv.load("a")
    assert kv.load("a", 1) == b"1"
    assert kv.load_prefix("a") == (["a/b", "a0", "ab"], [b"2", b"4", b"3"])
    assert kv.load_prefix("a", 1)[0] == ["a", "a/b", "a0", "ab"]
    assert kv.load_prefix("")[0] == sorted(["a/b", "ab", "a0", "b", "é"])
    assert kv.load("é") == b"6"
    with pytest.raises(KeyNotFound):
        kv.load("a/")


def test_other_records_in_the_database_are_ignored(db: RocksDBStateStore, clock: Clock) -> None:
    for record in (b"log/pos", b"meta", b"meta/w", b"\xff"):
        put_raw(db, record, b"x")
    kv = SnapshotKV(db, clock)
    kv.save("k", b"v", ts=5)
    assert kv.load_prefix("") == (["k"], [b"v"])
    with pytest.raises(KeyNotFound):
        kv.load("j")
    assert kv.version_count() == 1


def test_two_namespaces_share_one_database(db: RocksDBStateStore, clock: Clock) -> None:
    one, two = SnapshotKV(db, clock, b"one/"), SnapshotKV(db, clock, b"two/")
    one.save("k", b"1", ts=5)
    two.save("k", b"2", ts=3)
    assert one.load("k") == b"1" and two.load("k") == b"2"
    assert two.last_ts == 3


def test_values_must_be_bytes(kv: SnapshotKV) -> None:
    with pytest.raises(TypeError):
        kv.save("k", "text", ts=1)  # type: ignore[arg-type]
    kv.save("k", bytearray(b"ok"), ts=1)  # type: ignore[arg-type]
    assert kv.load("k") == b"ok"


def test_empty_value_is_not_a_tombstone(kv: SnapshotKV) -> None:
    kv.save("k", b"", ts=1)
    assert kv.load("k") == b""
    assert kv.load_prefix("") == (["k"], [b""])


# --------------------------------------------------------------------------- batch mode


def test_batch_mode_writes_nothing_until_the_caller_writes(
    kv: SnapshotKV, db: RocksDBStateStore
) -> None:
    kv.save("a", b"old", ts=1)
    batch = db.transaction()
    ts = kv.multi_save(
        {"a": b"new", "b": b"2"}, ts=7, batch=batch, extra=[(b"log/ddl/0", b"offset=41")]
    )
    assert ts == 7 and kv.last_ts == 7
    assert kv.load("a") == b"old"
    with pytest.raises(KeyNotFound):
        kv.load("b")
    assert db.get(b"log/ddl/0") is None
    batch.put(b"log/ddl/1", b"offset=9")  # the caller's own key
    batch.commit()
    assert kv.load_prefix("") == (["a", "b"], [b"new", b"2"])
    assert db.get(b"log/ddl/0") == b"offset=41" and db.get(b"log/ddl/1") == b"offset=9"


def test_batch_mode_last_ts_is_persisted_with_the_batch(tmp_path: Path, clock: Clock) -> None:
    db = open_db(tmp_path / "m")
    batch = db.transaction()
    SnapshotKV(db, clock).save("a", b"1", ts=9, batch=batch)
    assert SnapshotKV(db, clock).last_ts == 0
    batch.commit()
    assert SnapshotKV(db, clock).last_ts == 9
    db.close()


def test_extra_records_land_with_the_write(kv: SnapshotKV, db: RocksDBStateStore) -> None:
    kv.remove("gone", ts=3, extra=[(b"log/pos", b"3")])
    kv.save("a", b"1", ts=4, extra=[(b"log/pos", b"4")])
    assert db.get(b"log/pos") == b"4"
    with pytest.raises(InvalidKey):
        kv.save("a", b"2", ts=5, extra=[(b"meta/v/a\x00", b"evil")])
    with pytest.raises(InvalidKey):
        kv.save("a", b"2", ts=5, extra=[("log/pos", b"5")])  # type: ignore[list-item]
    assert kv.last_ts == 4 and db.get(b"log/pos") == b"4"


# --------------------------------------------------------------------------- recovery


def test_reopen_recovers_last_ts_and_all_reads(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "meta"
    db = open_db(path)
    kv = SnapshotKV(db, clock)
    seed_table(kv)
    kv.multi_save({"x/1": b"1", "x/2": b"2"}, ts=650)
    before = {t: kv.load_prefix("", t) for t in (50, 150, 450, 650, 700)}
    db.close()

    db = open_db(path)
    kv = SnapshotKV(db, clock)
    assert kv.last_ts == 650
    assert {t: kv.load_prefix("", t) for t in before} == before
    assert kv.load("B", 450) == b"2"
    with pytest.raises(TimestampNotIncreasing):
        kv.save("A", b"x", ts=650)
    assert kv.save("A", b"11", ts=651) == 651
    db.close()


# --------------------------------------------------------------------------- timestamps


def test_explicit_timestamps_must_increase(kv: SnapshotKV) -> None:
    kv.save("a", b"1", ts=100)
    for bad in (100, 99):
        with pytest.raises(TimestampNotIncreasing) as err:
            kv.save("a", b"2", ts=bad)
        assert err.value.ts == bad and err.value.last_ts == 100
        assert str(bad) in str(err.value)
    with pytest.raises(TimestampNotIncreasing):
        kv.remove("a", ts=50)
    with pytest.raises(TimestampNotIncreasing):
        kv.multi_save_and_remove_prefix({}, ["a"], ts=1)
    assert kv.load("a") == b"1" and kv.last_ts == 100


def test_clock_going_backwards_is_refused(db: RocksDBStateStore, clock: Clock) -> None:
    kv = SnapshotKV(db, clock)
    kv.save("a", b"1", ts=hts(5_000))
    with pytest.raises(TimestampNotIncreasing, match="clock"):
        kv.save("a", b"2")  # the clock is at 1000 ms
    clock.ms = 6_000
    assert kv.save("a", b"2") == hts(6_000, 2)


def test_out_of_range_timestamps(kv: SnapshotKV) -> None:
    with pytest.raises(ValueError):
        kv.save("a", b"1", ts=-1)
    with pytest.raises(ValueError):
        kv.save("a", b"1", ts=1 << 64)
    with pytest.raises(ValueError):
        kv.load("a", -5)
    assert kv.save("a", b"1", ts=(1 << 64) - 1) == (1 << 64) - 1


# --------------------------------------------------------------------------- keys


@pytest.mark.parametrize("call", ["save", "remove", "load", "load_prefix", "multi", "prefixes"])
def test_keys_with_nul_are_refused(kv: SnapshotKV, call: str) -> None:
    bad = "a\x00b"
    calls: dict[str, Callable[[], object]] = {
        "save": lambda: kv.save(bad, b"1"),
        "remove": lambda: kv.remove(bad),
        "load": lambda: kv.load(bad),
        "load_prefix": lambda: kv.load_prefix(bad),
        "multi": lambda: kv.multi_save({"ok": b"1", bad: b"2"}),
        "prefixes": lambda: kv.multi_save_and_remove_prefix({}, [bad]),
    }
    with pytest.raises(InvalidKey) as err:
        calls[call]()
    assert err.value.key == bad and "\\x00" in str(err.value)
    assert isinstance(err.value, SnapshotKVError) and kv.last_ts == 0


def test_non_str_and_unencodable_keys_are_refused(kv: SnapshotKV) -> None:
    with pytest.raises(InvalidKey):
        kv.save(b"bytes", b"1")  # type: ignore[arg-type]
    with pytest.raises(InvalidKey):
        kv.save("\ud800", b"1")
    assert kv.last_ts == 0


# --------------------------------------------------------------------------- gc


def write_history(kv: SnapshotKV, rng: random.Random) -> list[int]:
    """Keys k0..k4 with many versions between 1 s and 11 s (one write each 10 ms), k5 written
    and deleted before 5 s, k6 written once at 12 s."""
    stamps = []
    for step in range(1_000):
        ts = hts(1_000 + 10 * step, 1)
        key = f"k{rng.randrange(5)}"
        if rng.random() < 0.15:
            kv.remove(key, ts=ts)
        else:
            kv.save(key, f"{key}@{step}".encode(), ts=ts)
        if step in (100, 200, 300):
            kv.save("k5", f"k5@{step}".encode(), ts=ts + 1)
        if step == 400:  # k5 dead before the horizon (6 s): pruned entirely
            kv.remove("k5", ts=ts + 1)
        stamps.append(ts)
    kv.save("k6", b"only", ts=hts(12_000))
    return stamps


def snapshot_reads(kv: SnapshotKV, stamps: list[int]) -> dict[object, object]:
    answers: dict[object, object] = {}
    for ts in [*stamps, None]:
        answers[ts] = kv.load_prefix("", ts)
        for key in ("k0", "k1", "k5", "k6", "zz"):
            try:
                answers[(key, ts)] = kv.load(key, ts)
            except KeyNotFound:
                answers[(key, ts)] = None
    return answers


def test_gc_keeps_answers_at_and_after_the_horizon(tmp_path: Path) -> None:
    db, clock = open_db(tmp_path / "m"), Clock()
    kv = SnapshotKV(db, clock, retention_ms=3_000)
    write_history(kv, random.Random(7))
    horizon = hts(6_000)
    stamps = [horizon, horizon + 1, hts(6_005), hts(8_000), hts(10_990, 1), hts(20_000)]
    stamps += [hts(6_000 + 10 * i, 1) for i in range(0, 500, 7)]
    before, count_before = snapshot_reads(kv, stamps), kv.version_count()

    deleted = kv.gc(now_ts=hts(9_000, 3))
    assert kv.gc_horizon == horizon
    assert deleted > 0 and kv.version_count() == count_before - deleted
    assert kv.version_count("k5") == 0
    assert snapshot_reads(kv, stamps) == before
    for ts in (horizon - 1, hts(1_000), 0):
        with pytest.raises(SnapshotTooOld) as err:
            kv.load("k0", ts)
        assert err.value.ts == ts and err.value.horizon == horizon
        with pytest.raises(SnapshotTooOld):
            kv.load_prefix("", ts)
    db.close()


def test_gc_horizon_persists_and_never_goes_back(tmp_path: Path) -> None:
    db, clock = open_db(tmp_path / "m"), Clock(ms=50_000)
    kv = SnapshotKV(db, clock, retention_ms=1_000)
    for i in range(10):
        kv.save("k", str(i).encode(), ts=hts(40_000 + i * 1_000))
    assert kv.gc() == 9  # horizon 49 s: keeps the version at 49 s only
    assert kv.gc_horizon == hts(49_000)
    assert kv.gc(now_ts=hts(10_000)) == 0 and kv.gc_horizon == hts(49_000)
    db.close()
    db = open_db(tmp_path / "m")
    kv = SnapshotKV(db, clock, retention_ms=1_000)
    assert kv.gc_horizon == hts(49_000) and kv.load("k", hts(49_000)) == b"9"
    with pytest.raises(SnapshotTooOld, match="horizon"):
        kv.load("k", hts(48_999))
    assert kv.load("k") == b"9" and kv.version_count() == 1
    db.close()


def test_gc_without_retention_keeps_everything(kv: SnapshotKV) -> None:
    seed_table(kv)
    assert kv.gc(now_ts=hts(10**9)) == 0
    assert kv.gc_horizon == 0 and kv.load("B", 450) == b"2" and kv.version_count() == 6


def test_gc_prunes_tombstones_and_keeps_live_values(kv: SnapshotKV, db: RocksDBStateStore) -> None:
    gkv = SnapshotKV(db, Clock(), namespace=b"g/", retention_ms=0)
    seed_table(gkv)  # timestamps 100..600 are all in physical ms 0
    assert gkv.gc(now_ts=hts(1)) == 5  # A@100, B@200, B@500, C@300, C@600
    assert gkv.version_count() == 1 and gkv.load("A") == b"10"
    assert gkv.load_prefix("", hts(1)) == (["A"], [b"10"])


def all_versions(kv: SnapshotKV, db: RocksDBStateStore) -> list[bytes]:
    it, out = db.iter(), []
    it.seek(kv.namespace)
    while it.valid() and it.key().startswith(kv.namespace):
        out.append(it.key())
        it.next()
    return out


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 50])
def test_gc_in_small_chunks_prunes_exactly_what_one_pass_prunes(tmp_path: Path, chunk: int):
    """Chunks cut anywhere, also in the middle of one key's versions, decide the same."""
    whole, db = open_db(tmp_path / "whole"), open_db(tmp_path / "chunked")
    kvs = [SnapshotKV(d, Clock(), retention_ms=3_000) for d in (whole, db)]
    for kv in kvs:
        write_history(kv, random.Random(11))
    chunks: list[int] = []
    expected = kvs[0].gc(now_ts=hts(9_000, 3))
    assert kvs[1].gc(now_ts=hts(9_000, 3), chunk=chunk, on_chunk=chunks.append) == expected
    assert len(chunks) > 5 and sum(chunks) == expected
    assert all_versions(kvs[1], db) == all_versions(kvs[0], whole)
    whole.close()
    db.close()


def test_writes_go_through_between_gc_chunks(tmp_path: Path):
    """Issue 7, item 15: GC held the write lock for its whole scan, so every DDL waited; now
    a write waits at most for one chunk. The write here is made, from another thread, while
    the GC is between two chunks: with the lock held throughout, it could not finish."""
    db, clock = open_db(tmp_path / "m"), Clock(ms=20_000)
    kv = SnapshotKV(db, clock, retention_ms=1_000)
    for i in range(300):
        kv.save(f"k{i % 30}", str(i).encode(), ts=hts(1_000 + i))
    landed: list[int] = []

    def write_between_chunks(deleted: int) -> None:
        if landed:
            return
        writer = threading.Thread(target=lambda: landed.append(kv.save("ddl", b"x")))
        writer.start()
        writer.join(10)
        assert landed, "a write waited for the whole GC"

    assert kv.gc(chunk=40, on_chunk=write_between_chunks) == 270
    assert kv.load("ddl") == b"x" and kv.gc_horizon == hts(19_000)
    assert kv.version_count() == 31  # the newest of each key, and the write
    db.close()


# --------------------------------------------------------------------------- property test


class Model:
    """A plain dict per timestamp: the reference for as-of reads."""

    def __init__(self) -> None:
        self.history: list[tuple[int, dict[str, bytes]]] = [(0, {})]

    def write(self, ts: int, state: dict[str, bytes]) -> None:
        self.history.append((ts, state))

    def latest(self) -> dict[str, bytes]:
        return dict(self.history[-1][1])

    def at(self, ts: int) -> dict[str, bytes]:
        return next(state for t, state in reversed(self.history) if t <= ts)


KEYS = ["a", "a/b", "a/c", "ab", "b", "b/x/1", "b/x/2", "é/1", "z"]
PREFIXES = ["", "a", "a/", "b/x/", "é", "q"]


def random_write(kv: SnapshotKV, model: Model, rng: random.Random, ts: int) -> None:
    state, op = model.latest(), rng.random()
    if op < 0.5:
        saves = {k: rng.randbytes(rng.randrange(4)) for k in rng.sample(KEYS, rng.randrange(1, 4))}
        kv.multi_save(saves, ts=ts)
        state.update(saves)
    elif op < 0.8:
        key = rng.choice(KEYS)
        kv.remove(key, ts=ts)
        state.pop(key, None)
    else:
        prefix, saves = rng.choice(PREFIXES), {rng.choice(KEYS): b"s"}
        kv.multi_save_and_remove_prefix(saves, [prefix], ts=ts)
        state = {k: v for k, v in state.items() if not k.startswith(prefix)}
        state.update(saves)
    model.write(ts, state)


def check_reads(kv: SnapshotKV, model: Model, rng: random.Random, last: int) -> None:
    for _ in range(20):
        ts = rng.randrange(last + 10)
        expected = model.at(ts)
        key, prefix = rng.choice(KEYS), rng.choice(PREFIXES)
        if key in expected:
            assert kv.load(key, ts) == expected[key]
        else:
            with pytest.raises(KeyNotFound):
                kv.load(key, ts)
        wanted = sorted(k for k in expected if k.startswith(prefix))
        assert kv.load_prefix(prefix, ts) == (wanted, [expected[k] for k in wanted])
    assert kv.load_prefix("") == (
        sorted(model.latest()),
        [model.latest()[k] for k in sorted(model.latest())],
    )


@pytest.mark.parametrize("seed", range(5))
def test_random_history_matches_a_dict_model(tmp_path: Path, seed: int) -> None:
    rng, model = random.Random(seed), Model()
    db = open_db(tmp_path / "m")
    kv, ts = SnapshotKV(db, Clock()), 0
    for _ in range(300):
        ts += rng.randrange(1, 5)
        random_write(kv, model, rng, ts)
        if rng.random() < 0.2:
            check_reads(kv, model, rng, ts)
    check_reads(kv, model, rng, ts)
    db.close()


@pytest.mark.parametrize("seed", range(3))
def test_random_history_with_gc_matches_the_model(tmp_path: Path, seed: int) -> None:
    rng, model = random.Random(100 + seed), Model()
    db = open_db(tmp_path / "m")
    kv, ms = SnapshotKV(db, Clock(), retention_ms=50), 0
    for step in range(400):
        ms += rng.randrange(0, 3)
        random_write(kv, model, rng, hts(ms, step + 1))
        if rng.random() < 0.05:
            kv.gc(now_ts=hts(ms, step + 1))
            horizon = kv.gc_horizon
            for ts in sorted(rng.randrange(horizon, hts(ms + 5)) for _ in range(20)):
                expected = model.at(ts)
                assert kv.load_prefix("", ts) == (
                    sorted(expected),
                    [expected[k] for k in sorted(expected)],
                )
    db.close()


def test_history_lists_every_version_of_live_and_deleted_keys_oldest_first(kv: SnapshotKV):
    kv.save("col/1", b"a", ts=100)
    kv.save("col/2", b"x", ts=150)
    kv.save("col/1", b"b", ts=200)
    kv.remove("col/1", ts=300)
    kv.save("other", b"z", ts=310)
    assert kv.history("col/") == {
        "col/1": [(100, b"a"), (200, b"b"), (300, None)],
        "col/2": [(150, b"x")],
    }
    assert kv.history("none/") == {}
