"""A segment cache entry written while its segment grows (mmapcache.py's format and checks).

Rows are appended to the entry's temporary files (`<name>.tmp`) as the segment gains them, so
the entry of a segment of 1M rows costs its seal only the last rows, the four headers (written
for 0 rows at the start, rewritten in place with the final count: the same length) and the
checksums. Until `commit` renames them (the flat file last) the files are temporary: never
opened, deleted at the next start (SegmentCache.retain). A process killed midway leaves only
temporary files; a machine that loses power after a commit may leave renamed files whose
bytes did not reach the disk, which the checksums checked at open catch (so no fsync: the
entry is a cache, its binlogs stay the truth).
"""

from __future__ import annotations

import contextlib
import io
import json
import mmap
import os
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

import faiss
import numpy as np
import xxhash

from vectorlog.core.errors import VectorlogError

TMP = ".tmp"
#: in write and rename order: the flat file commits
SUFFIXES = (".ids.npy", ".norms.npy", ".raw.npy", ".sum", ".flat")
SUM = ".sum"  # {suffix: xxh3-64 hex digest} of the other four files
SUMMED = (".ids.npy", ".norms.npy", ".raw.npy", ".flat")


class EntryFormatError(VectorlogError):
    """A header of a growing entry could not be rewritten in place (its length changed)."""


def new_flat(dim: int, metric: str) -> faiss.IndexFlat:
    """Returns an empty flat index of a segment's storage metric (L2, else inner product)."""
    return faiss.IndexFlatL2(dim) if metric == "L2" else faiss.IndexFlatIP(dim)


@lru_cache(maxsize=64)
def _flat_template(dim: int, metric: str) -> tuple[bytes, int, int, int]:
    """Returns a flat file's header for 0 rows, the offsets of its two row-count fields
    (ntotal and the vectors' length, found by comparing the files of 0 and 1 rows: faiss
    writes them as 8-byte little-endian integers) and the second's value per row."""
    empty = bytes(faiss.serialize_index(new_flat(dim, metric)))
    one = new_flat(dim, metric)
    one.add(np.zeros((1, dim), dtype=np.float32))
    head = bytes(faiss.serialize_index(one))[: len(empty)]
    fields = [i for i in range(len(empty)) if empty[i] != head[i]]
    if len(fields) != 2 or fields[1] - fields[0] < 8:
        raise EntryFormatError(f"unexpected faiss flat header for {dim}-d {metric}")
    per_row = int.from_bytes(head[fields[1] : fields[1] + 8], "little")
    return empty, fields[0], fields[1], per_row


def flat_header(dim: int, metric: str, rows: int) -> bytes:
    """Returns the bytes of a faiss IndexFlat file of `rows` rows before its vectors. Raises
    EntryFormatError if this faiss writes a header the module does not know."""
    empty, ntotal_at, size_at, per_row = _flat_template(dim, metric)
    out = bytearray(empty)
    out[ntotal_at : ntotal_at + 8] = rows.to_bytes(8, "little")
    out[size_at : size_at + 8] = (rows * per_row).to_bytes(8, "little")
    return bytes(out)


def npy_header(dtype: type, shape: tuple[int, ...]) -> bytes:
    """Returns the header of a `.npy` file of a C-ordered array of `dtype` and `shape`."""
    buf = io.BytesIO()
    descr = np.lib.format.dtype_to_descr(np.dtype(dtype))
    np.lib.format.write_array_header_1_0(
        buf, {"descr": descr, "fortran_order": False, "shape": shape}
    )
    return buf.getvalue()


def digest(path: Path) -> str:
    """Returns the xxh3-64 hex digest of a file's bytes (hashed through a read-only map: no
    copy). Raises OSError."""
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return xxhash.xxh3_64_hexdigest(b"")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return xxhash.xxh3_64_hexdigest(mapped)


def tmp_path(base: Path, suffix: str) -> Path:
    """Returns the temporary name of an entry's file."""
    return base.with_name(base.name + suffix + TMP)


class GrowingEntry:
    """The temporary files of one segment's entry at `base` and the rows written so far;
    `token` names the segment state the rows come from (its rows are valid while it holds)."""

    def __init__(self, base: Path, dim: int, metric: str, token: object = None) -> None:
        """Creates the temporary files for 0 rows. Raises OSError (nothing is left)."""
        self.base, self.dim, self.metric, self.token = base, dim, metric, token
        self.rows = 0
        self._files: dict[str, BinaryIO] = {}
        base.parent.mkdir(parents=True, exist_ok=True)
        try:
            for suffix, header in self._headers().items():
                self._files[suffix] = open(tmp_path(base, suffix), "wb")  # noqa: SIM115
                self._files[suffix].write(header)
        except BaseException:
            self.abandon()
            raise

    def _headers(self) -> dict[str, bytes]:
        raw_rows = self.rows if self.metric == "COSINE" else 0
        return {
            ".ids.npy": npy_header(np.int64, (self.rows,)),
            ".norms.npy": npy_header(np.float32, (self.rows,)),
            ".raw.npy": npy_header(np.float32, (raw_rows, self.dim)),
            ".flat": flat_header(self.dim, self.metric, self.rows),
        }

    def append(
        self, row_ids: np.ndarray, norms: np.ndarray, stored: np.ndarray, raw: np.ndarray | None
    ) -> None:
        """Appends rows: their ids, norms, stored (flat) vectors and, for COSINE, the vectors
        as inserted. Raises OSError."""
        n = len(row_ids)
        if len(norms) != n or stored.shape != (n, self.dim):
            raise ValueError(f"rows of {len(norms)} norms and {stored.shape} vectors, not {n}")
        self._files[".ids.npy"].write(np.ascontiguousarray(row_ids, dtype=np.int64).data)
        self._files[".norms.npy"].write(np.ascontiguousarray(norms, dtype=np.float32).data)
        self._files[".flat"].write(np.ascontiguousarray(stored, dtype=np.float32).data)
        if self.metric == "COSINE":
            if raw is None or raw.shape != stored.shape:
                raise ValueError("a COSINE entry needs the rows' raw vectors")
            self._files[".raw.npy"].write(np.ascontiguousarray(raw, dtype=np.float32).data)
        self.rows += n

    def commit(self) -> None:
        """Rewrites the headers for the rows written, writes the checksums of the summed
        files and renames the files in place, the flat file last. Raises
        OSError or EntryFormatError (the temporary files are removed)."""
        try:
            for suffix, header in self._headers().items():
                fh = self._files[suffix]
                fh.seek(0)
                if len(header) != fh.write(header) or fh.tell() != len(header):
                    raise EntryFormatError(f"{self.base.name}{suffix}: header changed length")
                fh.close()
            sums = {suffix: digest(tmp_path(self.base, suffix)) for suffix in SUMMED}
            tmp_path(self.base, SUM).write_bytes(json.dumps(sums).encode())
            for suffix in SUFFIXES:
                final = self.base.with_name(self.base.name + suffix)
                os.replace(tmp_path(self.base, suffix), final)
        except BaseException:
            self.abandon()
            raise

    def abandon(self) -> None:
        """Closes and deletes the temporary files."""
        for fh in self._files.values():
            with contextlib.suppress(OSError):
                fh.close()
        for suffix in SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                tmp_path(self.base, suffix).unlink()
