"""The StateStore contract, one suite run on every backend, plus what only RocksDB can show.

`StateStoreConformance` holds the tests; a backend subclasses it and says how to open a
store at a location, and how to write a raw format version there (eventsourcing's
tests/persistence.py style). Opening a new store at the same location is a restart.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rocksdict import Options, Rdict

from vectorlog.core.faults import CrashPointReached, armed
from vectorlog.state import base
from vectorlog.state.base import StateStore
from vectorlog.state.errors import (
    InvalidStateKey,
    StateError,
    StateFormatUnsupported,
    StateStoreClosed,
    StateStoreCorrupt,
    StateStoreInUse,
    StateStoreOpenError,
    TransactionFinished,
)
from vectorlog.state.memory import MemoryDisk, MemoryStateStore
from vectorlog.state.metadata import FORMAT_VERSION, FORMAT_VERSION_KEY, FORMAT_VERSIONS, META_CF
from vectorlog.state.rocksdb import RocksDBStateStore

UNKNOWN = FORMAT_VERSIONS[-1] + 1  # a newer build's format

CHILD = Path(__file__).with_name("state_child.py")


class StateStoreConformance:
    """Tests every StateStore backend passes. Subclasses implement the three hooks."""

    @pytest.fixture
    def location(self, tmp_path: Path) -> Any:
        """Where a store lives (a directory, a MemoryDisk)."""
        raise NotImplementedError

    def open_store(self, location: Any) -> StateStore:
        raise NotImplementedError

    def write_raw_version(self, location: Any, raw: bytes) -> None:
        """Overwrites the stored format version of the (closed) store at `location`."""
        raise NotImplementedError

    @pytest.fixture
    def store(self, location: Any) -> Iterator[StateStore]:
        opened = self.open_store(location)
        yield opened
        opened.close()

    def reopen(self, store: StateStore, location: Any) -> StateStore:
        store.close()
        return self.open_store(location)

    # -- commits ---------------------------------------------------------------------------
    def test_a_new_store_is_empty_at_the_current_format(self, store: StateStore) -> None:
        assert store.get(b"k") is None and list(store.items()) == []
        assert store.positions() == {} and store.position("t", 0) is None
        assert store.format_version == FORMAT_VERSION

    def test_state_and_positions_become_visible_together_at_commit(self, store: StateStore) -> None:
        txn = store.transaction()
        txn.put(b"k", b"v")
        txn.set_position("orders", 2, 41)
        assert store.get(b"k") is None and store.position("orders", 2) is None
        txn.commit()
        assert store.get(b"k") == b"v" and store.position("orders", 2) == 41
        assert txn.finished

    def test_an_aborted_transaction_leaves_nothing(self, store: StateStore) -> None:
        txn = store.transaction()
        txn.put(b"k", b"v")
        txn.set_position("t", 0, 5)
        txn.abort()
        with pytest.raises(RuntimeError), store.transaction() as failed:
            failed.put(b"j", b"v")
            raise RuntimeError("the caller failed half-way")
        assert list(store.items()) == [] and store.positions() == {}
        with pytest.raises(TransactionFinished):
            txn.commit()

    def test_a_crash_before_the_write_lands_nothing(self, store: StateStore, location: Any) -> None:
        with store.transaction() as txn:
            txn.put(b"old", b"1")
            txn.set_position("t", 0, 1)
        txn = store.transaction()
        txn.put(b"new", b"2")
        txn.delete(b"old")
        txn.set_position("t", 0, 2)
        with armed("state.commit.before_write") as reached, pytest.raises(CrashPointReached):
            txn.commit()
        assert "state.commit.before_write" in reached
        store = self.reopen(store, location)
        assert list(store.items()) == [(b"old", b"1")] and store.positions() == {("t", 0): 1}
        store.close()

    def test_a_crash_after_the_write_lands_everything(
        self, store: StateStore, location: Any
    ) -> None:
        txn = store.transaction()
        txn.put(b"new", b"2")
        txn.set_position("t", 0, 7)
        with armed("state.commit.after_write"), pytest.raises(CrashPointReached):
            txn.commit()
        store = self.reopen(store, location)
        assert store.get(b"new") == b"2" and store.position("t", 0) == 7
        store.close()

    def test_an_empty_transaction_commits_nothing(self, store: StateStore) -> None:
        with armed("state.commit.before_write") as reached:
            store.transaction().commit()
        assert reached == [] and store.positions() == {}

    def test_commits_synced_once_are_visible_at_once_and_survive_reopen(
        self, store: StateStore, location: Any
    ) -> None:
        with store.synced_once():
            for i in range(3):
                with store.transaction() as txn:
                    txn.put(b"k%d" % i, b"v%d" % i)
                    txn.set_position("coord", 0, i + 1)
                assert store.get(b"k%d" % i) == b"v%d" % i and store.position("coord", 0) == i + 1
        with store.transaction() as txn:
            txn.put(b"after", b"x")
        store = self.reopen(store, location)
        assert dict(store.items()) == {b"k0": b"v0", b"k1": b"v1", b"k2": b"v2", b"after": b"x"}
        assert store.position("coord", 0) == 3
        store.close()

    # -- positions ---------------------------------------------------------------------------
    def test_positions_survive_reopen_and_move_only_when_committed(
        self, store: StateStore, location: Any
    ) -> None:
        with store.transaction() as txn:
            txn.set_position("b.dml", 3, 10)
            txn.set_position("b.dml", 0, 4)
            txn.set_position("a.ddl", 0, 1)
        with store.transaction() as txn:
            txn.set_position("b.dml", 3, 11)
        store = self.reopen(store, location)
        assert store.positions() == {("a.ddl", 0): 1, ("b.dml", 0): 4, ("b.dml", 3): 11}
        assert list(store.positions()) == [("a.ddl", 0), ("b.dml", 0), ("b.dml", 3)]
        assert store.position("b.dml", 3) == 11 and store.position("b.dml", 1) is None
        store.close()

    def test_state_keys_never_touch_positions_or_the_format(
        self, store: StateStore, location: Any
    ) -> None:
        with store.transaction() as txn:
            txn.put(FORMAT_VERSION_KEY, struct.pack(">I", 99))
            txn.put(b"position\x00t\x00\x00\x00\x00\x00", struct.pack(">Q", 5))
        store = self.reopen(store, location)
        assert store.format_version == FORMAT_VERSION and store.positions() == {}
        assert store.get(FORMAT_VERSION_KEY) == struct.pack(">I", 99)
        store.close()

    # -- state -------------------------------------------------------------------------------
    def test_iteration_is_in_bytewise_key_order(self, store: StateStore) -> None:
        keys = [b"b", b"a\xff", b"\x00", b"a", b"ab", b"a\x00", b"\xff\xff"]
        with store.transaction() as txn:
            for key in keys:
                txn.put(key, key + b"!")
        assert [k for k, _ in store.items()] == sorted(keys)
        assert list(store.items(b"a")) == [(k, k + b"!") for k in sorted(keys) if k[:1] == b"a"]
        it = store.iter()
        it.seek(b"a\x01")
        assert it.valid() and it.key() == b"ab"
        it.seek_for_prev(b"a\x01")
        assert it.valid() and it.key() == b"a\x00" and it.value() == b"a\x00!"
        it.next()
        assert it.key() == b"ab"
        it.seek_for_prev(b"\x00")
        it.prev()
        assert not it.valid()

    def test_delete_and_the_last_write_of_a_key_wins(self, store: StateStore) -> None:
        with store.transaction() as txn:
            txn.put(b"a", b"1")
            txn.put(b"b", b"1")
            txn.put(b"c", b"1")
        with store.transaction() as txn:
            txn.delete(b"a")
            txn.delete(b"never-written")
            txn.delete(b"b")
            txn.put(b"b", b"2")
            txn.put(b"c", b"2")
            txn.delete(b"c")
        assert list(store.items()) == [(b"b", b"2")]
        assert store.get(b"a") is None and store.get(b"c") is None

    def test_put_many_stages_like_puts_and_the_last_write_wins(self, store: StateStore) -> None:
        with store.transaction() as txn:
            txn.put(b"a", b"0")
            txn.put_many([b"a", b"c", b"b"], [b"1", b"3", b"2"])
            txn.put_many([], [])
            txn.put_many([b"c"], [b"4"])
            assert len(txn) == 5
        assert list(store.items()) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"4")]

    def test_put_many_refuses_bad_pairs_and_stages_none_of_them(self, store: StateStore) -> None:
        txn = store.transaction()
        for keys, values in (
            ([b"k", "x"], [b"1", b"2"]),
            ([b"k", b"x"], [b"1", bytearray(b"2")]),
            ([b"k", b"x"], [b"1"]),
        ):
            with pytest.raises(InvalidStateKey):
                txn.put_many(keys, values)  # type: ignore[arg-type]
        assert len(txn) == 0
        txn.commit()
        assert list(store.items()) == []

    def test_bad_keys_values_and_positions_are_refused(self, store: StateStore) -> None:
        txn = store.transaction()
        bad_calls = [
            lambda: txn.put("k", b"v"),  # type: ignore[arg-type]
            lambda: txn.put(b"k", "v"),  # type: ignore[arg-type]
            lambda: txn.delete(bytearray(b"k")),  # type: ignore[arg-type]
            lambda: txn.set_position("", 0, 1),
            lambda: txn.set_position("a\x00b", 0, 1),
            lambda: txn.set_position("t", -1, 1),
            lambda: txn.set_position("t", 0, -1),
            lambda: txn.set_position("t", 0, 1 << 64),
            lambda: txn.set_position("t", True, 1),
        ]
        for call in bad_calls:
            with pytest.raises(InvalidStateKey):
                call()
        assert len(txn) == 0
        txn.commit()
        assert list(store.items()) == [] and store.positions() == {}

    # -- format and lifecycle ----------------------------------------------------------------
    def test_an_unknown_format_version_is_refused_on_every_open(
        self, store: StateStore, location: Any
    ) -> None:
        with store.transaction() as txn:
            txn.put(b"k", b"v")
        store.close()
        self.write_raw_version(location, struct.pack(">I", UNKNOWN))
        assert UNKNOWN not in FORMAT_VERSIONS
        for _ in range(2):  # a refused open releases the store: the second is refused alike
            with pytest.raises(StateFormatUnsupported) as err:
                self.open_store(location)
            assert err.value.found == UNKNOWN
            assert f"format version {UNKNOWN}" in str(err.value)
            assert str(err.value.path) in str(err.value)

    def test_a_store_staged_at_version_2_opens_at_2_and_an_older_build_refuses_it(
        self, store: StateStore, location: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with store.transaction() as txn:
            txn.put(b"k", b"v")
            txn.set_format_version(2)
        store.close()
        reopened = self.open_store(location)
        assert reopened.format_version == 2 and reopened.get(b"k") == b"v"
        reopened.close()
        monkeypatch.setattr(base, "FORMAT_VERSIONS", (1,))  # a build knowing only 1
        with pytest.raises(StateFormatUnsupported) as err:
            self.open_store(location)
        assert err.value.found == 2

    def test_a_closed_store_and_a_finished_transaction_refuse_use(self, store: StateStore) -> None:
        done = store.transaction()
        done.commit()
        with pytest.raises(TransactionFinished):
            done.put(b"k", b"v")
        pending = store.transaction()
        pending.put(b"k", b"v")
        store.close()
        store.close()  # idempotent
        for call in (
            lambda: store.get(b"k"),
            store.transaction,
            store.positions,
            lambda: list(store.items()),
            pending.commit,
        ):
            with pytest.raises(StateStoreClosed):
                call()
        assert issubclass(StateStoreClosed, StateError)


class TestMemoryStateStore(StateStoreConformance):
    @pytest.fixture
    def location(self, tmp_path: Path) -> MemoryDisk:
        return MemoryDisk()

    def open_store(self, location: MemoryDisk) -> StateStore:
        return MemoryStateStore(location)

    def write_raw_version(self, location: MemoryDisk, raw: bytes) -> None:
        location.meta[FORMAT_VERSION_KEY] = raw


# ------------------------------------------------------------------------------ RocksDB


def meta_families() -> dict[str, Options]:
    return {META_CF: Options(raw_mode=True)}


def run_child(mode: str, path: Path, *uid: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), mode, str(path), *uid],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def open_in_child(path: Path, *uid: str) -> dict[str, str]:
    """Opens the store at `path` in a child process (as `uid`); returns what it reported."""
    child = run_child("open", path, *uid)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    result: dict[str, str] = json.loads(out)
    return result


class TestRocksDBStateStore(StateStoreConformance):
    @pytest.fixture
    def location(self, tmp_path: Path) -> Path:
        return tmp_path / "state"

    def open_store(self, location: Path) -> StateStore:
        return RocksDBStateStore(location)

    def write_raw_version(self, location: Path, raw: bytes) -> None:
        db = Rdict(str(location), Options(raw_mode=True), column_families=meta_families())
        meta = db.get_column_family(META_CF)
        meta[FORMAT_VERSION_KEY] = raw
        del meta
        db.close()

    # -- crashes -----------------------------------------------------------------------------
    def test_the_write_ahead_log_stays_bounded_although_positions_never_fill_a_memtable(
        self, location: Path
    ) -> None:
        """Every commit writes a position into the small meta column family; RocksDB keeps a
        WAL file until every column family flushed it, so without a cap the WAL held
        everything ever written."""
        store = RocksDBStateStore(location, max_total_wal_bytes=1 << 20)
        value = os.urandom(64 << 10)
        for i in range(160):  # 10 MiB of state, ten times the cap
            with store.transaction() as txn:
                txn.put(i.to_bytes(4, "big"), value)
                txn.set_position("t", 0, i + 1)
        wal = sum(p.stat().st_size for p in location.glob("*.log"))
        assert wal < 4 << 20, f"{wal} bytes of WAL kept"
        store.close()
        reopened = RocksDBStateStore(location)
        assert reopened.position("t", 0) == 160 and reopened.get((159).to_bytes(4, "big")) == value
        reopened.close()

    def test_state_and_position_agree_after_sigkill_mid_commit_loop(self, location: Path) -> None:
        acked = -1
        for kill_after in (40, 5, 120):  # three runs, each resuming from the stored position
            child = run_child("loop", location)
            assert child.stdout is not None
            for _ in range(kill_after):
                acked = int(child.stdout.readline())
            child.send_signal(signal.SIGKILL)
            assert child.wait(timeout=60) == -signal.SIGKILL
            with RocksDBStateStore(location) as store:
                position = store.position("t", 0)
                # every acknowledged commit is there; the state is exactly what the
                # committed positions say was applied, each record once
                assert position is not None and position >= acked + 1
                assert store.get(b"count") == str(position).encode()
                items = [k for k, _ in store.items(b"item/")]
                assert items == [b"item/%08d" % n for n in range(position)]

    # -- open failures -----------------------------------------------------------------------
    def test_a_store_open_in_this_process_is_in_use(self, store: StateStore) -> None:
        with pytest.raises(StateStoreInUse) as err:
            RocksDBStateStore(store.path)
        assert err.value.path == store.path and store.path in str(err.value)
        assert "LOCK" in err.value.cause  # RocksDB's own message is kept

    def test_a_store_open_in_another_process_is_in_use(self, location: Path) -> None:
        RocksDBStateStore(location).close()
        holder = run_child("hold", location)
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "open"
        try:
            with pytest.raises(StateStoreInUse, match="is in use") as err:
                RocksDBStateStore(location)
            assert "LOCK" in err.value.cause
        finally:
            holder.stdin.close()
            assert holder.wait(timeout=60) == 0
        RocksDBStateStore(location).close()  # released when the other process closed it

    def test_a_store_that_cannot_be_written_is_read_only(self) -> None:
        # root ignores file modes: then the child drops to an unprivileged user (nobody)
        as_user = ("65534",) if os.geteuid() == 0 else ()
        top = Path(tempfile.mkdtemp(prefix="state-ro-"))
        try:
            RocksDBStateStore(top / "state").close()
            for path in [top, *top.rglob("*")]:
                path.chmod(path.stat().st_mode & ~0o222 | 0o555 if path.is_dir() else 0o444)
            reported = open_in_child(top / "state", *as_user)
            assert reported["error"] == "StateStoreReadOnly", reported
            assert str(top / "state") in reported["message"]
            assert "Permission denied" in reported["message"]
        finally:
            for path in [top, *top.rglob("*")]:
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
            shutil.rmtree(top)

    @pytest.mark.parametrize("damage", ["garbled CURRENT", "flipped MANIFEST", "lost MANIFEST"])
    def test_a_damaged_store_is_corrupt(self, location: Path, damage: str) -> None:
        with RocksDBStateStore(location) as store, store.transaction() as txn:
            txn.put(b"k", b"v" * 100)
        manifest = next(location.glob("MANIFEST-*"))
        if damage == "garbled CURRENT":
            (location / "CURRENT").write_bytes(b"garbage\n")
        elif damage == "flipped MANIFEST":
            data = bytearray(manifest.read_bytes())
            for i in range(10, len(data) - 5, 7):
                data[i] ^= 0xFF
            manifest.write_bytes(bytes(data))
        else:
            manifest.unlink()
        with pytest.raises(StateStoreCorrupt) as err:
            RocksDBStateStore(location)
        assert str(location) in str(err.value) and "rebuilt" in str(err.value)
        assert err.value.cause in str(err.value)

    @pytest.mark.parametrize("where", ["under /proc", "under a file"])
    def test_a_path_that_cannot_be_a_directory_is_named_not_called_corrupt(
        self, tmp_path: Path, where: str
    ) -> None:
        # a mistyped --dir must not be reported as a corrupt store to be moved away
        (tmp_path / "file").write_text("")
        parent = (
            Path("/proc/vectorlog-no-such-dir") if where == "under /proc" else tmp_path / "file"
        )
        with pytest.raises(StateStoreOpenError) as err:
            RocksDBStateStore(parent / "rootcoord")
        assert not isinstance(err.value, StateStoreCorrupt), err.value
        assert str(parent / "rootcoord") in str(err.value)
        assert "No such file or directory" in str(err.value) or "Not a directory" in str(err.value)

    # -- migration of format 0 -----------------------------------------------------------
    def write_old_layout(self, path: Path) -> None:
        """A rootcoord directory as written before the state store: no meta column family,
        the ddl position as a raw key among the state."""
        db = Rdict(str(path), Options(raw_mode=True))
        db[b"rootcoord/ddl_position"] = struct.pack(">Q", 42)
        db[b"tso/upper_bound"] = struct.pack(">Q", 1_700_000_003_000)
        db[b"meta/v/collection/1\x00" + bytes(8)] = b"\x01{}"
        db.close()
        assert Rdict.list_cf(str(path)) == ["default"]

    def test_an_old_layout_store_is_migrated_on_open(self, location: Path) -> None:
        self.write_old_layout(location)
        legacy = {b"rootcoord/ddl_position": ("vectorlog.ddl", 0)}
        with RocksDBStateStore(location, legacy) as store:
            assert store.format_version == FORMAT_VERSION
            assert store.positions() == {("vectorlog.ddl", 0): 42}
            assert store.get(b"rootcoord/ddl_position") is None
            assert [k for k, _ in store.items()] == [
                b"meta/v/collection/1\x00" + bytes(8),
                b"tso/upper_bound",
            ]
        with RocksDBStateStore(location, legacy) as store:  # a second open changes nothing
            assert store.positions() == {("vectorlog.ddl", 0): 42}
        assert META_CF in Rdict.list_cf(str(location))

    def test_a_crash_during_migration_leaves_the_old_layout_to_migrate_again(
        self, location: Path
    ) -> None:
        self.write_old_layout(location)
        legacy = {b"rootcoord/ddl_position": ("vectorlog.ddl", 0)}
        with armed("state.commit.before_write"), pytest.raises(CrashPointReached):
            RocksDBStateStore(location, legacy)
        db = Rdict(str(location), Options(raw_mode=True), column_families=meta_families())
        assert db[b"rootcoord/ddl_position"] == struct.pack(">Q", 42)
        db.close()
        with RocksDBStateStore(location, legacy) as store:
            assert store.positions() == {("vectorlog.ddl", 0): 42}

    def test_an_old_rootcoord_directory_keeps_its_ddl_position(self, tmp_path: Path) -> None:
        from vectorlog.config import Config
        from vectorlog.runners.standalone import _open_state

        cfg = Config(log=str(tmp_path), cluster="prod")
        self.write_old_layout(cfg.state_dir() / "rootcoord")
        store = _open_state(cfg)
        try:
            assert store.positions() == {("prod.ddl", 0): 42}
        finally:
            store.close()
