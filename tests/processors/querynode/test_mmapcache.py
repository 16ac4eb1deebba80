"""The segment cache's files (mmapcache.py): an entry reads back mapped and equal; a truncated,
mismatched or half-written one is refused and deleted, never served."""

from __future__ import annotations

import logging
from pathlib import Path

import faiss
import numpy as np
import pytest

from vectorlog.processors.querynode.growentry import GrowingEntry
from vectorlog.processors.querynode.mmapcache import SegmentCache, new_flat


def written(tmp_path: Path, rows: int = 50, dim: int = 8) -> tuple[SegmentCache, np.ndarray]:
    x = np.random.default_rng(0).random((rows, dim), dtype=np.float32)
    flat = new_flat(dim, "L2")
    flat.add(x)
    cache = SegmentCache(tmp_path)
    ids = np.arange(100, 100 + rows, dtype=np.int64)
    cache.write(1, 7, 101, flat, ids, np.linalg.norm(x, axis=1).astype(np.float32))
    return cache, x


def test_an_entry_reads_back_mapped_and_equal(tmp_path: Path):
    cache, x = written(tmp_path)
    got = cache.open(1, 7, 101, 8, "L2", 50)
    assert got is not None and len(got) == 50
    xb = faiss.rev_swig_ptr(got.flat.get_xb(), 50 * 8).reshape(50, 8)
    assert np.array_equal(xb, x) and got.row_ids.tolist() == list(range(100, 150))
    _, labels = got.flat.search(x[:3], 1)
    assert labels.ravel().tolist() == [0, 1, 2]
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_cosine_entry_reads_back_its_raw_vectors_bit_for_bit(tmp_path: Path):
    raw = np.random.default_rng(1).standard_normal((50, 8)).astype(np.float32)
    norms = np.linalg.norm(raw, axis=1).astype(np.float32)
    flat = new_flat(8, "COSINE")
    flat.add(raw / norms[:, None])
    cache = SegmentCache(tmp_path)
    cache.write(1, 7, 101, flat, np.arange(50, dtype=np.int64), norms, raw)
    got = cache.open(1, 7, 101, 8, "COSINE", 50)
    assert got is not None and got.raw.tobytes() == raw.tobytes()


def test_a_cosine_entry_without_raw_vectors_is_refused_and_deleted(tmp_path: Path):
    x = np.random.default_rng(1).random((50, 8), dtype=np.float32)
    flat = new_flat(8, "COSINE")
    flat.add(x)
    cache = SegmentCache(tmp_path)  # normalized vectors without their raw ones
    cache.write(1, 7, 101, flat, np.arange(50, dtype=np.int64), np.ones(50, np.float32))
    assert cache.open(1, 7, 101, 8, "COSINE", 50) is None
    assert not list(tmp_path.rglob("7_*"))
    cache, _ = written(tmp_path)
    (tmp_path / "1" / "7_101.raw.npy").unlink()
    assert cache.open(1, 7, 101, 8, "L2", 50) is None


def test_a_truncated_or_mismatched_entry_is_refused_and_deleted(tmp_path: Path):
    cache, _ = written(tmp_path)
    assert cache.open(1, 7, 101, 8, "L2", 49) is None  # other rows than the segment's
    assert not list(tmp_path.rglob("7_*"))
    cache, _ = written(tmp_path)
    assert cache.open(1, 7, 101, 8, "COSINE", 50) is None  # another storage metric
    cache, _ = written(tmp_path)
    flat = tmp_path / "1" / "7_101.flat"
    flat.write_bytes(flat.read_bytes()[:-4])
    assert cache.open(1, 7, 101, 8, "L2", 50) is None and not flat.exists()
    cache, _ = written(tmp_path)
    (tmp_path / "1" / "7_101.norms.npy").write_bytes(b"\x93NUMPY garbage")
    assert cache.open(1, 7, 101, 8, "L2", 50) is None


