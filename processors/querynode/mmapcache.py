"""The query node's local cache of sealed segments' vector storage (Milvus's queryNode.mmap):
written once a Flushed segment is loaded, memory-mapped at the next start instead of decoding
its vector binlogs again.

Per collection a folder, per segment and vector field five files: the segment's flat storage
as a faiss IndexFlat file (read back with IO_FLAG_MMAP_IFC: faiss serves it from the mapped
file, no copy), its row ids, norms and raw vectors (COSINE's vectors as inserted, the output
vectors; 0 rows for L2 / IP, whose flat storage is the vectors as inserted) as `.npy`, and
`.sum`, the xxh3-64 checksum of each of the four. They are written to temporary files as
the segment grows and renamed once it is sealed, the flat file last, so it marks a complete
entry (growentry.py). At open, before
anything reads the entry, it is checked (sizes, faiss header, dim, metric, row count,
dtypes) and every file's checksum is verified (hashing the mapped files: ~10 GB/s from the
page cache, and the pages read stay cached for the searches); any mismatch deletes it with a
warning naming the segment, and the segment loads from its binlogs. A cache file is never
trusted, and the row ids are checked against the binlogs' as rows load.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from vectorlog.core.errors import VectorlogError
from vectorlog.processors.querynode.growentry import (
    SUFFIXES,
    SUM,
    SUMMED,
    TMP,
    GrowingEntry,
    digest,
    new_flat,
)

log = logging.getLogger(__name__)


class CacheMismatch(VectorlogError):
    """Rows loaded from binlogs do not match a segment's cache entry (it is not used)."""


@dataclass
class CachedVectors:
    """One segment's cached storage: `flat` maps the file (no copy); position i holds the row
    with id `row_ids[i]` and norm `norms[i]`, inserted as `raw[i]` (COSINE; else 0 rows)."""

    flat: faiss.IndexFlat
    row_ids: np.ndarray
    norms: np.ndarray
    raw: np.ndarray

    def __len__(self) -> int:
        return len(self.row_ids)


def flat_header_bytes(dim: int, metric: str) -> int:
    """Returns the bytes of a faiss IndexFlat file before its vectors."""
    return len(faiss.serialize_index(new_flat(dim, metric)))


class SegmentCache:
    """Entries under `root`: <collection id>/<segment id>_<field id> + each of SUFFIXES."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _base(self, collection_id: int, segment_id: int, field_id: int) -> Path:
        return self.root / str(collection_id) / f"{segment_id}_{field_id}"

    def open(
        self, collection_id: int, segment_id: int, field_id: int, dim: int, metric: str, rows: int
    ) -> CachedVectors | None:
        """Returns the mapped entry of a segment holding `rows` rows of `dim`-d vectors stored
        for `metric` (L2, else inner product), or None if there is none or it does not match
        (a mismatched or damaged entry is deleted). Raises nothing."""
        base = self._base(collection_id, segment_id, field_id)
        flat_path = base.with_name(base.name + ".flat")
        if not flat_path.exists():
            return None
        try:
            return _opened(base, dim, metric, rows)
        except Exception as exc:  # whatever is wrong with it, it is rebuilt from binlogs
            log.warning(
                "query node cache entry of segment %d (collection %d, field %d) is unusable "
                "and deleted, its binlogs are read instead: %s",
                segment_id,
                collection_id,
                field_id,
                exc,
            )
            self.drop(collection_id, [segment_id])
            return None

    def base(self, collection_id: int, segment_id: int, field_id: int) -> Path:
        """Returns the path of a segment field's entry without its suffixes."""
        return self._base(collection_id, segment_id, field_id)

    def write(
        self,
        collection_id: int,
        segment_id: int,
        field_id: int,
        flat: faiss.IndexFlat,
        row_ids: np.ndarray,
        norms: np.ndarray,
        raw: np.ndarray | None = None,
    ) -> None:
        """Writes a segment's entry at once (see the module docstring); `raw` None: no raw
        vectors (L2 / IP, or a COSINE entry refused at open). Raises OSError."""
        metric = "L2" if isinstance(flat, faiss.IndexFlatL2) else "IP"
        metric = "COSINE" if raw is not None else metric
        n = flat.ntotal
        stored = faiss.rev_swig_ptr(flat.get_xb(), n * flat.d).reshape(n, flat.d)
        entry = GrowingEntry(self._base(collection_id, segment_id, field_id), flat.d, metric)
        try:
            entry.append(row_ids, norms, stored, raw)
        except BaseException:
            entry.abandon()
            raise
        entry.commit()

    def exists(
        self, collection_id: int, segment_id: int, field_id: int, rows: int | None = None
    ) -> bool:
        """Returns whether a segment has a complete entry (its flat file, written last) and,
        given `rows`, one of that many rows (its row ids file says how many)."""
        base = self._base(collection_id, segment_id, field_id)
        if not base.with_name(base.name + SUFFIXES[-1]).exists():
            return False
        if rows is None:
            return True
        try:
            ids = np.load(base.with_name(base.name + ".ids.npy"), mmap_mode="r")
        except (OSError, ValueError):  # deleted or damaged meanwhile: written again
            return False
        return bool(ids.shape == (rows,))

    def drop(self, collection_id: int, segment_ids: list[int]) -> None:
        """Deletes the entries of `segment_ids` (every field's); missing ones are skipped."""
        folder = self.root / str(collection_id)
        for sid in segment_ids:
            for path in folder.glob(f"{sid}_*"):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def drop_collection(self, collection_id: int) -> None:
        """Deletes every entry of a collection."""
        shutil.rmtree(self.root / str(collection_id), ignore_errors=True)

    def retain(self, keep: dict[int, set[int]]) -> None:
        """Deletes every entry (and leftover temporary file) except those of `keep`'s
        segments, by collection id."""
        if not self.root.is_dir():
            return
        for folder in self.root.iterdir():
            cid = int(folder.name) if folder.name.isdigit() else None
            if cid is None or cid not in keep or not folder.is_dir():
                self.drop_collection(cid) if cid is not None else _remove(folder)
                continue
            for path in folder.iterdir():
                sid = path.name.split("_", 1)[0]
                if path.name.endswith(TMP) or not sid.isdigit() or int(sid) not in keep[cid]:
                    _remove(path)

    def collections(self) -> list[int]:
        """Returns the ids of the collections with a folder here."""
        if not self.root.is_dir():
            return []
        return [int(p.name) for p in self.root.iterdir() if p.name.isdigit()]


