"""`FollowerStateStore`: a read-only view of a RocksDB state store that another open store
holds (as `vectorlog collections` reads a running server's state): it sees every commit
made before it opened, state and positions, and refuses to write; a directory holding no
store is refused naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from vectorlog.state.errors import StateStoreOpenError, StateWriteReadOnly
from vectorlog.state.follower import FollowerStateStore
from vectorlog.state.rocksdb import RocksDBStateStore


def test_a_follower_reads_what_the_holder_committed_and_never_writes(tmp_path: Path) -> None:
    with RocksDBStateStore(tmp_path / "s") as primary:
        with primary.transaction() as txn:
            txn.put(b"a/1", b"one")
            txn.put(b"a/2", b"two")
            txn.put(b"b/1", b"other")
            txn.set_position("topic", 0, 42)
        with FollowerStateStore(tmp_path / "s") as follower:
            assert follower.get(b"a/1") == b"one"
            assert list(follower.items(b"a/")) == [(b"a/1", b"one"), (b"a/2", b"two")]
            assert follower.position("topic", 0) == 42
            assert follower.format_version == primary.format_version
            with pytest.raises(StateWriteReadOnly, match=str(tmp_path / "s")):
                follower.transaction()
        assert primary.get(b"a/1") == b"one"  # the holder goes on


def test_no_store_there_is_refused_naming_the_directory(tmp_path: Path) -> None:
    with pytest.raises(StateStoreOpenError, match="no state store there"):
        FollowerStateStore(tmp_path / "absent")
    assert not (tmp_path / "absent").exists()