def test_retain_keeps_only_the_segments_still_loaded(tmp_path: Path):
    cache, _ = written(tmp_path)
    (tmp_path / "1" / "8_101.flat.tmp").write_bytes(b"half written")
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "3_101.flat").write_bytes(b"of a dropped collection")
    cache.retain({1: {7}})
    assert sorted(p.name for p in tmp_path.rglob("*")) == [
        "1",
        "7_101.flat",
        "7_101.ids.npy",
        "7_101.norms.npy",
        "7_101.raw.npy",
        "7_101.sum",
    ]
    cache.retain({1: set()})
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["1"]


def test_an_entry_whose_bytes_changed_or_without_checksums_is_refused(tmp_path: Path):
    for suffix in (".flat", ".ids.npy", ".norms.npy", ".raw.npy"):
        cache, _ = written(tmp_path)
        path = tmp_path / "1" / f"7_101{suffix}"
        spoiled = bytearray(path.read_bytes())
        spoiled[-1] ^= 0x01  # the last byte of the data: the structure stays well-formed
        path.write_bytes(bytes(spoiled))
        assert cache.open(1, 7, 101, 8, "L2", 50) is None, suffix
        assert not list(tmp_path.rglob("7_*")), suffix
    cache, _ = written(tmp_path)
    (tmp_path / "1" / "7_101.sum").unlink()  # an entry of a version without checksums
    assert cache.open(1, 7, 101, 8, "L2", 50) is None


def test_a_growing_entry_is_never_opened_until_committed_then_equals_one_written_at_once(
    tmp_path: Path,
):
    raw = np.random.default_rng(2).standard_normal((60, 8)).astype(np.float32)
    norms = np.linalg.norm(raw, axis=1).astype(np.float32)
    unit, ids = raw / norms[:, None], np.arange(60, dtype=np.int64)
    cache = SegmentCache(tmp_path / "grown")
    entry = GrowingEntry(cache.base(1, 7, 101), 8, "COSINE")
    for lo in (0, 25, 50):  # as the segment grows
        entry.append(ids[lo : lo + 25], norms[lo : lo + 25], unit[lo : lo + 25], raw[lo : lo + 25])
        assert cache.open(1, 7, 101, 8, "COSINE", entry.rows) is None
        assert not cache.exists(1, 7, 101)
    entry.commit()
    flat = new_flat(8, "COSINE")
    flat.add(unit)
    whole = SegmentCache(tmp_path / "whole")
    whole.write(1, 7, 101, flat, ids, norms, raw)
    for suffix in (".flat", ".ids.npy", ".norms.npy", ".raw.npy", ".sum"):
        name = f"1/7_101{suffix}"
        assert (tmp_path / "grown" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()
    got = cache.open(1, 7, 101, 8, "COSINE", 60)
    assert got is not None and got.raw.tobytes() == raw.tobytes()


def test_an_abandoned_entry_leaves_nothing_and_a_killed_ones_files_are_deleted(tmp_path: Path):
    cache = SegmentCache(tmp_path)
    x = np.ones((10, 8), dtype=np.float32)
    entry = GrowingEntry(cache.base(1, 7, 101), 8, "L2")
    entry.append(np.arange(10), np.ones(10, np.float32), x, None)
    entry.abandon()
    assert not list(tmp_path.rglob("7_*"))
    killed = GrowingEntry(cache.base(1, 8, 101), 8, "L2")  # its process dies here
    killed.append(np.arange(10), np.ones(10, np.float32), x, None)
    assert cache.open(1, 8, 101, 8, "L2", 10) is None and cache.open(1, 8, 101, 8, "L2", 0) is None
    cache.retain({1: {8}})  # what a start does first
    assert not list(tmp_path.rglob("8_*"))


def test_a_truncated_entry_is_ignored_with_a_warning_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    cache, _ = written(tmp_path)
    ids = tmp_path / "1" / "7_101.ids.npy"
    ids.write_bytes(ids.read_bytes()[:-8])
    with caplog.at_level(logging.WARNING, logger="vectorlog.processors.querynode.mmapcache"):
        assert cache.open(1, 7, 101, 8, "L2", 50) is None
    (warned,) = [r.getMessage() for r in caplog.records]
    assert "segment 7 " in warned and "binlogs are read instead" in warned
    assert not list(tmp_path.rglob("7_*"))