def _opened(base: Path, dim: int, metric: str, rows: int) -> CachedVectors:
    """Returns the checked entry at `base`. Raises CacheMismatch or what reading raises."""
    flat_path = base.with_name(base.name + ".flat")
    want = flat_header_bytes(dim, metric) + rows * dim * 4
    size = flat_path.stat().st_size
    if size != want:  # checked before faiss maps it: a short file would fault on access
        raise CacheMismatch(f"{flat_path.name} has {size} B, {want} expected for {rows} rows")
    _verify(base)  # before anything reads the entry
    row_ids = np.load(base.with_name(base.name + ".ids.npy"), mmap_mode="r", allow_pickle=False)
    norms = np.load(base.with_name(base.name + ".norms.npy"), mmap_mode="r", allow_pickle=False)
    if row_ids.dtype != np.int64 or row_ids.shape != (rows,):
        raise CacheMismatch(f"row ids {row_ids.dtype}{row_ids.shape}, not int64 ({rows},)")
    if norms.dtype != np.float32 or norms.shape != (rows,):
        raise CacheMismatch(f"norms {norms.dtype}{norms.shape}, not float32 ({rows},)")
    raw = np.load(base.with_name(base.name + ".raw.npy"), mmap_mode="r", allow_pickle=False)
    shape = (rows if metric == "COSINE" else 0, dim)
    if raw.dtype != np.float32 or raw.shape != shape:
        raise CacheMismatch(f"raw vectors {raw.dtype}{raw.shape}, not float32 {shape}")
    flat = faiss.read_index(str(flat_path), faiss.IO_FLAG_MMAP_IFC)
    expected = type(new_flat(dim, metric))
    if type(flat) is not expected or flat.d != dim or flat.ntotal != rows:
        raise CacheMismatch(
            f"{flat_path.name} is a {type(flat).__name__} of {flat.ntotal} x {flat.d}, "
            f"not {expected.__name__} {rows} x {dim}"
        )
    return CachedVectors(flat, row_ids, norms, raw)


def _verify(base: Path) -> None:
    """Raises CacheMismatch unless each file of the entry at `base` has the checksum its
    `.sum` file holds."""
    sum_path = base.with_name(base.name + SUM)
    try:
        sums = json.loads(sum_path.read_bytes())
    except FileNotFoundError:
        raise CacheMismatch(f"{sum_path.name} is missing (an entry without checksums)") from None
    except ValueError:
        raise CacheMismatch(f"{sum_path.name} is not a checksum file") from None
    for suffix in SUMMED:
        want = sums.get(suffix) if isinstance(sums, dict) else None
        got = digest(base.with_name(base.name + suffix))
        if got != want:
            raise CacheMismatch(f"{base.name}{suffix}: checksum {got}, {want} was written")


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
