"""Backing a loaded HNSW index's large arrays with 2 MB pages (Linux transparent huge pages).

An HNSW search hops between rows at random: each hop reads a row's vector and its neighbour
list, a few hundred bytes somewhere in arrays of tens of MB. With 4 KB pages those arrays
span thousands of pages, more than the CPU's TLB holds, so most hops also walk the page
tables; with 2 MB pages a 100,000-row GloVe index (33 MB) fits the TLB. faiss allocates the
arrays with malloc, which the kernel backs with 4 KB pages unless asked (THP "madvise", the
common default), so a loaded index is asked once: MADV_HUGEPAGE on the 2 MB-aligned part of
each array, then MADV_COLLAPSE (Linux 6.1) to move its pages to huge ones at once. Only the
page size changes, not a byte of the index: searches answer exactly as before (1,000 GloVe
queries in one call through pymilvus: 0.96 x the answer's time, benchmarks/search_batch_ab;
bare faiss on one thread: 0.95 x).
Best effort: where the kernel cannot (no THP, an older kernel, memory too fragmented), the
index stays on the pages it has.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any

import faiss

#: madvise(2) advice values (linux/mman.h)
MADV_HUGEPAGE = 14
MADV_COLLAPSE = 25
#: the huge page size on x86-64 and arm64 with 4 KB base pages
HUGE_PAGE = 1 << 21
#: faiss untyped (its stubs lack downcast_index's classes' vectors)
_FAISS: Any = faiss


@functools.cache
def _madvise() -> Any:
    """Returns libc's madvise (releases the GIL while it runs), None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    fn = ctypes.CDLL(None, use_errno=True).madvise
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def advise_range(address: int, nbytes: int) -> int:
    """Asks for huge pages under the 2 MB-aligned part of `nbytes` at `address` (memory this
    process allocated and keeps); returns the bytes advised (0: none aligned, or refused)."""
    madvise = _madvise()
    start = (address + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1)
    end = (address + nbytes) & ~(HUGE_PAGE - 1)
    if madvise is None or end <= start:
        return 0
    if madvise(start, end - start, MADV_HUGEPAGE) != 0:
        return 0
    madvise(start, end - start, MADV_COLLAPSE)  # refused: khugepaged may do it later
    return end - start


def _arrays(index: Any) -> list[tuple[Any, int]]:
    """Returns (faiss vector, bytes per item) of an HNSW index's arrays a search reads."""
    hnsw = index.hnsw
    out = [(hnsw.neighbors, 4), (hnsw.offsets, 8), (hnsw.levels, 4)]
    storage = _FAISS.downcast_index(index.storage)
    codes = getattr(storage, "codes", None)
    if codes is not None:
        out.append((codes, 1))
    return out


def advise_index(index: Any) -> int:
    """Asks for huge pages under the large arrays of `index` if it is an HNSW index (its
    graph and its stored vectors); returns the bytes advised."""
    if not isinstance(index, faiss.IndexHNSW):
        return 0
    done = 0
    for vec, item in _arrays(index):
        data = vec.data()
        if data is not None and vec.size():
            done += advise_range(int(data), vec.size() * item)
    return done
