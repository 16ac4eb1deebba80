"""Helpers for segment index tests: faiss indexes built here (as the index node would: COSINE
on normalized vectors with inner product), their files in a dict-backed store, the
SegmentIndexed body pointing at them, and RowsInserted bodies with segment and row ids."""

from __future__ import annotations

import io
from typing import Any

import faiss
import numpy as np

from tests.processors.querynode.test_replica import rows_inserted
from vectorlog.core.model import CollectionSchema
from vectorlog.storage.errors import ObjectNotFound

CID, INDEX_ID = 7, 501
#: index type -> (faiss factory string, build params as the event carries them)
FACTORIES = {
    "FLAT": ("Flat", {}),
    "IVF_FLAT": ("IVF64,Flat", {"nlist": "64"}),
    "IVF_SQ8": ("IVF64,SQ8", {"nlist": "64"}),
    "IVF_PQ": ("IVF64,PQ10x4", {"nlist": "64", "m": "10", "nbits": "4"}),
    "HNSW": ("HNSW16", {"M": "16", "efConstruction": "200"}),
}


class DictFiles:
    """An in-memory object store: `put`/`get` by path."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.reads = 0

    def put(self, path: str, data: bytes) -> None:
        self.objects[path] = data

    def get(self, path: str) -> bytes:
        """Returns the object at `path`. Raises ObjectNotFound, as a real store does."""
        self.reads += 1
        if path not in self.objects:
            raise ObjectNotFound(path, "no such object")
        return self.objects[path]


def build(kind: str, vectors: np.ndarray, metric: str) -> faiss.Index:
    """Returns a trained faiss index of `kind` holding `vectors` (normalized for COSINE)."""
    x = np.ascontiguousarray(vectors, dtype=np.float32).copy()
    if metric == "COSINE":
        faiss.normalize_L2(x)
    faiss_metric = faiss.METRIC_L2 if metric == "L2" else faiss.METRIC_INNER_PRODUCT
    factory, _ = FACTORIES[kind]
    index = faiss.index_factory(x.shape[1], factory, faiss_metric)
    if kind == "HNSW":
        faiss.downcast_index(index).hnsw.efConstruction = 200  # type: ignore[attr-defined]
    index.train(x)
    index.add(x)
    return index


def segment_indexed(
    files: DictFiles,
    kind: str,
    vectors: np.ndarray,
    row_ids: np.ndarray,
    metric: str,
    segment_id: int,
    partition: int,
    index_id: int = INDEX_ID,
) -> dict[str, Any]:
    """Builds the index, stores its files in `files`; returns the SegmentIndexed body."""
    index = build(kind, vectors, metric)
    base = f"index_files/{CID}/{partition}/{segment_id}/{index_id}"
    buf = io.BytesIO()
    np.save(buf, np.asarray(row_ids, dtype=np.int64))
    files.put(f"{base}/index.faiss", faiss.serialize_index(index).tobytes())
    files.put(f"{base}/row_ids.npy", buf.getvalue())
    return {
        "collection_id": CID,
        "partition_id": partition,
        "segment_id": segment_id,
        "vchannel": "v0",
        "field_id": 101,
        "index_id": index_id,
        "index_name": "vec",
        "build_id": index_id,
        "index_type": kind,
        "metric_type": metric,
        "params": FACTORIES[kind][1],
        "num_rows": len(row_ids),
        "index_file": f"{base}/index.faiss",
        "row_id_file": f"{base}/row_ids.npy",
        "build_ms": 1,
    }


def inserted_body(
    s: CollectionSchema,
    ids: list[int],
    vectors: np.ndarray,
    segment_id: int,
    first_row_id: int,
    partition: int,
    **values: list[Any],
) -> dict[str, Any]:
    """A RowsInserted body of rows `ids` in segment `segment_id`, row ids from `first_row_id`."""
    body = rows_inserted(s, ids, vectors, partition, **values)
    body["segment_id"], body["first_row_id"] = segment_id, first_row_id
    return body


def exact_top(x: np.ndarray, queries: np.ndarray, k: int, metric: str) -> list[list[int]]:
    """Returns the exact top-k row numbers of `x` per query (faiss flat search)."""
    x, q = (
        np.ascontiguousarray(x, np.float32).copy(),
        np.ascontiguousarray(queries, np.float32).copy(),
    )
    if metric == "COSINE":
        faiss.normalize_L2(x)
        faiss.normalize_L2(q)
    index = faiss.IndexFlatL2(x.shape[1]) if metric == "L2" else faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    return [row.tolist() for row in index.search(q, k)[1]]


def recall(got: list[list[int]], truth: list[list[int]]) -> float:
    """Returns the mean fraction of each true top-k found."""
    hits = sum(len(set(g) & set(t)) for g, t in zip(got, truth, strict=True))
    return hits / max(1, sum(len(t) for t in truth))


def forced_branch(monkeypatch: Any, branch: str) -> list[str]:
    """Makes filtered searches of indexed segments take `branch`: "exact" (a scan of the
    selected rows), "compressed" (one query at a time: a scan of their 4-bit copy, built at
    once, reranking 32 x k candidates exactly), "index" (the index with the filter's bitmap)
    or "chosen" (the settings as shipped); returns the list each choice made is appended to
    ("exact", "compressed" or "index"), so a test can check it ran the branch it meant."""
    from vectorlog.processors.querynode import filtercache, filterplan, segment

    if branch in ("exact", "index"):
        monkeypatch.setattr(filtercache, "COMPRESS_ROWS", 1 << 62)
    if branch in ("exact", "compressed"):
        monkeypatch.setattr(filterplan, "BRUTE_FORCE_FRACTION", 1.0)
    if branch == "compressed":
        monkeypatch.setattr(filtercache, "COMPRESS_ROWS", 0)
        monkeypatch.setattr(filtercache, "COMPRESS_AFTER", 1)
        monkeypatch.setattr(filterplan, "RERANK_ROWS", 1)
    elif branch == "index":
        monkeypatch.setattr(filterplan, "BRUTE_FORCE_FRACTION", 0.0)
        monkeypatch.setattr(filterplan, "BRUTE_FORCE_TOPK", float("inf"))
        monkeypatch.setattr(filterplan, "EXACT_ROWS_PER_ANN_DISTANCE", 0.0)
        monkeypatch.setattr(filterplan, "EXACT_ROWS", 0)
    chosen: list[str] = []
    for name in ("exact_cheaper", "gather_cheaper"):
        real = getattr(filterplan, name)

        def recorded(*args: Any, _real: Any = real) -> bool:
            out = bool(_real(*args))
            chosen.append("exact" if out else "index")
            return out

        monkeypatch.setattr(segment, name, recorded)
    compressed = segment.Segment._compressed_search

    def scanned(*args: Any) -> Any:
        chosen.append("compressed")
        return compressed(*args)

    monkeypatch.setattr(segment.Segment, "_compressed_search", scanned)
    return chosen
