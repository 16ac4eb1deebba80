"""A loaded HNSW segment index on huge pages (hugepages.py): its stored vectors and graph
are asked for 2 MB pages when the query node reads its files, and it answers exactly as the
same files read without that advice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import faiss
import numpy as np

from tests.processors.querynode.index_support import DictFiles, segment_indexed
from vectorlog.processors.querynode.hugepages import HUGE_PAGE, advise_index, advise_range
from vectorlog.processors.querynode.sealed import read_index

DIM = 64
#: rows enough for the stored vectors (ROWS * DIM * 4 bytes, 5 MB) to hold a whole 2 MB page
ROWS = 20_000


def flagged_bytes(address: int, nbytes: int) -> int:
    """Returns the bytes of [address, address + nbytes) in mappings advised MADV_HUGEPAGE
    (VmFlags "hg" in /proc/self/smaps)."""
    total, lo, hi = 0, 0, 0
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(v, 16) for v in head.split("-"))
        elif head == "VmFlags:" and "hg" in line.split()[1:]:
            total += max(0, min(hi, address + nbytes) - max(lo, address))
    return total


def hnsw_files(rng: np.random.Generator) -> tuple[DictFiles, dict, np.ndarray]:
    """Returns a store holding an HNSW COSINE index of ROWS random rows, its SegmentIndexed
    body, and 50 queries."""
    files = DictFiles()
    x = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    body = segment_indexed(files, "HNSW", x, 1000 + np.arange(ROWS), "COSINE", 11, 1)
    q = rng.standard_normal((50, DIM)).astype(np.float32)
    faiss.normalize_L2(q)
    return files, body, q


def test_a_read_hnsw_index_holds_its_vectors_on_huge_pages_and_answers_as_before() -> None:
    files, body, q = hnsw_files(np.random.default_rng(3))
    index: Any = read_index(body, files).index
    storage: Any = faiss.downcast_index(index.storage)
    codes = storage.codes
    address, nbytes = int(codes.data()), codes.size()
    aligned = ((address + nbytes) & ~(HUGE_PAGE - 1)) - ((address + HUGE_PAGE - 1) & -HUGE_PAGE)
    assert aligned >= HUGE_PAGE
    assert flagged_bytes(address, nbytes) >= aligned
    plain = faiss.deserialize_index(np.frombuffer(files.get(body["index_file"]), np.uint8))
    for i in (index, plain):
        hnsw: Any = faiss.downcast_index(i)
        hnsw.hnsw.efSearch = 64
    got, want = index.search(q, 10), plain.search(q, 10)
    assert np.array_equal(got[1], want[1])
    assert np.array_equal(got[0], want[0])


def test_only_whole_huge_pages_of_an_hnsw_index_are_advised() -> None:
    flat = faiss.IndexFlatIP(DIM)
    flat.add(np.ones((ROWS, DIM), np.float32))
    assert advise_index(flat) == 0  # not HNSW: a flat scan reads in order
    assert advise_range(HUGE_PAGE + 4096, HUGE_PAGE - 8192) == 0  # no whole page inside
    empty = faiss.IndexHNSWFlat(DIM, 16)
    assert advise_index(empty) == 0
